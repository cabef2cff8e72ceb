import { afterEach, describe, expect, it } from "vitest";
import { scriptedAgent } from "../helpers/scripted-agent.js";
import { ofType } from "../helpers/event-payloads.js";
import { useTestRuntimes } from "../helpers/test-runtime.js";
import { createEchoTool } from "../helpers/test-tools.js";

const setup = useTestRuntimes(afterEach);


describe("people's feedback read back by the critic", () => {
  it("shows the critic how people rated similar steps, so a rating changes the next verdict", async () => {
    const seenRatings: string[] = [];
    const runtime = setup({
      tools: [createEchoTool()],
      models: scriptedAgent({
        directive: { kind: "tool", tool: "echo", arguments: { text: "quack loudly" }, reason: "say it" },
        // A critic that weighs what people said: a step like one rated down does not pass.
        verdict: (step) => {
          seenRatings.push(step.ratings);
          return step.ratings.includes("rated down") ? "fail" : "pass";
        },
      }),
    });
    const first = await runtime.loop.submit({ text: "quack" }).done;
    expect(first.state).toBe("completed");
    const firstStep = ofType(runtime.store.listEvents(first.task_id), "tool-called")[0]!.step_id;
    expect(seenRatings).toEqual([""]);

    runtime.loop.recordFeedback(first.task_id, { target: "step", step_id: firstStep, rating: "down", comment: "too loud for the office" });
    // Feedback on an answer, or on a step that called another tool, is not about this kind of step.
    runtime.loop.recordFeedback(first.task_id, { target: "answer", rating: "up", comment: "fine answer" });

    const second = await runtime.loop.submit({ text: "quack again" }).done;
    expect(seenRatings[1]).toContain('{"text":"quack loudly"}: rated down (bad) — "too loud for the office"');
    expect(seenRatings[1]).not.toContain("fine answer");
    const scores = ofType(runtime.store.listEvents(second.task_id), "critic-scored");
    expect(scores[0]!.score.verdict).toBe("fail");
    expect(second.state).toBe("failed");
  });

  it("puts the most similar ratings first and shows at most five", async () => {
    const { similarRatings } = await import("../../src/decisions/critic-policy.js");
    const step = { id: "s1", kind: "tool" as const, description: "", depends_on: [], tool: "shell", arguments: { command: "git status --short" } };
    const ratings = [
      ...Array.from({ length: 6 }, (_, index) => ({ arguments: { command: `ls dir${index}` }, rating: "up" as const, comment: "" })),
      { arguments: { command: "git status" }, rating: "down" as const, comment: "use --short" },
    ];
    const chosen = similarRatings(step, ratings);
    expect(chosen).toHaveLength(5);
    expect(chosen[0]).toMatchObject({ comment: "use --short" });
    expect(chosen.slice(1).map((rated) => rated.arguments.command)).toEqual(["ls dir0", "ls dir1", "ls dir2", "ls dir3"]);
  });
});
