import { writeFileSync } from "node:fs";
import { setTimeout as delay } from "node:timers/promises";
import pino from "pino";
import { afterAll, describe, expect, it } from "vitest";
import type { DuckConfig } from "../src/config/config-schemas.js";
import type { CriticScore, DuckEvent, ExecutionDirective } from "../src/contracts/index.js";
import { LlamaCppProvider } from "../src/models/llama/llama-cpp-provider.js";
import { writeRecording } from "../src/replay/recording-file.js";
import { replayTask } from "../src/replay/replay-task.js";
import { join } from "node:path";
import { fixtureModelsConfig } from "./helpers/fixture-models.js";
import { createTestRuntime, makeTempDir, testConfig, type TestRuntime } from "./helpers/test-runtime.js";
import { createEchoTool, createFlakyTool } from "./helpers/test-tools.js";
import { scriptedAgent, type JudgedStep } from "./helpers/scripted-agent.js";

const recordings: Array<{ name: string; events: DuckEvent[]; config: DuckConfig }> = [];
const runtimes: TestRuntime[] = [];
afterAll(async () => {
  await Promise.all(runtimes.map((runtime) => runtime.dispose()));
});

function scripted(directive: ExecutionDirective, verdictFor: (step: JudgedStep) => CriticScore["verdict"] = (step) => (step.succeeded ? "pass" : "retry")) {
  return scriptedAgent({
    directive,
    draft: "Let me think: a plan.",
    recall: { recall: true, query: "ducks" },
    verdict: (step) => ({ correctness: 1, usefulness: 1, safety: 1, verdict: verdictFor(step), reason: "scripted" }),
    streaming: { chunkSize: 5 },
  });
}

function keep(name: string, runtime: TestRuntime, taskId: string): void {
  recordings.push({ name, events: runtime.store.listEvents(taskId), config: runtime.config });
}

