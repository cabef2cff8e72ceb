import type { PlanStep } from "../contracts/index.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";

/**
 * Checks a plan as a DAG and returns a topological order (stable: plan order among equals).
 * Rejects duplicate ids, missing dependencies and cycles with an error that names them.
 */
export function orderPlan(steps: readonly PlanStep[]): string[] {
  const ids = new Set<string>();
  for (const step of steps) {
    if (ids.has(step.id)) {
      throw new DuckError(ErrorCode.PlanDuplicateStep, `plan has two steps with id "${step.id}"`, { details: { step_id: step.id } });
    }
    ids.add(step.id);
  }
  for (const step of steps) {
    for (const dependency of step.depends_on) {
      if (!ids.has(dependency)) {
        throw new DuckError(ErrorCode.PlanMissingDependency, `step "${step.id}" depends on "${dependency}", which is not in the plan`, {
          details: { step_id: step.id, missing: dependency },
        });
      }
    }
  }
  const order: string[] = [];
  const state = new Map<string, "visiting" | "done">();
  const byId = new Map(steps.map((step) => [step.id, step]));
  const visit = (id: string, path: string[]): void => {
    const seen = state.get(id);
    if (seen === "done") return;
    if (seen === "visiting") {
      const cycle = [...path.slice(path.indexOf(id)), id];
      throw new DuckError(ErrorCode.PlanCycle, `plan has a dependency cycle: ${cycle.join(" -> ")}`, { details: { cycle } });
    }
    state.set(id, "visiting");
    for (const dependency of byId.get(id)!.depends_on) visit(dependency, [...path, id]);
    state.set(id, "done");
    order.push(id);
  };
  for (const step of steps) visit(step.id, []);
  return order;
}

export interface StepView {
  id: string;
  depends_on: readonly string[];
  status: "pending" | "running" | "awaiting_permission" | "succeeded" | "failed" | "skipped";
}

export interface SchedulingDecision {
  /** Steps whose dependencies all succeeded, in plan order, up to the free parallel slots. */
  ready: string[];
  /** Pending steps that can never run because a dependency failed or was skipped. */
  blocked: Array<{ id: string; because: string }>;
  /** Nothing pending, running or waiting: the plan is over. */
  finished: boolean;
}

/** What to start next, given each step's status. Pure: the loop starts the steps. */
export function scheduleSteps(order: readonly string[], steps: ReadonlyMap<string, StepView>, maxParallel: number): SchedulingDecision {
  let active = 0;
  for (const step of steps.values()) if (step.status === "running" || step.status === "awaiting_permission") active += 1;
  const ready: string[] = [];
  const blocked: Array<{ id: string; because: string }> = [];
  let open = false;
  for (const id of order) {
    const step = steps.get(id)!;
    if (step.status !== "pending") {
      if (step.status === "running" || step.status === "awaiting_permission") open = true;
      continue;
    }
    const failed = step.depends_on.find((dep) => {
      const status = steps.get(dep)?.status;
      return status === "failed" || status === "skipped";
    });
    if (failed) {
      blocked.push({ id, because: failed });
      continue;
    }
    open = true;
    if (step.depends_on.every((dep) => steps.get(dep)?.status === "succeeded") && active + ready.length < maxParallel) {
      ready.push(id);
    }
  }
  return { ready, blocked, finished: !open && blocked.length === 0 };
}
