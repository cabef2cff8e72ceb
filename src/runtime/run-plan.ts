import { orderPlan, scheduleSteps, type StepView } from "../decisions/plan-scheduler.js";
import { describeError, DuckError, ErrorCode } from "../errors/duck-error.js";
import type { ExecutionDirective, PlanStep } from "../contracts/index.js";
import type { TaskProjection } from "../state/task-projection.js";
import { scopedSignal } from "../utils/scoped-signal.js";
import { inTurn, type ExecutorContext } from "./executor-context.js";
import { advanceStep, startStep, type StepTurn } from "./run-step.js";
import { withReferenceDependencies } from "./step-references.js";

/** How a plan's run ended: every step settled, some wait for the user, the task failed, or a step asked to answer. */
export type PlanEnding = "done" | "waiting" | "failed" | "respond";

export function planFromDirective(directive: ExecutionDirective): PlanStep[] {
  switch (directive.kind) {
    case "plan":
      return directive.steps;
    case "tool":
      return [{ id: "step-1", kind: "tool", description: directive.reason, depends_on: [], tool: directive.tool, arguments: directive.arguments }];
    case "coder":
      return [{ id: "step-1", kind: "coder", description: "coder", depends_on: [], coder: directive.coder }];
    default:
      return [];
  }
}

/** Turns the directive into an ordered plan (`plan-accepted`), or fails the task when it cannot be ordered. */
export function acceptPlan(context: ExecutorContext, projection: TaskProjection): TaskProjection | null {
  const steps = withReferenceDependencies(planFromDirective(projection.directive!));
  try {
    return context.store.append(projection.task_id, "plan-accepted", { steps, order: orderPlan(steps) });
  } catch (error) {
    if (!DuckError.isInstance(error) || ![ErrorCode.PlanCycle, ErrorCode.PlanMissingDependency, ErrorCode.PlanDuplicateStep].includes(error.code as never)) throw error;
    context.store.append(projection.task_id, "task-failed", describeError(error));
    return null;
  }
}

/**
 * Runs ready steps (independent ones in parallel, up to `scheduler.max_parallel_steps`) until the
 * plan is over, a step fails the task (once the steps already running have finished), or every
 * open step waits for the user.
 */
export async function runPlan(context: ExecutorContext, taskId: string, signal: AbortSignal): Promise<PlanEnding> {
  const planController = new AbortController();
  // Only a plan with siblings needs its own signal, to stop the others when one of them throws.
  if ((context.store.projection(taskId).plan_order?.length ?? 0) <= 1) return runSteps(context, taskId, signal, planController, signal);
  const planScope = scopedSignal([signal, planController.signal]);
  try {
    return await runSteps(context, taskId, signal, planController, planScope.signal);
  } finally {
    planScope.dispose();
  }
}

async function runSteps(context: ExecutorContext, taskId: string, signal: AbortSignal, planController: AbortController, planSignal: AbortSignal): Promise<PlanEnding> {
  const { store, config } = context;
  const running = new Map<string, Promise<StepTurn | undefined>>();
  const errors: unknown[] = [];
  let ending: "failed" | "respond" | null = null;
  let skipTurnTaken = false;
  const launch = (stepId: string, work: () => Promise<StepTurn>) => {
    const settled = work()
      .catch((error: unknown) => {
        errors.push(error);
        return undefined;
      })
      .finally(() => running.delete(stepId));
    running.set(stepId, settled);
  };

  // Steps a previous drive left half-way (a permission answer, a restart) continue where they stand.
  for (const step of Object.values(store.projection(taskId).steps)) {
    if (step.status === "running") launch(step.step.id, () => advanceStep(context, taskId, step.step.id, planSignal));
  }

  try {
    return await driveSteps();
  } catch (error) {
    // Whatever ended the loop (a step that threw, storage that failed, a replay that diverged), no
    // step may outlive it: the plan's signal goes back to a pool once runPlan returns.
    planController.abort(error);
    await Promise.allSettled(running.values());
    throw error;
  }

  async function driveSteps(): Promise<PlanEnding> {
    for (;;) {
      const projection = store.projection(taskId);
      if (ending === null) {
        const failed = Object.values(projection.steps).find((step) => step.status === "failed" && step.recovery !== "continue");
        // No further step starts; the ones already running finish, so that nothing is cut off half-way
        // and the next decision sees all of their results.
        if (failed) ending = failed.recovery === "respond" ? "respond" : "failed";
      }
      if (ending === null) {
        const views = new Map<string, StepView>();
        for (const [id, step] of Object.entries(projection.steps)) views.set(id, { id, depends_on: step.step.depends_on, status: running.has(id) ? "running" : step.status });
        const decision = scheduleSteps(projection.plan_order ?? [], views, config.runtime.scheduler.max_parallel_steps);
        if (decision.blocked.length > 0) {
          // A replay records the skips where the recording has them, then looks at the plan again.
          if (context.recordedTurn && !skipTurnTaken) {
            await inTurn(context, taskId, { type: "step-skipped", step_id: decision.blocked[0]!.id }, planSignal);
            skipTurnTaken = true;
            continue;
          }
          skipTurnTaken = false;
          store.appendAll(
            taskId,
            decision.blocked.map(({ id, because }) => ({ type: "step-skipped" as const, payload: { step_id: id, reason: `depends on ${because}, which did not succeed` } })),
          );
          continue;
        }
        for (const stepId of decision.ready) launch(stepId, () => startStep(context, taskId, stepId, planSignal));
        if (running.size === 0) {
          const waiting = Object.values(projection.steps).find((step) => step.status === "awaiting_permission");
          if (!waiting) return "done";
          if (projection.state !== "awaiting_permission") {
            const requestId = waiting.permission_request?.request_id ?? waiting.secret_request?.request_id ?? "";
            store.append(taskId, "task-awaiting-permission", { request_id: requestId, step_id: waiting.step.id });
          }
          return "waiting";
        }
      } else if (running.size === 0) {
        break;
      }
      await Promise.race(running.values());
      // A step that throws (the task was cancelled, or storage failed) ends the whole plan.
      if (errors.length > 0) throw errors[0];
    }
    signal.throwIfAborted();
    return ending === "failed" ? "failed" : "respond";
  }
}

/** Ends the task with the failure of the step that failed it (when no further decision is taken). */
export function failWithStep(context: ExecutorContext, taskId: string): void {
  const failed = Object.values(context.store.projection(taskId).steps).find((step) => step.status === "failed" && step.recovery === "fail");
  context.store.append(taskId, "task-failed", {
    code: failed?.result?.error?.code ?? ErrorCode.StepFailed,
    message: `step ${failed?.step.id ?? "?"} failed: ${failed?.failure_reason ?? "no reason recorded"}`,
  });
}