describe("recording tasks of every kind", () => {
  it("records them", async () => {
    // Without a model: read, remember, recall, answer honestly.
    const plain = createTestRuntime();
    runtimes.push(plain);
    for (const text of ["run `echo hello`", "remember that ducks like bread", "what do you remember about ducks?", "Tell me a joke"]) {
      const handle = plain.loop.submit({ text });
      await handle.done;
      keep(`no model: ${text}`, plain, handle.taskId);
    }

    // A plan with parallel steps, a dependency and a step that fails twice before it succeeds.
    const plan: ExecutionDirective = {
      kind: "plan",
      goal: "",
      steps: [
        { id: "a", kind: "tool", description: "", depends_on: [], tool: "echo", arguments: { text: "A", wait_ms: 30 } },
        { id: "b", kind: "tool", description: "", depends_on: [], tool: "flaky", arguments: { key: "b" } },
        { id: "c", kind: "tool", description: "", depends_on: ["a", "b"], tool: "echo", arguments: { text: "C", wait_ms: 5 } },
      ],
    };
    const planned = createTestRuntime({ models: scripted(plan), tools: [createEchoTool(), createFlakyTool(2)] });
    runtimes.push(planned);
    await planned.loop.submit({ text: "remember that ducks paddle" }).done;
    const planHandle = planned.loop.submit({ text: "tell me about ducks in three steps" });
    expect((await planHandle.done).state).toBe("completed");
    keep("parallel plan with retries", planned, planHandle.taskId);

    // A coder step whose first files fail their test; the retry gets the test output and passes.
    const coderWorkspace = makeTempDir("ducklm-replay-coder-");
    writeFileSync(join(coderWorkspace, "check.js"), 'if (require("./double.js")(4) !== 8) { console.error("double(4) is wrong"); process.exit(1); }\n');
    const coderPlan: ExecutionDirective = {
      kind: "plan",
      goal: "",
      steps: [{ id: "code", kind: "coder", description: "", depends_on: [], coder: { specification: "double.js exports x => 2x", files: ["double.js"], test_command: "node check.js" } }],
    };
    const coderModels = scripted(coderPlan).push(
      "coder",
      { files: [{ path: "double.js", content: "module.exports = (x) => x + 2;\n" }], notes: "" },
      { files: [{ path: "double.js", content: "module.exports = (x) => x * 2;\n" }], notes: "" },
    );
    const coding = createTestRuntime({ models: coderModels, workspace: coderWorkspace });
    runtimes.push(coding);
    const coderHandle = coding.loop.submit({ text: "write double.js", auto_approve: ["unknown"] });
    expect((await coderHandle.done).state).toBe("completed");
    keep("coder step with a failing test", coding, coderHandle.taskId);

    // Permissions: allowed always (and used by a second task), denied, and a cancel while waiting.
    const asking = createTestRuntime();
    runtimes.push(asking);
    const allowed = asking.loop.submit({ text: "run `cp a.txt b.txt || true`" });
    const waiting = await allowed.done;
    await asking.loop.resolvePermission(allowed.taskId, waiting.pending_permissions[0]!.request_id, "allow_always").done;
    keep("allowed always", asking, allowed.taskId);
    const reused = asking.loop.submit({ text: "run `cp a.txt b.txt || true`" });
    await reused.done;
    keep("approval used", asking, reused.taskId);
    const denied = asking.loop.submit({ text: "run `cp x.txt y.txt`" });
    const deniedWaiting = await denied.done;
    await asking.loop.resolvePermission(denied.taskId, deniedWaiting.pending_permissions[0]!.request_id, "deny").done;
    keep("denied", asking, denied.taskId);
    // Denied at one decision, allowed at the next: both steps are step-1, attempt 1, and only the second ran.
    const askingTwice = createTestRuntime({
      runtime: { agent: { max_iterations: 4 } },
      models: scriptedAgent({
        directive: (_request, view) =>
          view.decision === 1
            ? { kind: "tool", tool: "shell_exec", arguments: { command: "cp x.txt y.txt" }, reason: "copy it" }
            : view.decision === 2
              ? { kind: "tool", tool: "shell_exec", arguments: { command: "cp x.txt z.txt" }, reason: "copy it elsewhere" }
              : { kind: "respond", answer: "Copied to z.txt." },
      }),
    });
    runtimes.push(askingTwice);
    writeFileSync(join(askingTwice.workspace, "x.txt"), "x\n");
    const twice = askingTwice.loop.submit({ text: "copy x.txt" });
    const firstAsk = await twice.done;
    const secondAsk = await askingTwice.loop.resolvePermission(twice.taskId, firstAsk.pending_permissions[0]!.request_id, "deny").done;
    expect(secondAsk.state).toBe("awaiting_permission");
    expect((await askingTwice.loop.resolvePermission(twice.taskId, secondAsk.pending_permissions[0]!.request_id, "allow").done).state).toBe("completed");
    keep("denied, then allowed at the next decision", askingTwice, twice.taskId);
    const abandoned = asking.loop.submit({ text: "run `cp p.txt q.txt`" });
    await abandoned.done;
    asking.loop.cancel(abandoned.taskId);
    asking.loop.recordFeedback(allowed.taskId, { target: "answer", rating: "up", comment: "fine" });
    keep("cancelled while waiting", asking, abandoned.taskId);

    // Steps refused side by side, written without a tool or a model in between, next to one that runs.
    const refusals: ExecutionDirective = {
      kind: "plan",
      goal: "",
      steps: [
        { id: "format", kind: "tool", description: "", depends_on: [], tool: "shell_exec", arguments: { command: "mkfs /dev/sda" } },
        { id: "outside", kind: "tool", description: "", depends_on: [], tool: "file_read", arguments: { path: "/etc/hostname" } },
        { id: "list", kind: "tool", description: "", depends_on: [], tool: "shell_exec", arguments: { command: "ls" } },
        { id: "erase", kind: "tool", description: "", depends_on: [], tool: "shell_exec", arguments: { command: "rm -rf /" } },
        { id: "later", kind: "tool", description: "", depends_on: ["format"], tool: "shell_exec", arguments: { command: "ls" } },
      ],
    };
    const refusing = createTestRuntime({ models: scripted(refusals), runtime: { scheduler: { max_parallel_steps: 4 } } });
    runtimes.push(refusing);
    const refusedHandle = refusing.loop.submit({ text: "clean up the disk" });
    expect((await refusedHandle.done).state).toBe("failed");
    keep("parallel steps refused at once", refusing, refusedHandle.taskId);

    // A step waiting to retry while its sibling fails the task: it does not run again.
    const retrying = createTestRuntime({
      models: scripted(
        { kind: "plan", goal: "", steps: [{ id: "a", kind: "tool", description: "", depends_on: [], tool: "echo", arguments: { text: "A" } }, { id: "b", kind: "tool", description: "", depends_on: [], tool: "echo", arguments: { text: "B", wait_ms: 40 } }] },
        (step) => (step.stepId === "a" ? "retry" : "fail"),
      ),
      tools: [createEchoTool()],
      runtime: { retry: { backoff_ms: 150 } },
    });
    runtimes.push(retrying);
    const retryHandle = retrying.loop.submit({ text: "retry one, fail the other" });
    expect((await retryHandle.done).state).toBe("failed");
    expect(retrying.store.listEvents(retryHandle.taskId).filter((event) => event.type === "step-started" && (event.payload as { step_id: string }).step_id === "a")).toHaveLength(1);
    keep("a retry dropped when a sibling fails the task", retrying, retryHandle.taskId);

    // Cancelled before anything was decided.
    const early = createTestRuntime();
    runtimes.push(early);
    const earlyHandle = early.loop.submit({ text: "run `ls`" });
    early.loop.cancel(earlyHandle.taskId);
    expect((await earlyHandle.done).state).toBe("cancelled");
    keep("cancelled before the first decision", early, earlyHandle.taskId);

    // Allowed always, then the same command again in a later decision of the same task.
    const again = createTestRuntime({
      runtime: { agent: { max_iterations: 3 } },
      models: scriptedAgent({
        directive: (_request, view) => (view.decision <= 2 ? { kind: "tool", tool: "shell_exec", arguments: { command: "cp missing.txt copy.txt" }, reason: "" } : { kind: "respond", answer: "gave up" }),
        verdict: (step) => ({ correctness: 1, usefulness: 1, safety: 1, verdict: step.succeeded ? "pass" : "fail", reason: "scripted" }),
      }),
    });
    runtimes.push(again);
    const againHandle = again.loop.submit({ text: "copy it, twice if need be" });
    let againOutcome = await againHandle.done;
    while (againOutcome.state === "awaiting_permission") againOutcome = await again.loop.resolvePermission(againHandle.taskId, againOutcome.pending_permissions[0]!.request_id, "allow_always").done;
    const againTypes = again.store.listEvents(againHandle.taskId).map((event) => event.type);
    expect(againTypes).toContain("approval-granted");
    expect(againTypes).toContain("approval-used");
    keep("allowed always, then used again in the same task", again, againHandle.taskId);

    // Cancelled in the middle of a running step, and timed out.
    const slow: ExecutionDirective = { kind: "tool", tool: "echo", arguments: { text: "slow", wait_ms: 5_000 }, reason: "" };
    const slowRuntime = createTestRuntime({ models: scripted(slow), tools: [createEchoTool()], runtime: { timeouts: { task_ms: 400 } } });
    runtimes.push(slowRuntime);
    const cancelled = slowRuntime.loop.submit({ text: "slow one" });
    await delay(100);
    slowRuntime.loop.cancel(cancelled.taskId, "changed my mind");
    await cancelled.done;
    keep("cancelled while running", slowRuntime, cancelled.taskId);
    const timedOut = slowRuntime.loop.submit({ text: "slow two" });
    expect((await timedOut.done).error?.code).toBe("DUCK_ERR_TASK_TIMEOUT");
    keep("timed out", slowRuntime, timedOut.taskId);

    // A restart in the middle of a plan.
    const home = makeTempDir();
    const restartPlan: ExecutionDirective = {
      kind: "plan",
      goal: "",
      steps: [
        { id: "first", kind: "tool", description: "", depends_on: [], tool: "echo", arguments: { text: "1" } },
        { id: "second", kind: "tool", description: "", depends_on: ["first"], tool: "echo", arguments: { text: "2", wait_ms: 5_000 } },
      ],
    };
    const before = createTestRuntime({ home, models: scripted(restartPlan), tools: [createEchoTool()] });
    const interrupted = before.loop.submit({ text: "interrupted" });
    await delay(200);
    await before.close();
    const after = createTestRuntime({ home, models: scripted({ ...restartPlan, steps: restartPlan.steps.map((step) => ({ ...step, arguments: { text: "x" } })) }), tools: [createEchoTool()] });
    runtimes.push(after);
    const resumed = after.resumeUnfinished();
    await resumed.tasks[0]!.done;
    keep("resumed after a restart", after, interrupted.taskId);

    // The agent loop: read a file, see its text, answer from it; and a step that takes another's output.
    const looping = createTestRuntime({
      runtime: { agent: { max_iterations: 4 } },
      tools: [createEchoTool()],
      models: scriptedAgent({
        directive: [
          { kind: "tool", tool: "file_read", arguments: { path: "notes.txt" }, reason: "read the notes first" },
          {
            kind: "plan",
            goal: "echo what was read",
            steps: [
              { id: "a", kind: "tool", description: "", depends_on: [], tool: "echo", arguments: { text: "ducks" } },
              { id: "b", kind: "tool", description: "", depends_on: [], tool: "echo", arguments: { text: "{{a.output}} like bread" } },
            ],
          },
          { kind: "respond", answer: "The notes say ducks like bread (from the file_read and step b)." },
        ],
        streaming: { chunkSize: 5 },
      }),
    });
    runtimes.push(looping);
    writeFileSync(join(looping.workspace, "notes.txt"), "Ducks like bread.\n");
    const loopHandle = looping.loop.submit({ text: "What do my notes say about ducks?" });
    await loopHandle.done;
    keep("agent loop reads then answers", looping, loopHandle.taskId);

    // A long loop whose results outgrow the observations budget: the earliest decisions are summarised.
    const longLoop = createTestRuntime({
      runtime: { agent: { max_iterations: 6 } },
      models: scriptedAgent({
        directive: (_request, view) =>
          view.decision <= 4 ? { kind: "tool", tool: "file_read", arguments: { path: `part-${view.decision}.txt` }, reason: "read the next part" } : { kind: "respond", answer: "Read all four parts." },
        summary: (request) => `Parts read so far: ${(request.prompt.match(/part \d/g) ?? []).length} mentions.`,
      }),
    });
    runtimes.push(longLoop);
    for (let part = 1; part <= 4; part += 1) writeFileSync(join(longLoop.workspace, `part-${part}.txt`), `part ${part} `.repeat(700));
    const longHandle = longLoop.loop.submit({ text: "Read the four parts." });
    await longHandle.done;
    expect(longLoop.store.listEvents(longHandle.taskId).some((event) => event.type === "context-summarised")).toBe(true);
    keep("agent loop summarises its earliest decisions", longLoop, longHandle.taskId);

    // The real model path, on the fixture model, deciding again after its steps.
    for (const seed of [3, 4, 5]) {
      const models = new LlamaCppProvider({ config: fixtureModelsConfig(), modelsDir: "/", logger: pino({ level: "silent" }), seed });
      const real = createTestRuntime({ models, runtime: { agent: { max_iterations: 3 } } });
      runtimes.push(real);
      const handle = real.loop.submit({ text: `Look around the workspace (seed ${seed}).`, auto_approve: ["unknown"] });
      await handle.done;
      keep(`fixture model, seed ${seed}`, real, handle.taskId);
    }
    expect(recordings.length).toBeGreaterThanOrEqual(22);
  }, 240_000);
});

