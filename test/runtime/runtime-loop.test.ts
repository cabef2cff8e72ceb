import { readFileSync } from "node:fs";
import { setTimeout as delay } from "node:timers/promises";
import { z } from "zod";
import { defineTool } from "../../src/tools/tool-definition.js";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type DuckEvent, type ExecutionDirective } from "../../src/contracts/index.js";
import { createTestRuntime, type TestRuntime } from "../helpers/test-runtime.js";
import { createEchoTool, createFlakyTool } from "../helpers/test-tools.js";
import { scriptedAgent } from "../helpers/scripted-agent.js";
import { outcomeOf } from "../../src/runtime/task-outcome.js";

const runtimes: TestRuntime[] = [];
afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((runtime) => runtime.dispose()));
});

/** Thinker drafts; steps are judged by their success. */
const plannerProvider = (directive: ExecutionDirective) => scriptedAgent({ directive });

function types(events: DuckEvent[]): string[] {
  return events.map((event) => event.type);
}

function setup(options: Parameters<typeof createTestRuntime>[0]): TestRuntime {
  const runtime = createTestRuntime(options);
  runtimes.push(runtime);
  return runtime;
}

describe("RuntimeLoop with a scripted model", () => {
  it("runs a 3-step plan with one dependency in order, with events numbered 1..N without gaps", async () => {
    const log: Array<{ text: string; start: number; end: number }> = [];
    const directive: ExecutionDirective = {
      kind: "plan",
      goal: "three echoes",
      steps: [
        { id: "a", kind: "tool", description: "", depends_on: [], tool: "echo", arguments: { text: "A", wait_ms: 30 } },
        { id: "b", kind: "tool", description: "", depends_on: ["a"], tool: "echo", arguments: { text: "B" } },
        { id: "c", kind: "tool", description: "", depends_on: ["b"], tool: "echo", arguments: { text: "C" } },
      ],
    };
    const runtime = setup({ models: plannerProvider(directive), tools: [createEchoTool(log)] });
    const handle = runtime.loop.submit({ text: "echo three things" });
    const outcome = await handle.done;
    expect(outcome.state).toBe("completed");
    expect(log.map((entry) => entry.text)).toEqual(["A", "B", "C"]);

    const events = runtime.store.listEvents(handle.taskId);
    expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
    const completedOrder = events.filter((event) => event.type === "step-completed").map((event) => event.payload.step_id);
    expect(completedOrder).toEqual(["a", "b", "c"]);
    // b starts only after a completed.
    const seqOf = (type: string, step: string) => events.find((event) => event.type === type && event.payload.step_id === step)!.seq;
    expect(seqOf("step-started", "b")).toBeGreaterThan(seqOf("step-completed", "a"));
    expect(types(events)[0]).toBe("task-received");
    expect(types(events).at(-1)).toBe("task-completed");
    // The scripted model answers at once: each output is recorded whole, by its completion.
    expect(types(events)).toContain("model-output-completed");
    // Every step was judged by the (scripted) critic model, not the heuristic.
    expect(events.filter((event) => event.type === "critic-scored").map((event) => event.payload.source)).toEqual(["model", "model", "model"]);
    expect(runtime.store.getTask(handle.taskId)?.state).toBe("completed");
  });

  it("runs two independent steps at the same time", async () => {
    const log: Array<{ text: string; start: number; end: number }> = [];
    const directive: ExecutionDirective = {
      kind: "plan",
      goal: "",
      steps: [
        { id: "left", kind: "tool", description: "", depends_on: [], tool: "echo", arguments: { text: "L", wait_ms: 250 } },
        { id: "right", kind: "tool", description: "", depends_on: [], tool: "echo", arguments: { text: "R", wait_ms: 250 } },
      ],
    };
    const runtime = setup({ models: plannerProvider(directive), tools: [createEchoTool(log)] });
    const outcome = await runtime.loop.submit({ text: "two at once" }).done;
    expect(outcome.state).toBe("completed");
    const [first, second] = log;
    expect(first && second).toBeTruthy();
    // Overlap: each started before the other ended.
    expect(first!.start).toBeLessThan(second!.end);
    expect(second!.start).toBeLessThan(first!.end);
  });

  it("respects the parallel limit", async () => {
    const log: Array<{ text: string; start: number; end: number }> = [];
    const directive: ExecutionDirective = {
      kind: "plan",
      goal: "",
      steps: ["s1", "s2", "s3"].map((id) => ({ id, kind: "tool" as const, description: "", depends_on: [], tool: "echo", arguments: { text: id, wait_ms: 60 } })),
    };
    const runtime = setup({ models: plannerProvider(directive), tools: [createEchoTool(log)], runtime: { scheduler: { max_parallel_steps: 1 } } });
    expect((await runtime.loop.submit({ text: "one at a time" }).done).state).toBe("completed");
    for (let i = 1; i < log.length; i += 1) expect(log[i]!.start).toBeGreaterThanOrEqual(log[i - 1]!.end);
  });

  it("lets the steps already running finish when another step fails the task, and starts no more", async () => {
    const directive: ExecutionDirective = {
      kind: "plan",
      goal: "",
      steps: [
        { id: "refused", kind: "tool", description: "", depends_on: [], tool: "shell_exec", arguments: { command: "mkfs /dev/sda" } },
        { id: "slow", kind: "tool", description: "", depends_on: [], tool: "echo", arguments: { text: "still done", wait_ms: 300 } },
        { id: "after", kind: "tool", description: "", depends_on: ["refused"], tool: "echo", arguments: { text: "never" } },
      ],
    };
    const runtime = setup({ models: plannerProvider(directive), tools: [createEchoTool()] });
    const outcome = await runtime.loop.submit({ text: "format and wait" }).done;
    expect(outcome.state).toBe("failed");
    expect(outcome.error?.code).toBe("DUCK_ERR_HARD_STOP");
    const events = runtime.store.listEvents(outcome.task_id);
    const slowResult = events.find((event) => event.type === "tool-result" && (event.payload as { step_id: string }).step_id === "slow");
    expect((slowResult?.payload as { result: { ok: boolean; output: string } }).result).toMatchObject({ ok: true, output: "still done" });
    expect(events.some((event) => event.type === "step-completed" && (event.payload as { step_id: string }).step_id === "slow")).toBe(true);
    expect(events.some((event) => event.type === "step-started" && (event.payload as { step_id: string }).step_id === "after")).toBe(false);
    expect(events.at(-1)?.type).toBe("task-failed");
  });

  it("closes the questions of a task that has ended: an answer afterwards is refused and grants nothing", async () => {
    const directive: ExecutionDirective = { kind: "tool", tool: "shell_exec", arguments: { command: "cp a.txt b.txt" }, reason: "" };
    const runtime = setup({ models: plannerProvider(directive) });
    const handle = runtime.loop.submit({ text: "copy" });
    const waiting = await handle.done;
    expect(waiting.state).toBe("awaiting_permission");
    const requestId = waiting.pending_permissions[0]!.request_id;
    runtime.loop.cancel(handle.taskId);
    const cancelled = outcomeOf(runtime.store.projection(handle.taskId));
    expect(cancelled.state).toBe("cancelled");
    expect(cancelled.pending_permissions).toEqual([]);
    expect(() => runtime.loop.resolvePermission(handle.taskId, requestId, "allow_always")).toThrow(expect.objectContaining({ code: "DUCK_ERR_TASK_NOT_ACTIVE" }));
    expect(runtime.approvals.findActive("cp a.txt b.txt", runtime.workspace)).toBeNull();
    expect(runtime.store.listEvents(handle.taskId).at(-1)?.type).toBe("task-cancelled");
  });

  it("ends a plan with a dependency cycle in a failure event that names the cycle", async () => {
    const directive: ExecutionDirective = {
      kind: "plan",
      goal: "",
      steps: [
        { id: "x", kind: "tool", description: "", depends_on: ["y"], tool: "echo", arguments: { text: "x" } },
        { id: "y", kind: "tool", description: "", depends_on: ["x"], tool: "echo", arguments: { text: "y" } },
      ],
    };
    const runtime = setup({ models: plannerProvider(directive), tools: [createEchoTool()] });
    const handle = runtime.loop.submit({ text: "circular" });
    const outcome = await handle.done;
    expect(outcome.state).toBe("failed");
    expect(outcome.error?.code).toBe("DUCK_ERR_PLAN_CYCLE");
    expect(outcome.error?.message).toMatch(/x -> y -> x|y -> x -> y/);
    const last = runtime.store.listEvents(handle.taskId).at(-1)!;
    expect(last.type).toBe("task-failed");
    expect(types(runtime.store.listEvents(handle.taskId))).not.toContain("step-started");
    // It was sent back to the compiler first, as many times as agent.directive_retries allows.
    expect(runtime.store.listEvents(handle.taskId).filter((event) => event.type === "directive-retried")).toHaveLength(2);
  });

  it("sends a plan that cannot be ordered back to the compiler, which mends it", async () => {
    const step = (id: string, text: string, depends_on: string[] = []) => ({ id, kind: "tool" as const, description: "", depends_on, tool: "echo", arguments: { text } });
    const runtime = setup({
      tools: [createEchoTool()],
      models: scriptedAgent({
        directive: [
          // A step that uses its own output, then two steps of one id, then a plan that can run.
          { kind: "plan", goal: "", steps: [step("s1", "{{s1.output}} again")] },
          { kind: "plan", goal: "", steps: [step("s1", "a"), step("s1", "b")] },
          { kind: "plan", goal: "", steps: [step("s1", "a"), step("s2", "{{s1.output}}b")] },
          { kind: "respond", answer: "done" },
        ],
      }),
    });
    const outcome = await runtime.loop.submit({ text: "mend it" }).done;
    expect(outcome.state).toBe("completed");
    const retried = runtime.store.listEvents(outcome.task_id).filter((event) => event.type === "directive-retried").map((event) => String(event.payload.error));
    expect(retried).toHaveLength(2);
    expect(retried[0]).toMatch(/step "s1" uses its own output; a step can use only the output of steps that run before it/);
    expect(retried[1]).toMatch(/two steps with id "s1"; give every step its own id/);
  });

  it("sends a plan longer than scheduler.max_plan_steps back to the model, and runs a longer one that the limit allows", async () => {
    const chain = (count: number) => ({
      kind: "plan" as const,
      goal: "",
      steps: Array.from({ length: count }, (_, i) => ({ id: `s${i + 1}`, kind: "tool" as const, description: "", depends_on: i === 0 ? [] : [`s${i}`], tool: "echo", arguments: { text: `${i + 1}` } })),
    });
    const shortened = setup({ tools: [createEchoTool()], models: scriptedAgent({ directive: [chain(60), chain(3), { kind: "respond", answer: "done" }] }) });
    const mended = await shortened.loop.submit({ text: "count to sixty" }).done;
    expect(mended.state).toBe("completed");
    const events = shortened.store.listEvents(mended.task_id);
    const retried = events.filter((event) => event.type === "directive-retried").map((event) => String(event.payload.error));
    expect(retried).toEqual([expect.stringMatching(/^the plan has 60 steps, more than the 50 runtime.json's scheduler.max_plan_steps allows/)]);
    expect(events.filter((event) => event.type === "step-completed")).toHaveLength(3);

    const refused = setup({ tools: [createEchoTool()], models: scriptedAgent({ directive: chain(60) }) });
    const failed = await refused.loop.submit({ text: "count to sixty" }).done;
    expect(failed.error?.code).toBe("DUCK_ERR_PLAN_TOO_LONG");

    // 70 steps: about 7,000 characters of JSON, within what the bundled compiler's max_tokens lets it write.
    const allowed = setup({ tools: [createEchoTool()], runtime: { scheduler: { max_plan_steps: 80 } }, models: scriptedAgent({ directive: [chain(70), { kind: "respond", answer: "done" }] }) });
    const long = await allowed.loop.submit({ text: "count to seventy" }).done;
    expect(long.error ?? null).toBeNull();
    expect(long.state).toBe("completed");
    const longEvents = allowed.store.listEvents(long.task_id);
    expect(longEvents.filter((event) => event.type === "step-completed").map((event) => event.payload.step_id)).toEqual(Array.from({ length: 70 }, (_, i) => `s${i + 1}`));
    // The limit it ran under is recorded, so its replay allows the same plan.
    expect(longEvents.find((event) => event.type === "task-started")?.payload).toMatchObject({ settings: { scheduler: { max_plan_steps: 80 } } });
    const { replayTask } = await import("../../src/replay/replay-task.js");
    const report = await replayTask(longEvents, allowed.config);
    expect(report.first_difference ?? null).toBeNull();
  });

  it("fails a plan that depends on a missing step with a clear error", async () => {
    const directive: ExecutionDirective = {
      kind: "plan",
      goal: "",
      steps: [{ id: "x", kind: "tool", description: "", depends_on: ["ghost"], tool: "echo", arguments: { text: "x" } }],
    };
    const runtime = setup({ models: plannerProvider(directive), tools: [createEchoTool()] });
    const outcome = await runtime.loop.submit({ text: "missing" }).done;
    expect(outcome.error?.code).toBe("DUCK_ERR_PLAN_MISSING_DEPENDENCY");
    expect(outcome.error?.message).toMatch(/^step "x" depends on "ghost", which is not in the plan/);
    // The model was told, and asked again, before the task failed.
    expect(runtime.store.listEvents(outcome.task_id).filter((event) => event.type === "directive-retried")).toHaveLength(2);
  });

  it("retries a step that fails twice and then succeeds, within the retry limit", async () => {
    const flaky = createFlakyTool(2);
    const directive: ExecutionDirective = { kind: "tool", tool: "flaky", arguments: { key: "k" }, reason: "" };
    const runtime = setup({ tools: [flaky], models: plannerProvider(directive) });
    const handle = runtime.loop.submit({ text: "try hard" });
    const outcome = await handle.done;
    expect(outcome.state).toBe("completed");
    expect(flaky.calls.get("k")).toBe(3);
    const events = runtime.store.listEvents(handle.taskId);
    expect(events.filter((event) => event.type === "step-retrying")).toHaveLength(2);
    expect(events.filter((event) => event.type === "step-started").map((event) => event.payload.attempt)).toEqual([1, 2, 3]);
  });

  it("does not run a side-effecting command again by itself after it ran and failed, but retries one that is safe to repeat", async () => {
    const runtime = setup({ models: plannerProvider({ kind: "tool", tool: "shell_exec", arguments: { command: "echo once >> appended.txt; exit 1" }, reason: "" }) });
    const outcome = await runtime.loop.submit({ text: "append", auto_approve: ["unknown"] }).done;
    expect(outcome.state).toBe("failed");
    // Appended once: the failure went to the task, not into a second run of the same command.
    expect(readFileSync(join(runtime.workspace, "appended.txt"), "utf8")).toBe("once\n");
    const events = runtime.store.listEvents(outcome.task_id);
    expect(events.filter((event) => event.type === "tool-called")).toHaveLength(1);
    expect(outcome.error?.message).toMatch(/not run again: it ran, failed and may have changed something/);
    // Said so even when the critic passed it (a failed command cannot pass).
    const passing = setup({ models: scriptedAgent({ directive: { kind: "tool", tool: "shell_exec", arguments: { command: "echo once >> passed.txt; exit 1" }, reason: "" }, verdict: () => "pass" }) });
    const passed = await passing.loop.submit({ text: "append", auto_approve: ["unknown"] }).done;
    expect(passed.error?.message).toMatch(/not run again: it ran, failed and may have changed something/);

    // A command that does no more when repeated is retried as before.
    const looking = setup({ models: plannerProvider({ kind: "tool", tool: "shell_exec", arguments: { command: "ls no-such-folder" }, reason: "" }), runtime: { retry: { max_step_retries: 2, backoff_ms: 1 } } });
    const looked = await looking.loop.submit({ text: "look" }).done;
    expect(looked.state).toBe("failed");
    expect(looking.store.listEvents(looked.task_id).filter((event) => event.type === "tool-called")).toHaveLength(3);
  });

  it("fails the task once retries are spent", async () => {
    const flaky = createFlakyTool(5);
    const directive: ExecutionDirective = { kind: "tool", tool: "flaky", arguments: { key: "k" }, reason: "" };
    const runtime = setup({ tools: [flaky], models: plannerProvider(directive), runtime: { retry: { max_step_retries: 1 } } });
    const outcome = await runtime.loop.submit({ text: "give up" }).done;
    expect(outcome.state).toBe("failed");
    expect(flaky.calls.get("k")).toBe(2);
    expect(outcome.error?.message).toMatch(/retries spent \(1 of 1\)/);
  });

  it("skips the dependents of a failed step when recovery says continue", async () => {
    const flaky = createFlakyTool(10);
    const directive: ExecutionDirective = {
      kind: "plan",
      goal: "",
      steps: [
        { id: "bad", kind: "tool", description: "", depends_on: [], tool: "flaky", arguments: { key: "bad" } },
        { id: "after-bad", kind: "tool", description: "", depends_on: ["bad"], tool: "echo", arguments: { text: "never" } },
        { id: "good", kind: "tool", description: "", depends_on: [], tool: "echo", arguments: { text: "fine" } },
      ],
    };
    const runtime = setup({
      tools: [flaky, createEchoTool()],
      models: plannerProvider(directive),
      runtime: { retry: { max_step_retries: 0 }, recovery: { on_exhausted: "continue" } },
    });
    const handle = runtime.loop.submit({ text: "partial" });
    const outcome = await handle.done;
    expect(outcome.state).toBe("completed");
    const projection = runtime.store.projection(handle.taskId);
    expect(projection.steps.bad?.status).toBe("failed");
    expect(projection.steps["after-bad"]?.status).toBe("skipped");
    expect(projection.steps.good?.status).toBe("succeeded");
    expect(outcome.answer).toMatch(/✗ bad/);
  });

  it("lets no step outlive a plan whose loop failed: a sibling still running is stopped and awaited first", async () => {
    let siblingSettledAt: number | null = null;
    const slowSibling = defineTool({
      name: "slow_sibling",
      description: "Waits until stopped.",
      inputSchema: z.object({}),
      effect: "read-only",
      async execute(_input, context) {
        try {
          await delay(5_000, undefined, { signal: context.signal });
          return { ok: true, output: "waited it out" };
        } finally {
          siblingSettledAt = performance.now();
        }
      },
    });
    const directive: ExecutionDirective = {
      kind: "plan",
      goal: "",
      steps: [
        { id: "bad", kind: "tool", description: "", depends_on: [], tool: "flaky", arguments: { key: "bad" } },
        { id: "after-bad", kind: "tool", description: "", depends_on: ["bad"], tool: "echo", arguments: { text: "never" } },
        { id: "slow", kind: "tool", description: "", depends_on: [], tool: "slow_sibling", arguments: {} },
      ],
    };
    const runtime = setup({
      tools: [createFlakyTool(10), createEchoTool(), slowSibling],
      models: plannerProvider(directive),
      runtime: { retry: { max_step_retries: 0 }, recovery: { on_exhausted: "continue" } },
    });
    // Storage fails while the plan records the skipped dependent, with "slow" still at work.
    const appendAll = runtime.store.appendAll.bind(runtime.store);
    runtime.store.appendAll = ((taskId, events, ...rest) => {
      if (events.some((event) => event.type === "step-skipped")) throw new Error("disk full while skipping");
      return appendAll(taskId, events, ...rest);
    }) as typeof runtime.store.appendAll;
    const started = performance.now();
    const outcome = await runtime.loop.submit({ text: "partial, then a broken disk" }).done;
    const endedAt = performance.now();
    expect(outcome.state).toBe("failed");
    expect(siblingSettledAt).not.toBeNull();
    expect(siblingSettledAt!).toBeLessThanOrEqual(endedAt);
    // Stopped, not waited out.
    expect(siblingSettledAt! - started).toBeLessThan(4_000);
  });

  it("keeps running when a subscriber throws, and other subscribers still get every event", async () => {
    const directive: ExecutionDirective = { kind: "tool", tool: "echo", arguments: { text: "hi" }, reason: "" };
    const runtime = setup({ models: plannerProvider(directive), tools: [createEchoTool()] });
    const seen: number[] = [];
    runtime.bus.subscribeAll(() => {
      throw new Error("subscriber bug");
    });
    runtime.bus.subscribeAll(async () => {
      throw new Error("async subscriber bug");
    });
    runtime.bus.subscribeAll((event) => void seen.push(event.seq));
    const handle = runtime.loop.submit({ text: "say hi" });
    const outcome = await handle.done;
    expect(outcome.state).toBe("completed");
    expect(outcome.answer).toBe("hi");
    expect(seen).toEqual(runtime.store.listEvents(handle.taskId).map((event) => event.seq));
  });

  it("delivers exactly events k..N to a subscriber from seq k of a finished task", async () => {
    const directive: ExecutionDirective = { kind: "tool", tool: "echo", arguments: { text: "hi" }, reason: "" };
    const runtime = setup({ models: plannerProvider(directive), tools: [createEchoTool()] });
    const handle = runtime.loop.submit({ text: "say hi" });
    await handle.done;
    const all = runtime.store.listEvents(handle.taskId);
    const k = 4;
    const received: DuckEvent[] = [];
    runtime.bus.subscribe(handle.taskId, (event) => void received.push(event), { fromSeq: k });
    expect(received).toEqual(all.slice(k - 1));
  });

  it("cancels a running task through its AbortSignal", async () => {
    const directive: ExecutionDirective = { kind: "tool", tool: "echo", arguments: { text: "slow", wait_ms: 10_000 }, reason: "" };
    const runtime = setup({ models: plannerProvider(directive), tools: [createEchoTool()] });
    const controller = new AbortController();
    const handle = runtime.loop.submit({ text: "slow" }, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error("user pressed stop")), 100);
    const started = Date.now();
    const outcome = await handle.done;
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(outcome.state).toBe("cancelled");
    expect(runtime.store.listEvents(handle.taskId).at(-1)?.type).toBe("task-cancelled");
  });

  it("fails a task that runs past the task timeout", async () => {
    const directive: ExecutionDirective = { kind: "tool", tool: "echo", arguments: { text: "slow", wait_ms: 10_000 }, reason: "" };
    const runtime = setup({ models: plannerProvider(directive), tools: [createEchoTool()], runtime: { timeouts: { task_ms: 200 } } });
    const outcome = await runtime.loop.submit({ text: "slow" }).done;
    expect(outcome.state).toBe("failed");
    expect(outcome.error?.code).toBe("DUCK_ERR_TASK_TIMEOUT");
  });

  it("rejects bad task input with a clear error and stores nothing", async () => {
    const runtime = setup({});
    expect(() => runtime.loop.submit({ text: "   " })).toThrow(/task text is empty/);
    expect(() => runtime.loop.submit({ text: 42 })).toThrow(/DUCK_ERR_INVALID_INPUT|expected string/);
    expect(() => runtime.loop.submit({ text: "x", workspace: "/definitely/not/here" })).toThrow(/not a directory/);
    expect(runtime.store.listTasks()).toHaveLength(0);
  });

  it("refuses a task whose text contains a hard_stop command before doing anything", async () => {
    const runtime = setup({});
    const handle = runtime.loop.submit({ text: "run `ls && rm -rf /`" });
    const outcome = await handle.done;
    expect(outcome.error?.code).toBe("DUCK_ERR_HARD_STOP");
    expect(types(runtime.store.listEvents(handle.taskId))).toEqual(["task-received", "task-failed"]);
  });
});
