import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { replayTask } from "../../src/replay/replay-task.js";
import type { ScriptedModelProvider } from "../../src/models/scripted-provider.js";
import { scriptedAgent } from "../helpers/scripted-agent.js";
import { ofType } from "../helpers/event-payloads.js";
import { useTestRuntimes } from "../helpers/test-runtime.js";

// What a task costs the model: how many calls, and whether consecutive prompts of one lane extend
// each other so that a kept sequence (or a server's prefix cache) evaluates only what is new.
const setup = useTestRuntimes(afterEach);

/** The one-tool question: read the file, then answer from it. */
function oneToolAgent(options: { sameModel: boolean }): ScriptedModelProvider {
  return scriptedAgent({
    oneModel: options.sameModel,
    directive: (_request, seen) =>
      seen.decision === 1 ? { kind: "tool", tool: "file_read", arguments: { path: "facts.txt" }, reason: "read it" } : { kind: "respond", answer: "s1 shows the launch code is 4711." },
  });
}

function sharedPrefix(a: string, b: string): number {
  let shared = 0;
  while (shared < a.length && shared < b.length && a[shared] === b[shared]) shared += 1;
  return shared;
}

describe("model work per task", () => {
  it("the one-tool question on a fresh home takes at most 4 calls where one model plays every role, and its end carries the totals", async () => {
    const models = oneToolAgent({ sameModel: true });
    const runtime = setup({ runtime: { agent: { max_iterations: 6 } }, models });
    writeFileSync(join(runtime.workspace, "facts.txt"), "The launch code is 4711.\n");
    const outcome = await runtime.loop.submit({ text: "What is the launch code in facts.txt?" }).done;
    expect(outcome.state).toBe("completed");
    const purposes = models.calls.map((call) => call.purpose);
    // No recall on an empty memory; one call per decision; the step that ran is judged by the second decision.
    expect(purposes).toEqual(["decision", "decision"]);
    expect(models.calls.length).toBeLessThanOrEqual(4);
    const events = runtime.store.listEvents(outcome.task_id);
    const completed = ofType(events, "model-output-completed");
    expect(completed.every((payload) => payload.usage !== undefined)).toBe(true);
    const work = ofType(events, "task-completed")[0]!.model_work!;
    expect(work.calls).toBe(2);
    expect(work.generated_tokens).toBe(completed.reduce((sum, payload) => sum + payload.usage!.generated_tokens!, 0));
    expect(work.cached_tokens).toBeGreaterThan(0);
    // The task's row carries the same totals, for `ducklm tasks` and GET /tasks.
    expect(runtime.store.listTasks({ limit: 1 })[0]!.model_work).toEqual(work);
    // Replay serves what each call cost as recorded: the totals come out the same.
    expect((await replayTask(events, runtime.config)).first_difference ?? null).toBeNull();
  });

  it("consecutive decisions of one task extend each other's prompt up to the part that is new", async () => {
    const models = oneToolAgent({ sameModel: true });
    const runtime = setup({ runtime: { agent: { max_iterations: 6 } }, models });
    writeFileSync(join(runtime.workspace, "facts.txt"), "The launch code is 4711.\n");
    await runtime.loop.submit({ text: "What is the launch code in facts.txt?" }).done;
    const decisions = models.calls.filter((call) => call.purpose === "decision");
    expect(decisions).toHaveLength(2);
    const [first, second] = decisions.map((call) => `${call.system}\n${call.prompt}`);
    expect(new Set(decisions.map((call) => call.cacheKey)).size).toBe(1);
    // Everything before the first call's closing instruction is the start of the second call's prompt.
    const before = first!.indexOf("\n\n## Now\n");
    expect(before).toBeGreaterThan(0);
    expect(sharedPrefix(first!, second!)).toBeGreaterThanOrEqual(before);
    // The second decision's cost, as a prefix cache per lane counts it: most of its prompt was cached.
    const usage = decisions[1]!.usage!;
    expect(usage.cached_tokens!).toBeGreaterThan(usage.prompt_tokens! / 2);
  });

  it("where the Thinker is a model of its own, it drafts briefly and the JSON compiler writes the directive", async () => {
    const models = oneToolAgent({ sameModel: false });
    const runtime = setup({ runtime: { agent: { max_iterations: 6 } }, models });
    writeFileSync(join(runtime.workspace, "facts.txt"), "The launch code is 4711.\n");
    const outcome = await runtime.loop.submit({ text: "What is the launch code in facts.txt?" }).done;
    expect(outcome.state).toBe("completed");
    expect(models.calls.map((call) => call.purpose)).toEqual(["draft", "directive", "critic:step-1", "draft", "directive"]);
    const drafts = models.calls.filter((call) => call.purpose === "draft");
    expect(sharedPrefix(`${drafts[0]!.system}\n${drafts[0]!.prompt}`, `${drafts[1]!.system}\n${drafts[1]!.prompt}`)).toBeGreaterThanOrEqual(drafts[0]!.system.length + drafts[0]!.prompt.indexOf("\n\n## Now\n"));
  });

  it("the critic's verdict on a step comes in the next decision: recorded per step, and shown to the decision after", async () => {
    const models = scriptedAgent({
      oneModel: true,
      verdict: () => "retry",
      directive: (_request, seen) =>
        seen.decision === 1
          ? { kind: "tool", tool: "file_read", arguments: { path: "facts.txt" }, reason: "read it" }
          : seen.decision === 2
            ? { kind: "tool", tool: "file_list", arguments: { path: "." }, reason: "look around" }
            : { kind: "respond", answer: "done" },
    });
    const runtime = setup({ runtime: { agent: { max_iterations: 6 } }, models });
    writeFileSync(join(runtime.workspace, "facts.txt"), "The launch code is 4711.\n");
    const outcome = await runtime.loop.submit({ text: "What is the launch code in facts.txt?" }).done;
    expect(outcome.state).toBe("completed");
    expect(models.calls.map((call) => call.purpose)).toEqual(["decision", "decision", "decision"]);
    const events = runtime.store.listEvents(outcome.task_id);
    // Each step passed on its tool's word, then got the critic's verdict from the decision after it.
    expect(ofType(events, "critic-scored").map((payload) => payload.source)).toEqual(["deferred", "deferred"]);
    expect(ofType(events, "directive-decided").map((payload) => payload.review ?? null)).toEqual([
      null,
      [{ step_id: "step-1", iteration: 1, verdict: "retry" }],
      [{ step_id: "step-1", iteration: 2, verdict: "retry" }],
    ]);
    const asked = models.calls.map((call) => call.prompt);
    expect(asked[0]).not.toContain('"review"');
    expect(asked[1]).toContain('"review", an object giving each of step-1 a verdict');
    expect(runtime.store.projection(outcome.task_id).iterations.map((record) => record.steps[0]!.verdict)).toEqual(["retry", "retry"]);
    // The verdict is not written back into what later decisions see: their prompts extend each other.
    expect(asked[2]!.startsWith(asked[1]!.slice(0, asked[1]!.indexOf("\n\n## Now\n")))).toBe(true);
    expect((await replayTask(events, runtime.config)).first_difference ?? null).toBeNull();
  });

  it("a step of the last decision the loop allows, and every step under fold_critic never, gets a critic call of its own", async () => {
    const lastDecision = oneToolAgent({ sameModel: true });
    const limited = setup({ runtime: { agent: { max_iterations: 1 } }, models: lastDecision });
    writeFileSync(join(limited.workspace, "facts.txt"), "The launch code is 4711.\n");
    await limited.loop.submit({ text: "What is the launch code in facts.txt?" }).done;
    expect(lastDecision.calls.map((call) => call.purpose)).toEqual(["decision", "critic:step-1"]);

    const never = oneToolAgent({ sameModel: true });
    const separate = setup({ runtime: { agent: { max_iterations: 6, fold_critic: "never" } }, models: never });
    writeFileSync(join(separate.workspace, "facts.txt"), "The launch code is 4711.\n");
    const outcome = await separate.loop.submit({ text: "What is the launch code in facts.txt?" }).done;
    expect(never.calls.map((call) => call.purpose)).toEqual(["decision", "critic:step-1", "decision"]);
    expect((await replayTask(separate.store.listEvents(outcome.task_id), separate.config)).first_difference ?? null).toBeNull();
  });

  it("a step whose tool failed is judged without a critic call", async () => {
    const models = scriptedAgent({
      oneModel: true,
      directive: (_request, seen) => (seen.decision === 1 ? { kind: "tool", tool: "file_read", arguments: { path: "missing.txt" }, reason: "read it" } : { kind: "fail", reason: "there is no such file" }),
    });
    const runtime = setup({ runtime: { agent: { max_iterations: 6 }, retry: { max_step_retries: 0 } }, models });
    const outcome = await runtime.loop.submit({ text: "What is in missing.txt?" }).done;
    expect(outcome.state).toBe("failed");
    expect(models.calls.some((call) => call.purpose?.startsWith("critic:"))).toBe(false);
    const scored = ofType(runtime.store.listEvents(outcome.task_id), "critic-scored");
    expect(scored.length).toBeGreaterThan(0);
  });

  it("memory with a candidate for the task is decided about by the model; empty memory is not", async () => {
    const models = oneToolAgent({ sameModel: true });
    const runtime = setup({ runtime: { agent: { max_iterations: 6 } }, models });
    writeFileSync(join(runtime.workspace, "facts.txt"), "The launch code is 4711.\n");
    await runtime.memory.remember("the launch code lives in facts.txt", "fact", null);
    await runtime.loop.submit({ text: "What is the launch code in facts.txt?" }).done;
    expect(models.calls[0]!.purpose).toBe("recall");
    // A greeting has nothing to look up: no recall call.
    models.calls.length = 0;
    await runtime.loop.submit({ text: "hello" }).done;
    expect(models.calls[0]!.purpose).toBe("decision");
  });
});