describe("exact replay", () => {
  it("reproduces every recorded task's event sequence with no model and no tool", async () => {
    const failures: string[] = [];
    for (const recording of recordings) {
      const report = await replayTask(recording.events, recording.config);
      if (!report.matches) failures.push(`${recording.name}: ${JSON.stringify(report.first_difference)}`);
      expect(report.recorded).toBe(recording.events.length);
    }
    expect(failures).toEqual([]);
    // `DUCKLM_WRITE_REPLAYS=1 npx vitest run test/replay.test.ts` refreshes the stored logs in test/replays/.
    // DUCKLM_WRITE_REPLAYS=1 writes them all; any other value writes those whose name contains it.
    const only = process.env.DUCKLM_WRITE_REPLAYS;
    if (only) {
      for (const recording of recordings.filter((entry) => only === "1" || entry.name.includes(only))) {
        // Stored logs replay with the test configuration; the loop's limits travel in task-started.
        if (JSON.stringify({ ...recording.config.runtime, agent: null }) !== JSON.stringify({ ...testConfig().runtime, agent: null })) continue;
        const name = recording.name.replace(/[^a-z0-9]+/gi, "-").replace(/^-|-$/g, "").toLowerCase();
        writeRecording(join(import.meta.dirname, "replays", `${name}.jsonl`), recording.events);
      }
    }
  }, 240_000);

  it("reports where a replay first differs", async () => {
    const recording = recordings.find((entry) => entry.name === "parallel plan with retries")!;
    const tampered = recording.events.map((event) =>
      event.type === "tool-result" && event.payload.step_id === "c" ? { ...event, payload: { ...event.payload, result: { ...(event.payload.result as object), ok: false, output: "", error: { code: "DUCK_ERR_TOOL_FAILED", message: "changed" } } } } : event,
    );
    const report = await replayTask(tampered, testConfig());
    expect(report.matches).toBe(false);
    expect(report.first_difference?.seq).toBeGreaterThan(1);
  }, 60_000);
});
