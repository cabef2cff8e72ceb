import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import type { DuckEvent, EventPayloads, ExecutionDirective } from "../../src/contracts/index.js";
import { defineTool } from "../../src/tools/tool-definition.js";
import { scriptedAgent } from "../helpers/scripted-agent.js";
import { useTestRuntimes } from "../helpers/test-runtime.js";
import { createEchoTool } from "../helpers/test-tools.js";

const setup = useTestRuntimes(afterEach);
const loop = (max_iterations = 6, extra: Record<string, unknown> = {}) => ({ agent: { max_iterations, ...extra } });

function ofType<T extends DuckEvent["type"]>(events: DuckEvent[], type: T): Array<EventPayloads[T]> {
  return events.filter((event) => event.type === type).map((event) => event.payload as EventPayloads[T]);
}

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
    expect(drafts[0]!.system).toContain(prompts.thinker);
    expect(drafts[1]!.system).toContain(prompts.orchestrator);
    for (const draft of drafts) expect(draft.system).toContain(prompts.planning);
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
    const runtime = setup({ runtime: loop(1), tools: [createEchoTool()], models: scriptedAgent({ directive: plan }) });
    writeFileSync(join(runtime.workspace, "big.txt"), "line one\n");
    const outcome = await runtime.loop.submit({ text: "show the first line of the largest file" }).done;
    expect(outcome.state).toBe("completed");
    const events = runtime.store.listEvents(outcome.task_id);
    const accepted = ofType(events, "plan-accepted")[0]!;
    expect(accepted.steps.find((step) => step.id === "say")!.depends_on.sort()).toEqual(["head", "largest"]);
    const calls = ofType(events, "tool-called").map((payload) => payload.call);
    expect(calls).toContainEqual({ tool: "file_read", arguments: { path: "big.txt" } });
    expect(calls).toContainEqual({ tool: "echo", arguments: { text: "first of big.txt: line one" } });
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
    expect(retried[0]!.error).toMatch(/echo does not take these arguments: text/);
  });

  it("does not let the critic pass a failed command, and does not retry what cannot change", async () => {
    const refusing = failingTool("DUCK_ERR_WEB_ADDRESS_BLOCKED");
    const runtime = setup({ runtime: { agent: { max_iterations: 1 }, retry: { max_step_retries: 3 } }, tools: [refusing], models: scriptedAgent({ directive: { kind: "tool", tool: "refusing", arguments: {}, reason: "" }, verdict: () => "pass" }) });
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
    const runtime = setup({ runtime: { agent: { max_iterations: 1 }, retry: { max_step_retries: 2 } }, tools: [failing], models: scriptedAgent({ directive: { kind: "tool", tool: "refusing", arguments: {}, reason: "" }, verdict: () => "pass" }) });
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
});
