import { DEFAULT_MAX_PLAN_STEPS } from "../config/config-schemas.js";
import { ErrorCode } from "../errors/duck-error.js";
import type { TaskProjection } from "../state/task-projection.js";
import type { ExecutorContext } from "./executor-context.js";
import { servesRole } from "./model-call.js";

/** What follows a directive whose steps are over: another decision, or an end of the loop. */
export type AfterSteps = { kind: "decide-again"; reason: string } | { kind: "stop" } | { kind: "out-of-budget"; code: string; message: string };

/** The loop limits a task starts with, recorded in `task-started` (nothing when the loop is off, as before it existed). */
export function loopLimits(context: ExecutorContext): { loop?: { max_iterations: number; token_budget: number } } {
  const agent = context.config.runtime.agent;
  return agent.max_iterations > 1 ? { loop: { max_iterations: agent.max_iterations, token_budget: agent.token_budget } } : {};
}

/** The runtime.json sections a task's decisions follow, recorded in `task-started` for its replay. */
export function recordedSettings(context: ExecutorContext): { settings?: Record<string, unknown> } {
  if (!context.recordSettings) return {};
  if (context.settingsAsRecorded) return { settings: context.settingsAsRecorded };
  const { timeouts, retry, recovery, agent, scheduler, context_budgets } = context.config.runtime;
  // How many tasks run at once is no decision of the task's: only the steps' parallelism, and the plan
  // length when it is not the default (a recording without it ran under the default), are recorded.
  const planLength = scheduler.max_plan_steps !== DEFAULT_MAX_PLAN_STEPS ? { max_plan_steps: scheduler.max_plan_steps } : {};
  return { settings: { timeouts, retry, recovery, agent, scheduler: { max_parallel_steps: scheduler.max_parallel_steps, ...planLength }, context_budgets } };
}

function outcomeOfSteps(projection: TaskProjection): string {
  const steps = (projection.plan_order ?? []).map((id) => projection.steps[id]!);
  const described = steps.map(
    (step) =>
      `${step.step.id} ${step.status === "succeeded" ? "succeeded" : step.status === "skipped" ? "was skipped" : step.status === "pending" && step.attempt === 0 ? "did not run" : `failed (${step.failure_reason ?? step.result?.error?.message ?? "no reason"})`}`,
  );
  return described.join(", ").slice(0, 500) || "no steps ran";
}

/**
 * After a directive's steps: with a model that writes directives and the loop on, the model sees
 * what happened and decides again — unless the task has used its decisions (`agent.max_iterations`)
 * or its tokens (`agent.token_budget`), which ends it with the budget named. Without a model (the
 * IntentParser), or with the loop off, the task ends as it always did.
 */
export function afterSteps(context: ExecutorContext, projection: TaskProjection): AfterSteps {
  if (!servesRole(context, "json_compiler") || projection.loop.max_iterations <= 1) return { kind: "stop" };
  const { max_iterations, token_budget } = projection.loop;
  if (projection.iteration >= max_iterations) {
    return { kind: "out-of-budget", code: ErrorCode.IterationLimit, message: `the task took ${projection.iteration} decisions without an answer, the most runtime.json allows (agent.max_iterations ${max_iterations})` };
  }
  if (projection.tokens_used >= token_budget) {
    return { kind: "out-of-budget", code: ErrorCode.TokenBudget, message: `the task's model calls used ${projection.tokens_used} tokens, over runtime.json's agent.token_budget of ${token_budget}` };
  }
  return { kind: "decide-again", reason: `${outcomeOfSteps(projection)}; the model sees the results and decides what comes next` };
}
