import { afterEach, describe, expect, it } from "vitest";
import { replayTask } from "../../src/replay/replay-task.js";
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

  it("rates a step of any decision, asks which decision when a step id recurs, and shows the critic the call that was rated", async () => {
    const seenRatings: string[] = [];
    const runtime = setup({
      runtime: { agent: { max_iterations: 4 } },
      tools: [createEchoTool()],
      models: scriptedAgent({
        directive: [
          { kind: "tool", tool: "echo", arguments: { text: "first look" }, reason: "look" },
          { kind: "tool", tool: "echo", arguments: { text: "second look" }, reason: "look again" },
          { kind: "respond", answer: "seen twice" },
          // The next task's decisions.
          { kind: "tool", tool: "echo", arguments: { text: "a third look" }, reason: "look" },
          { kind: "respond", answer: "seen" },
        ],
        verdict: (step) => {
          seenRatings.push(step.ratings);
          return "pass";
        },
      }),
    });
    const task = await runtime.loop.submit({ text: "look twice" }).done;
    expect(task.state).toBe("completed");
    const calls = ofType(runtime.store.listEvents(task.task_id), "tool-called");
    // Each single-tool decision names its step the same.
    expect(calls.map((call) => call.step_id)).toEqual(["step-1", "step-1"]);
    const before = runtime.store.listEvents(task.task_id).length;

    expect(() => runtime.loop.recordFeedback(task.task_id, { target: "step", step_id: "step-1", rating: "down" })).toThrow(
      expect.objectContaining({ code: "DUCK_ERR_INVALID_INPUT", message: expect.stringMatching(/decisions 1 and 2: say which \(`--iteration N`/) }),
    );
    expect(() => runtime.loop.recordFeedback(task.task_id, { target: "step", step_id: "step-1", iteration: 3, rating: "down" })).toThrow(
      expect.objectContaining({ code: "DUCK_ERR_INVALID_INPUT", message: expect.stringContaining("no step step-1 in decision 3") }),
    );
    expect(() => runtime.loop.recordFeedback(task.task_id, { target: "step", step_id: "step-9", rating: "down" })).toThrow(expect.objectContaining({ code: "DUCK_ERR_INVALID_INPUT" }));
    expect(() => runtime.loop.recordFeedback(task.task_id, { target: "answer", iteration: 1, rating: "down" })).toThrow(expect.objectContaining({ code: "DUCK_ERR_INVALID_INPUT" }));
    // Nothing was recorded by the refusals.
    expect(runtime.store.listEvents(task.task_id)).toHaveLength(before);

    // The step of the first decision, which is no longer the task's current one.
    runtime.loop.recordFeedback(task.task_id, { target: "step", step_id: "step-1", iteration: 1, rating: "down", comment: "looked at the wrong thing" });
    expect(ofType(runtime.store.listEvents(task.task_id), "feedback-received").at(-1)).toMatchObject({ step_id: "step-1", iteration: 1, rating: "down" });
    // A rated task replays exactly, rating and all.
    expect((await replayTask(runtime.store.listEvents(task.task_id), runtime.config)).first_difference ?? null).toBeNull();

    seenRatings.length = 0;
    await runtime.loop.submit({ text: "look once more" }).done;
    // The critic is shown the first decision's call, not the second's.
    expect(seenRatings[0]).toContain('{"text":"first look"}: rated down');
    expect(seenRatings[0]).not.toContain("second look");
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
