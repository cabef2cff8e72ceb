import { afterEach, describe, expect, it } from "vitest";
import type { EventPayloads } from "../../src/contracts/index.js";
import { replayTask } from "../../src/replay/replay-task.js";
import { scriptedAgent } from "../helpers/scripted-agent.js";
import { ofType } from "../helpers/event-payloads.js";
import { useTestRuntimes } from "../helpers/test-runtime.js";
import { createEchoTool } from "../helpers/test-tools.js";

const setup = useTestRuntimes(afterEach);


describe("context that lasts: summaries instead of dropped turns and decisions", () => {
  it("summarises the conversation's oldest turns once they no longer fit, and the replay serves the same summary", async () => {
    const summaryPrompts: string[] = [];
    const draftPrompts: string[] = [];
    const compilerPrompts: string[] = [];
    const models = scriptedAgent({
      draft: (request) => {
        draftPrompts.push(request.prompt);
        return "Acknowledge the fact.";
      },
      directive: (request) => {
        compilerPrompts.push(request.prompt);
        return { kind: "respond", answer: `Noted. ${"This answer is long on purpose. ".repeat(12)}` };
      },
      summary: (request) => {
        summaryPrompts.push(request.prompt);
        return "The user told DuckLM a series of facts about ducks, numbered 0 onwards.";
      },
    });
    const runtime = setup({ models, runtime: { context_budgets: { history: 400 } } });
    const ids: string[] = [];
    for (let turn = 0; turn < 6; turn += 1) {
      const outcome = await runtime.loop.submit({ text: `Duck fact number ${turn}`, session_id: "pond" }).done;
      expect(outcome.state).toBe("completed");
      ids.push(outcome.task_id);
    }
    const last = runtime.store.listEvents(ids.at(-1)!);
    const summaries = ofType(last, "context-summarised");
    expect(summaries).toHaveLength(1);
    const summary = summaries[0]! as Extract<EventPayloads["context-summarised"], { section: "history" }>;
    expect(summary.section).toBe("history");
    // The oldest turns are the ones summarised, and the model was shown them.
    expect(summary.covers[0]).toBe(ids[0]);
    expect(summary.covers).not.toContain(ids[4]);
    expect(summaryPrompts.at(-1)).toContain("Duck fact number 0");
    // The decision sees the summary in their place, and the newest turn in full.
    expect(draftPrompts.at(-1)).toContain("Earlier in this conversation (summarised): The user told DuckLM a series of facts");
    expect(draftPrompts.at(-1)).toContain("Duck fact number 4");
    expect(draftPrompts.at(-1)).not.toContain("User: Duck fact number 0");
    // The JSON compiler writes down the Thinker's decision; the conversation is not sent to it again.
    expect(compilerPrompts.at(-1)).toContain("Acknowledge the fact.");
    expect(compilerPrompts.at(-1)).not.toContain("Earlier in this conversation");
    const built = ofType(last, "context-built")[0]!;
    expect(built.sections.history!.tokens).toBeLessThanOrEqual(400);

    const report = await replayTask(last, runtime.config);
    expect(report.first_difference ?? null).toBeNull();
    expect(report.matches).toBe(true);
  });

  it("summarises the loop's earliest decisions when their results outgrow the budget, and replays exactly", async () => {
    const observed: string[] = [];
    const models = scriptedAgent({
      directive: (request, view) => {
        observed.push(view.observed);
        if (view.decision <= 4) return { kind: "tool", tool: "echo", arguments: { text: `result ${view.decision}: ${"lots of output ".repeat(60)}` }, reason: "gather" };
        return { kind: "respond", answer: "Gathered four results." };
      },
      summary: (request) => `Earlier decisions echoed ${(request.prompt.match(/Decision \d+/g) ?? []).length} long results.`,
    });
    const runtime = setup({ models, tools: [createEchoTool()], runtime: { agent: { max_iterations: 6 }, context_budgets: { observations: 600 } } });
    const outcome = await runtime.loop.submit({ text: "Gather results until you have four." }).done;
    expect(outcome.error ?? null).toBeNull();
    expect(outcome.state).toBe("completed");
    const events = runtime.store.listEvents(outcome.task_id);
    const summaries = ofType(events, "context-summarised") as Array<Extract<EventPayloads["context-summarised"], { section: "observations" }>>;
    expect(summaries.length).toBeGreaterThan(0);
    expect(summaries.every((summary) => summary.section === "observations")).toBe(true);
    // Each later summary covers more, and the last decision saw the summary and the newest result in full.
    const through = summaries.map((summary) => summary.through);
    expect([...through].sort((a, b) => a - b)).toEqual(through);
    expect(observed.at(-1)).toMatch(/Decisions 1 to \d+, summarised: Earlier decisions echoed/);
    expect(observed.at(-1)).toContain("result 4:");
    for (const built of ofType(events, "context-built")) expect(built.sections.observations?.tokens ?? 0).toBeLessThanOrEqual(600);

    const report = await replayTask(events, runtime.config);
    expect(report.first_difference ?? null).toBeNull();
    expect(report.matches).toBe(true);
  });

  it("drops what does not fit without a model to summarise it, as before", async () => {
    const runtime = setup({ runtime: { context_budgets: { history: 60 } } });
    for (let turn = 0; turn < 4; turn += 1) await runtime.loop.submit({ text: `run \`echo turn ${turn} ${"x".repeat(80)}\``, session_id: "plain" }).done;
    const last = runtime.store.listTasks({ limit: 1 })[0]!;
    expect(ofType(runtime.store.listEvents(last.id), "context-summarised")).toEqual([]);
  });
});
