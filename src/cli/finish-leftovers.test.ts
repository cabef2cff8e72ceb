import { afterEach, describe, expect, it, vi } from "vitest";
import type { TaskOutcome } from "../runtime/task-outcome.js";
import { finishLeftovers } from "./follow-task.js";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("finishLeftovers", () => {
  it("says how many resumed tasks it still waits for, and waits for them", async () => {
    const said = vi.spyOn(console, "error").mockImplementation(() => undefined);
    let finishSlow!: (outcome: TaskOutcome) => void;
    const slow = new Promise<TaskOutcome>((resolve) => (finishSlow = resolve));
    const done = Promise.resolve({ state: "completed" } as TaskOutcome);
    let waited = false;
    const waiting = finishLeftovers([done, slow]).then(() => (waited = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(said.mock.calls.map((call) => call[0])).toEqual([expect.stringMatching(/^waiting for 1 task\(s\) resumed from an earlier run/)]);
    expect(waited).toBe(false);
    finishSlow({ state: "failed" } as TaskOutcome);
    await waiting;
    expect(waited).toBe(true);
  });

  it("says nothing when the resumed tasks are already done", async () => {
    const said = vi.spyOn(console, "error").mockImplementation(() => undefined);
    await finishLeftovers([Promise.resolve({ state: "completed" } as TaskOutcome)]);
    await finishLeftovers([]);
    expect(said).not.toHaveBeenCalled();
  });
});
