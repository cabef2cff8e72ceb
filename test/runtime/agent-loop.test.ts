import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import type { ExecutionDirective } from "../../src/contracts/index.js";
import { DuckError, ErrorCode } from "../../src/errors/duck-error.js";
import { replayTask } from "../../src/replay/replay-task.js";
import { projectEvents } from "../../src/state/task-projection.js";
import { defineTool } from "../../src/tools/tool-definition.js";
import { stallingReply } from "../../src/models/scripted-provider.js";
import type { TextRequest } from "../../src/models/model-provider.js";
import { scriptedAgent } from "../helpers/scripted-agent.js";
import { ofType } from "../helpers/event-payloads.js";
import { testConfig, useTestRuntimes } from "../helpers/test-runtime.js";
import { createEchoTool } from "../helpers/test-tools.js";

const setup = useTestRuntimes(afterEach);
const loop = (max_iterations = 6, extra: Record<string, unknown> = {}) => ({ agent: { max_iterations, ...extra } });


/** A tool that fails the same way every time, for judging what the critic may and may not pass. */
function failingTool(code: string) {
  let calls = 0;
  const tool = defineTool({
    name: "refusing",
    description: "Always fails.",
    inputSchema: z.object({}),
    effect: "read-only",
    async execute() {
      calls += 1;
      return { ok: false, output: "", exit_code: 1, error: { code, message: "no, never" } };
    },
  });
  return Object.assign(tool, { calls: () => calls });
}

