import { describe, expect, it } from "vitest";
import type { PlanStep } from "../contracts/index.js";
import { orderPlan, scheduleSteps, type StepView } from "./plan-scheduler.js";

const step = (id: string, depends_on: string[] = []): PlanStep => ({ id, kind: "tool", description: "", depends_on, tool: "echo", arguments: {} });

describe("orderPlan", () => {
  it("orders dependencies first and keeps plan order among independent steps", () => {
    expect(orderPlan([step("c", ["b"]), step("a"), step("b", ["a"]), step("d")])).toEqual(["a", "b", "c", "d"]);
  });
  it("rejects cycles, naming them", () => {
    expect(() => orderPlan([step("a", ["c"]), step("b", ["a"]), step("c", ["b"])])).toThrow(/cycle: a -> c -> b -> a/);
    expect(() => orderPlan([step("a", ["a"])])).toThrow(/cycle: a -> a/);
  });
  it("rejects duplicate ids and missing dependencies", () => {
    expect(() => orderPlan([step("a"), step("a")])).toThrow(/two steps with id "a"/);
    expect(() => orderPlan([step("a", ["zz"])])).toThrow(/depends on "zz"/);
  });
});

describe("scheduleSteps", () => {
  const views = (entries: Array<[string, string[], StepView["status"]]>) =>
    new Map(entries.map(([id, depends_on, status]) => [id, { id, depends_on, status }]));

  it("offers ready steps up to the free slots", () => {
    const decision = scheduleSteps(["a", "b", "c"], views([["a", [], "pending"], ["b", [], "pending"], ["c", [], "running"]]), 2);
    expect(decision).toEqual({ ready: ["a"], blocked: [], finished: false });
  });
  it("blocks dependents of failed or skipped steps", () => {
    const decision = scheduleSteps(["a", "b", "c"], views([["a", [], "failed"], ["b", ["a"], "pending"], ["c", ["b"], "pending"]]), 4);
    expect(decision.blocked).toEqual([{ id: "b", because: "a" }]);
  });
  it("is finished when nothing is pending, running or waiting", () => {
    expect(scheduleSteps(["a", "b"], views([["a", [], "succeeded"], ["b", [], "skipped"]]), 4).finished).toBe(true);
    expect(scheduleSteps(["a"], views([["a", [], "awaiting_permission"]]), 4).finished).toBe(false);
  });
});