describe("the agent loop with a scripted model", () => {
  it("takes a second tool call that depends on the first one's output, then answers from both", async () => {
    const runtime = setup({
      runtime: loop(),
      models: scriptedAgent({
        directive: (_request, seen) => {
          if (seen.decision === 1) return { kind: "tool", tool: "file_list", arguments: { path: "." }, reason: "see what there is" };
          if (seen.decision === 2) {
            // The name of the one file listed, read from what the first call returned.
            const name = /([\w-]+\.txt)/.exec(seen.observed)?.[1] ?? "missing";
            return { kind: "tool", tool: "file_read", arguments: { path: name }, reason: "read it" };
          }
          const content = /Quack: (\w+)/.exec(seen.observed)?.[1] ?? "?";
          const name = /([\w-]+\.txt)/.exec(seen.observed)?.[1] ?? "?";
          return { kind: "respond", answer: `The workspace holds ${name}, and it says the password is ${content}.` };
        },
      }),
    });
    writeFileSync(join(runtime.workspace, "duck-notes.txt"), "Quack: swordfish\n");
    const outcome = await runtime.loop.submit({ text: "What does the file in my workspace say?" }).done;
    expect(outcome.state).toBe("completed");
    expect(outcome.answer).toBe("The workspace holds duck-notes.txt, and it says the password is swordfish.");
    const events = runtime.store.listEvents(outcome.task_id);
    expect(ofType(events, "iteration-started").map((payload) => payload.iteration)).toEqual([2, 3]);
    expect(ofType(events, "tool-called").map((payload) => payload.call)).toEqual([
      { tool: "file_list", arguments: { path: "." } },
      { tool: "file_read", arguments: { path: "duck-notes.txt" } },
    ]);
    expect(ofType(events, "directive-decided").map((payload) => payload.directive.kind)).toEqual(["tool", "tool", "respond"]);
  });

  it("drafts the first decision as the Thinker and each later one as the orchestrator, with the planning prompt", async () => {
    const models = scriptedAgent({
      directive: [
        { kind: "tool", tool: "file_list", arguments: { path: "." }, reason: "look" },
        { kind: "respond", answer: "Nothing much." },
      ],
    });
    const runtime = setup({ runtime: loop(), models });
    const outcome = await runtime.loop.submit({ text: "What is here?" }).done;
    expect(outcome.state).toBe("completed");
    const drafts = models.calls.filter((call) => call.kind === "text");
    expect(drafts.map((call) => call.role)).toEqual(["thinker", "orchestrator"]);
    const prompts = runtime.config.prompts;
    // The fixed text (system and planning) comes first in every decision; what differs closes the prompt.
    expect(drafts[0]!.prompt).toContain(`## Now\n${prompts.thinker}`);
    expect(drafts[1]!.prompt).toMatch(/## Now\nIf this answers the task[^\n]*\nThis is decision 2 of at most \d+[^\n]*\n/);
    expect(drafts[1]!.prompt).toContain(prompts.orchestrator);
    for (const draft of drafts) expect(draft.system).toContain(prompts.planning);
    expect(drafts[1]!.system).toBe(drafts[0]!.system);
    // The events name the role that was asked, so the web chat and a replay tell the two apart.
    const started = ofType(runtime.store.listEvents(outcome.task_id), "model-output-started").filter((payload) => payload.purpose === "draft");
    expect(started.map((payload) => payload.role)).toEqual(["thinker", "orchestrator"]);
  });

  it("fills a plan step's arguments with an earlier step's output, and records the call as it ran", async () => {
    const plan: ExecutionDirective = {
      kind: "plan",
      goal: "largest file, then its first line",
      steps: [
        { id: "largest", kind: "tool", description: "", depends_on: [], tool: "echo", arguments: { text: "big.txt" } },
        { id: "head", kind: "tool", description: "", depends_on: [], tool: "file_read", arguments: { path: { from_step: "largest" } } },
        { id: "say", kind: "tool", description: "", depends_on: [], tool: "echo", arguments: { text: "first of {{largest.output}}: {{ head.output }}" } },
      ],
    };
    const prompts: string[] = [];
    const runtime = setup({
      runtime: loop(2),
      tools: [createEchoTool()],
      models: scriptedAgent({
        directive: (request) => {
          prompts.push(request.prompt);
          return prompts.length === 1 ? plan : { kind: "respond", answer: "line one" };
        },
      }),
    });
    writeFileSync(join(runtime.workspace, "big.txt"), "line one\n");
    const outcome = await runtime.loop.submit({ text: "show the first line of the largest file" }).done;
    expect(outcome.state).toBe("completed");
    // The next decision is shown the call as it ran, not the reference it was written with.
    expect(prompts[1]).toContain('head file_read {"path":"big.txt"}');
    expect(prompts[1]).not.toContain("from_step");
    const events = runtime.store.listEvents(outcome.task_id);
    const accepted = ofType(events, "plan-accepted")[0]!;
    expect(accepted.steps.find((step) => step.id === "say")!.depends_on.sort()).toEqual(["head", "largest"]);
    const calls = ofType(events, "tool-called").map((payload) => payload.call);
    expect(calls).toContainEqual({ tool: "file_read", arguments: { path: "big.txt" } });
    expect(calls).toContainEqual({ tool: "echo", arguments: { text: "first of big.txt: line one" } });
  });

  it("writes a template's own {{ name }} as it is, and fills in only what names a step", async () => {
    const plan: ExecutionDirective = {
      kind: "plan",
      goal: "a greeting template",
      steps: [
        { id: "who", kind: "tool", description: "", depends_on: [], tool: "echo", arguments: { text: "Ada" } },
        { id: "write", kind: "tool", description: "", depends_on: [], tool: "file_write", arguments: { path: "hello.j2", content: "Hello {{ name }}, from {{who}} and {{ steps.who.output }}\n" } },
      ],
    };
    const runtime = setup({ runtime: loop(2), tools: [createEchoTool()], models: scriptedAgent({ directive: [plan, { kind: "respond", answer: "written" }] }) });
    const outcome = await runtime.loop.submit({ text: "write a greeting template" }).done;
    expect(outcome.state).toBe("completed");
    expect(readFileSync(join(runtime.workspace, "hello.j2"), "utf8")).toBe("Hello {{ name }}, from Ada and Ada\n");
    expect(ofType(runtime.store.listEvents(outcome.task_id), "plan-accepted")[0]!.steps.find((step) => step.id === "write")!.depends_on).toEqual(["who"]);
  });

  it("ends with a failure naming the budget when the decisions run out", async () => {
    const runtime = setup({ runtime: loop(3), tools: [createEchoTool()], models: scriptedAgent({ directive: { kind: "tool", tool: "echo", arguments: { text: "again" }, reason: "" } }) });
    const outcome = await runtime.loop.submit({ text: "keep going" }).done;
    expect(outcome.state).toBe("failed");
    expect(outcome.error?.code).toBe("DUCK_ERR_ITERATION_LIMIT");
    expect(outcome.error?.message).toMatch(/agent\.max_iterations 3/);
    expect(ofType(runtime.store.listEvents(outcome.task_id), "tool-called")).toHaveLength(3);
  });

  it("ends with a failure naming the token budget when the model calls use it up", async () => {
    const runtime = setup({ runtime: loop(10, { token_budget: 400 }), tools: [createEchoTool()], models: scriptedAgent({ directive: { kind: "tool", tool: "echo", arguments: { text: "x".repeat(200) }, reason: "" } }) });
    const outcome = await runtime.loop.submit({ text: "keep going" }).done;
    expect(outcome.error?.code).toBe("DUCK_ERR_TOKEN_BUDGET");
    expect(outcome.error?.message).toMatch(/agent\.token_budget of 400/);
  });

  it("gives a step that ran after the budget was spent its outcome, judged without the critic, before the task ends", async () => {
    let criticCalls = 0;
    const agent = () =>
      scriptedAgent({
        directive: { kind: "tool", tool: "echo", arguments: { text: "x".repeat(200) }, reason: "" },
        verdict: () => {
          criticCalls += 1;
          return "pass";
        },
      });
    // A budget the first decision's own calls use up, measured on the same task: its step runs, and
    // its critic call would be past the budget.
    const measuring = setup({ runtime: loop(1), tools: [createEchoTool()], models: agent() });
    const measured = measuring.store.listEvents((await measuring.loop.submit({ text: "keep going" }).done).task_id);
    const budget = projectEvents(measured.slice(0, measured.findIndex((event) => event.type === "step-started") + 1)).tokens_used;
    criticCalls = 0;
    const runtime = setup({ runtime: loop(10, { token_budget: budget }), tools: [createEchoTool()], models: agent() });
    const outcome = await runtime.loop.submit({ text: "keep going" }).done;
    expect(outcome.error?.code).toBe("DUCK_ERR_TOKEN_BUDGET");
    const events = runtime.store.listEvents(outcome.task_id);
    // Every step that started has an ending, and the last one's verdict says why no critic gave it.
    const started = ofType(events, "step-started").length;
    expect(started).toBeGreaterThan(0);
    expect(ofType(events, "step-completed").length + ofType(events, "step-failed").length).toBe(started);
    const lastScore = ofType(events, "critic-scored").at(-1)!;
    expect(lastScore).toMatchObject({ source: "heuristic", score: { verdict: "pass" } });
    expect(lastScore.score.reason).toContain(`token_budget of ${budget}`);
    expect(criticCalls).toBe(ofType(events, "critic-scored").length - 1);
    expect(events.at(-1)?.type).toBe("task-failed");
    expect((await replayTask(events, runtime.config)).first_difference ?? null).toBeNull();
  });

  it("asks the compiler again with the error when its directive is cut off, and succeeds on the third try", async () => {
    const replies = ['{"kind":"respond","ans', '{"kind":"tool","tool":"echo"', { kind: "respond", answer: "done at last" }];
    const runtime = setup({ runtime: loop(), tools: [createEchoTool()], models: scriptedAgent({ directive: () => replies.shift() as never }) });
    const outcome = await runtime.loop.submit({ text: "answer me" }).done;
    expect(outcome.state).toBe("completed");
    expect(outcome.answer).toBe("done at last");
    const retried = ofType(runtime.store.listEvents(outcome.task_id), "directive-retried");
    expect(retried.map((payload) => payload.attempt)).toEqual([1, 2]);
    expect(retried[0]!.error).toMatch(/not complete JSON|does not match/);
  });

  it("feeds a tool name that does not exist back to the model, and fails cleanly once retries are spent", async () => {
    const runtime = setup({ runtime: loop(6, { directive_retries: 1 }), tools: [createEchoTool()], models: scriptedAgent({ directive: { kind: "tool", tool: "echo", arguments: { wrong: 1 }, reason: "" } }) });
    const outcome = await runtime.loop.submit({ text: "echo" }).done;
    expect(outcome.state).toBe("failed");
    expect(outcome.error?.code).toBe("DUCK_ERR_TOOL_INPUT_INVALID");
    const retried = ofType(runtime.store.listEvents(outcome.task_id), "directive-retried");
    expect(retried).toHaveLength(1);
    // An argument the tool does not have is named, with the ones it has, instead of being dropped.
    expect(retried[0]!.error).toMatch(/echo has no argument wrong; it takes text, wait_ms/);
  });

  it("refuses arguments nested thousands of levels deep as bad input the model is told about, not an internal error", async () => {
    let deep: unknown = "x";
    for (let level = 0; level < 3000; level += 1) deep = [deep];
    const runtime = setup({ runtime: loop(6, { directive_retries: 1 }), tools: [createEchoTool()], models: scriptedAgent({ directive: { kind: "tool", tool: "echo", arguments: { text: deep }, reason: "" } }) });
    const outcome = await runtime.loop.submit({ text: "echo" }).done;
    expect(outcome.state).toBe("failed");
    expect(outcome.error?.code).toBe("DUCK_ERR_TOOL_INPUT_INVALID");
    expect(ofType(runtime.store.listEvents(outcome.task_id), "directive-retried")[0]!.error).toMatch(/nest arrays and objects more than 32 levels deep/);
  });

  it("does not let the critic pass a failed command, and does not retry what cannot change", async () => {
    const refusing = failingTool("DUCK_ERR_WEB_ADDRESS_BLOCKED");
    const runtime = setup({ runtime: { agent: { max_iterations: 1, judge_failed_steps: true }, retry: { max_step_retries: 3 } }, tools: [refusing], models: scriptedAgent({ directive: { kind: "tool", tool: "refusing", arguments: {}, reason: "" }, verdict: () => "pass" }) });
    const outcome = await runtime.loop.submit({ text: "try it" }).done;
    expect(outcome.state).toBe("failed");
    const events = runtime.store.listEvents(outcome.task_id);
    expect(ofType(events, "step-completed")).toHaveLength(0);
    expect(ofType(events, "step-retrying")).toHaveLength(0);
    expect(refusing.calls()).toBe(1);
    expect(ofType(events, "step-failed")[0]!.reason).toMatch(/tool reported a failure, whatever the critic said/);
  });

  it("retries a failed command the critic passed while retries last, and never completes it", async () => {
    const failing = failingTool("DUCK_ERR_TOOL_FAILED");
    const runtime = setup({ runtime: { agent: { max_iterations: 1, judge_failed_steps: true }, retry: { max_step_retries: 2 } }, tools: [failing], models: scriptedAgent({ directive: { kind: "tool", tool: "refusing", arguments: {}, reason: "" }, verdict: () => "pass" }) });
    const outcome = await runtime.loop.submit({ text: "try it" }).done;
    expect(outcome.state).toBe("failed");
    expect(failing.calls()).toBe(3);
    expect(ofType(runtime.store.listEvents(outcome.task_id), "step-completed")).toHaveLength(0);
  });

  it("shows the model a failed step and lets it take another way", async () => {
    const failing = failingTool("DUCK_ERR_TOOL_FAILED");
    const runtime = setup({
      runtime: { agent: { max_iterations: 4 }, retry: { max_step_retries: 0 } },
      tools: [failing, createEchoTool()],
      models: scriptedAgent({
        directive: (_request, seen) =>
          seen.decision === 1
            ? { kind: "tool", tool: "refusing", arguments: {}, reason: "" }
            : seen.decision === 2 && /failed.*no, never/.test(seen.observed)
              ? { kind: "tool", tool: "echo", arguments: { text: "plan B" }, reason: "the first way failed" }
              : { kind: "respond", answer: "plan B worked" },
      }),
    });
    const outcome = await runtime.loop.submit({ text: "get it done" }).done;
    expect(outcome.state).toBe("completed");
    expect(outcome.answer).toBe("plan B worked");
    expect(ofType(runtime.store.listEvents(outcome.task_id), "iteration-started")[0]!.reason).toMatch(/failed/);
  });

  it("keeps to one decision without a model, as the IntentParser always did", async () => {
    const runtime = setup({ runtime: loop() });
    const outcome = await runtime.loop.submit({ text: "run `echo hello`" }).done;
    expect(outcome.state).toBe("completed");
    expect(ofType(runtime.store.listEvents(outcome.task_id), "iteration-started")).toHaveLength(0);
  });

  it("refuses arguments that would take in too much of an earlier output before building, judging or storing them", async () => {
    const big = "quack ".repeat(4_000);
    const plan: ExecutionDirective = {
      kind: "plan",
      goal: "",
      steps: [
        { id: "s1", kind: "tool", description: "", depends_on: [], tool: "file_read", arguments: { path: "big.txt" } },
        // 24 kB a copy: a hundred copies are past what one step may take in…
        { id: "many", kind: "tool", description: "", depends_on: [], tool: "shell_exec", arguments: { command: `echo ${"{{s1.output}}".repeat(100)}` } },
        // …and five fit that, but not a command's length limit.
        { id: "long", kind: "tool", description: "", depends_on: [], tool: "shell_exec", arguments: { command: `echo ${"{{s1.output}}".repeat(5)}` } },
      ],
    };
    const runtime = setup({ runtime: loop(1, {}), tools: [createEchoTool()], models: scriptedAgent({ directive: plan }) });
    writeFileSync(join(runtime.workspace, "big.txt"), big);
    const outcome = await runtime.loop.submit({ text: "shout it" }).done;
    const events = runtime.store.listEvents(outcome.task_id);
    const results = new Map(ofType(events, "tool-result").map((payload) => [payload.step_id, payload.result]));
    expect(results.get("many")?.error?.code).toBe("DUCK_ERR_TOOL_INPUT_INVALID");
    expect(results.get("many")?.error?.message).toMatch(/more than 1048576 characters of earlier steps' output/);
    expect(results.get("long")?.error?.code).toBe("DUCK_ERR_TOOL_INPUT_INVALID");
    expect(results.get("long")?.error?.message).toMatch(/shell_exec does not take these arguments: command/);
    // Neither was run, asked about, retried or recorded as called.
    expect(ofType(events, "tool-called").map((payload) => payload.step_id)).toEqual(["s1"]);
    expect(ofType(events, "permission-requested")).toEqual([]);
    expect(ofType(events, "step-retrying")).toEqual([]);
  });

  it("asks before retrying a timed-out command judged as it ran, with an earlier output filled in", async () => {
    const plan: ExecutionDirective = {
      kind: "plan",
      goal: "",
      steps: [
        { id: "s1", kind: "tool", description: "", depends_on: [], tool: "echo", arguments: { text: "x; touch made.txt; sleep 5" } },
        { id: "s2", kind: "tool", description: "", depends_on: [], tool: "shell_exec", arguments: { command: "echo {{s1.output}}" } },
      ],
    };
    const runtime = setup({ runtime: { agent: { max_iterations: 1 }, timeouts: { step_ms: 1_000 } }, tools: [createEchoTool()], models: scriptedAgent({ directive: plan }) });
    const outcome = await runtime.loop.submit({ text: "touch and wait" }).done;
    const retrying = ofType(runtime.store.listEvents(outcome.task_id), "step-retrying");
    expect(retrying[0]).toMatchObject({ step_id: "s2", ask_first: true });
    expect(outcome.state).toBe("awaiting_permission");
  }, 30_000);

  it("counts every call's prompt against the token budget and makes no call past it, exactly again on replay", async () => {
    const runtime = setup({ runtime: loop(6, { token_budget: 1_500 }), tools: [createEchoTool()], models: scriptedAgent({ directive: { kind: "tool", tool: "echo", arguments: { text: "again" }, reason: "" } }) });
    const outcome = await runtime.loop.submit({ text: "keep going" }).done;
    expect(outcome.error?.code).toBe("DUCK_ERR_TOKEN_BUDGET");
    const events = runtime.store.listEvents(outcome.task_id);
    const started = ofType(events, "model-output-started");
    expect(started.length).toBeGreaterThan(0);
    for (const call of started) expect(call.prompt_tokens).toBeGreaterThan(0);
    // The budget stopped it before a decision ended: not every decision got its calls.
    const counted = started.reduce((sum, call) => sum + (call.prompt_tokens ?? 0), 0);
    expect(counted).toBeGreaterThanOrEqual(1_500 - 200);
    const report = await replayTask(events, runtime.config);
    expect(report.first_difference ?? null).toBeNull();
  });

  it("stops a model that writes far past its max_tokens, and records it as bad output", async () => {
    const runtime = setup({
      models: scriptedAgent({ directive: { kind: "respond", answer: "short" }, draft: "blah ".repeat(20_000), streaming: { chunkSize: 64 } }),
    });
    const outcome = await runtime.loop.submit({ text: "think hard" }).done;
    expect(outcome.error?.code).toBe("DUCK_ERR_MODEL_OUTPUT_INVALID");
    const limit = Number(/wrote more than (\d+) characters for draft/.exec(outcome.error?.message ?? "")?.[1]);
    // Eight characters for each token the thought may take (runtime.json agent.thought_max_tokens, 256).
    expect(limit).toBe(256 * 8);
    const events = runtime.store.listEvents(outcome.task_id);
    const written = ofType(events, "model-output-delta").filter((delta) => delta.purpose === "draft").reduce((sum, delta) => sum + delta.text.length, 0);
    expect(written).toBeLessThan(limit + 64 * 2);
    expect(ofType(events, "model-output-failed")[0]).toMatchObject({ purpose: "draft", code: "DUCK_ERR_MODEL_OUTPUT_INVALID" });
  });

  it("records nothing a stopped model writes after the stop, so its replay stops at the same chunk", async () => {
    // A model server streams a burst before it notices the stop: the chunks after it are not the task's.
    const scripted = scriptedAgent({ directive: { kind: "respond", answer: "short" } });
    const bursting = Object.assign(Object.create(scripted) as typeof scripted, {
      async generateText(request: TextRequest): Promise<string> {
        const text = "blah ".repeat(20_000);
        for (let at = 0; at < text.length; at += 64) request.onDelta?.(text.slice(at, at + 64));
        request.signal?.throwIfAborted();
        return text;
      },
    });
    const runtime = setup({ models: bursting });
    const outcome = await runtime.loop.submit({ text: "think hard" }).done;
    expect(outcome.error?.code).toBe("DUCK_ERR_MODEL_OUTPUT_INVALID");
    const events = runtime.store.listEvents(outcome.task_id);
    const written = ofType(events, "model-output-delta").filter((delta) => delta.purpose === "draft").reduce((sum, delta) => sum + delta.text.length, 0);
    expect(written).toBeLessThanOrEqual(2048 * 8 + 64);
    const report = await replayTask(events, runtime.config);
    expect(report.first_difference ?? null).toBeNull();
  });

  it("replays a task under the settings it recorded, whatever runtime.json says at replay time", async () => {
    const runtime = setup({
      runtime: { agent: { max_iterations: 3 }, recovery: { on_exhausted: "respond" }, retry: { max_step_retries: 0 }, context_budgets: { observations: 900 } },
      tools: [failingTool("DUCK_ERR_TOOL_FAILED")],
      models: scriptedAgent({ directive: { kind: "tool", tool: "refusing", arguments: {}, reason: "" } }),
    });
    const outcome = await runtime.loop.submit({ text: "try it" }).done;
    const events = runtime.store.listEvents(outcome.task_id);
    expect(ofType(events, "task-started")[0]!.settings).toMatchObject({ recovery: { on_exhausted: "respond" }, agent: { max_iterations: 3 } });
    // Replayed under the defaults (on_exhausted "fail", no retries setting, one decision): still the same events.
    const report = await replayTask(events, testConfig());
    expect(report.first_difference ?? null).toBeNull();
    expect(report.matches).toBe(true);
  });

  it("ends a task whose model call hangs at its time limit, and replays it as the same time-out", async () => {
    const models = scriptedAgent({ directive: { kind: "respond", answer: "never" } }).push("thinker", stallingReply("thinking about it"));
    const runtime = setup({ runtime: { timeouts: { task_ms: 300 } }, models });
    const outcome = await runtime.loop.submit({ text: "ponder" }).done;
    expect(outcome.error?.code).toBe("DUCK_ERR_TASK_TIMEOUT");
    const events = runtime.store.listEvents(outcome.task_id);
    expect(ofType(events, "model-output-failed")[0]).toMatchObject({ purpose: "draft", code: "DUCK_ERR_TASK_TIMEOUT" });
    const report = await replayTask(events, testConfig());
    expect(report.first_difference ?? null).toBeNull();
  });

  it("still carries out an explicit request when the model cannot decide, and fails the rest with the model's error", async () => {
    const broken = () => scriptedAgent({
      directive: () => {
        throw new DuckError(ErrorCode.ModelServerFailed, "the model server is down");
      },
    });
    const runtime = setup({ models: broken() });
    const explicit = await runtime.loop.submit({ text: "run `echo hello`" }).done;
    expect(explicit.state).toBe("completed");
    expect(explicit.answer).toContain("hello");
    const events = runtime.store.listEvents(explicit.task_id);
    expect(ofType(events, "model-output-failed")[0]).toMatchObject({ purpose: "directive", code: "DUCK_ERR_MODEL_SERVER" });
    expect(ofType(events, "directive-decided")[0]).toMatchObject({ source: "intent-parser", directive: { kind: "tool", tool: "shell_exec" } });
    const open = await runtime.loop.submit({ text: "tell me something about ducks" }).done;
    expect(open.error?.code).toBe("DUCK_ERR_MODEL_SERVER");
  });
});

