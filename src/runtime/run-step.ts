import type { ToolCall } from "../contracts/index.js";
import { decideRecovery, isRetryable } from "../decisions/recovery-policy.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { CODE_APPLY_TOOL } from "../permissions/permission-policy.js";
import type { StepProjection, TaskProjection } from "../state/task-projection.js";
import { callTool } from "./call-tool.js";
import { inTurn, type ExecutorContext } from "./executor-context.js";
import { deniedResult } from "./permit-call.js";
import { proposeCode } from "./propose-code.js";
import { scoreStep } from "./score-step.js";
import { resolveStepReferences } from "./step-references.js";

/** How a step's turn ended, for the plan loop. */
export type StepTurn = "settled" | "waiting" | "retry";

function stepOf(projection: TaskProjection, stepId: string): StepProjection {
  const step = projection.steps[stepId];
  if (!step) throw new DuckError(ErrorCode.Internal, `step ${stepId} is not in task ${projection.task_id}`);
  return step;
}

/** Starts a new attempt of a pending step and runs it. */
export async function startStep(context: ExecutorContext, taskId: string, stepId: string, signal: AbortSignal): Promise<StepTurn> {
  await inTurn(context, taskId, { type: "step-started", step_id: stepId }, signal);
  const attempt = stepOf(context.store.projection(taskId), stepId).attempt + 1;
  context.store.append(taskId, "step-started", { step_id: stepId, attempt });
  return advanceStep(context, taskId, stepId, signal);
}

/**
 * Carries a started step on from where its events leave it — result, score, recovery — which is
 * what makes a paused or crashed step resumable.
 */
export async function advanceStep(context: ExecutorContext, taskId: string, stepId: string, signal: AbortSignal): Promise<StepTurn> {
  const { store } = context;
  let projection = store.projection(taskId);
  if (stepOf(projection, stepId).result === null) {
    const turn = await produceResult(context, projection, stepOf(projection, stepId), signal);
    if (turn === "waiting") return "waiting";
    projection = store.projection(taskId);
  }
  const step = stepOf(projection, stepId);
  if (step.score === null) {
    const { score, source } = await scoreStep(context, projection, step, signal);
    await inTurn(context, taskId, { type: "critic-scored", step_id: stepId }, signal);
    projection = store.append(taskId, "critic-scored", { step_id: stepId, attempt: step.attempt, score, source });
  }
  return recoverStep(context, projection, stepOf(projection, stepId), signal);
}

/** A tool call runs as it is; a coder step first has the coder propose its files. */
async function produceResult(context: ExecutorContext, projection: TaskProjection, step: StepProjection, signal: AbortSignal): Promise<"done" | "waiting"> {
  const { store } = context;
  const plan = step.step;
  const taskId = projection.task_id;
  if (plan.kind === "coder") {
    if (!step.proposal) {
      const proposed = await proposeCode(context, projection, step, signal);
      await inTurn(context, taskId, { type: "failure" in proposed ? "tool-result" : "coder-proposed", step_id: plan.id }, signal);
      if ("failure" in proposed) {
        store.append(taskId, "tool-result", { step_id: plan.id, attempt: step.attempt, result: proposed.failure });
        return "done";
      }
      projection = store.append(taskId, "coder-proposed", { step_id: plan.id, attempt: step.attempt, proposal: proposed.proposal });
      step = stepOf(projection, plan.id);
    }
    const testCommand = plan.coder.test_command ? { test_command: plan.coder.test_command } : {};
    const files = step.proposal!.files;
    const call: ToolCall = { tool: CODE_APPLY_TOOL, arguments: { files, ...testCommand } };
    return callTool(context, projection, step, call, { tool: CODE_APPLY_TOOL, arguments: { files: files.map((file) => file.path), ...testCommand } }, signal);
  }
  if (context.tools.isInternal(plan.tool)) {
    // Reached only through a coder step, which decides its files and its test command itself.
    await inTurn(context, taskId, { type: "tool-result", step_id: plan.id }, signal);
    store.append(taskId, "tool-result", { step_id: plan.id, attempt: step.attempt, result: deniedResult(plan.tool, ErrorCode.ToolNotFound, `${plan.tool} is not a tool a plan can call`) });
    return "done";
  }
  // An earlier step's output is filled in now, and the call as it runs is what is judged and recorded.
  const resolved = resolveStepReferences(plan.arguments, projection);
  if ("problem" in resolved) {
    await inTurn(context, taskId, { type: "tool-result", step_id: plan.id }, signal);
    store.append(taskId, "tool-result", { step_id: plan.id, attempt: step.attempt, result: deniedResult(plan.tool, ErrorCode.ToolInputInvalid, resolved.problem) });
    return "done";
  }
  // Arguments that do not fit the tool (a command past its length limit, say) are refused before
  // anything judges, records or runs them.
  const tool = context.tools.get(plan.tool);
  const checked = tool?.inputSchema.safeParse(resolved.args);
  if (checked && !checked.success) {
    const problem = checked.error.issues.map((issue) => `${issue.path.join(".") || "(arguments)"}: ${issue.message}`).join("; ");
    await inTurn(context, taskId, { type: "tool-result", step_id: plan.id }, signal);
    store.append(taskId, "tool-result", { step_id: plan.id, attempt: step.attempt, result: deniedResult(plan.tool, ErrorCode.ToolInputInvalid, `${plan.tool} does not take these arguments: ${problem.slice(0, 1000)}`) });
    return "done";
  }
  const call = { tool: plan.tool, arguments: resolved.args };
  return callTool(context, projection, step, call, call, signal);
}

/**
 * A shell command that does no more when run twice may simply run again; anything else may not.
 * Judged as it ran: with earlier steps' output filled in.
 */
async function rerunsSafely(context: ExecutorContext, projection: TaskProjection, step: StepProjection): Promise<boolean> {
  const plan = step.step;
  if (plan.kind !== "tool" || plan.tool !== "shell_exec") return false;
  const resolved = resolveStepReferences(plan.arguments, projection);
  if ("problem" in resolved || typeof resolved.args.command !== "string") return false;
  const command = resolved.args.command;
  return context.classifier.safeToRunAgain(command, await context.classifier.classify(command, { workspace: projection.workspace }));
}

/** The recovery policy's verdict, recorded: completed, retried (after its backoff) or failed. */
async function recoverStep(context: ExecutorContext, projection: TaskProjection, step: StepProjection, signal: AbortSignal): Promise<StepTurn> {
  const { store } = context;
  const taskId = projection.task_id;
  const score = step.score!;
  const code = step.result?.error?.code;
  const succeeded = step.result?.ok === true;
  const sideEffecting = (context.tools.get(step.result?.tool ?? "")?.effect ?? "side-effecting") === "side-effecting";
  // A side-effecting call that ran to its end and failed may have done part of its work (appended
  // to a file, sent a request): running it again would do that again. Unless the command does no
  // more when repeated, the failure goes to the next decision instead, which sees what it printed.
  // A coder step is another matter: its next attempt is a new proposal, made knowing the failure.
  const ranAndFailed = step.step.kind === "tool" && !succeeded && step.tool_called && code !== ErrorCode.ToolTimeout && sideEffecting && isRetryable(code) && !(await rerunsSafely(context, projection, step));
  const decision = decideRecovery(score, step.attempt, context.config.runtime, {
    retryable: isRetryable(code) && !ranAndFailed,
    succeeded,
    ...(ranAndFailed ? { notRetriedBecause: "it ran, failed and may have changed something; running it again could repeat that" } : {}),
  });
  const stepId = step.step.id;
  if (decision.action === "continue" && score.verdict === "pass" && succeeded) {
    await inTurn(context, taskId, { type: "step-completed", step_id: stepId }, signal);
    store.append(taskId, "step-completed", { step_id: stepId, attempt: step.attempt });
    return "settled";
  }
  if (decision.action === "retry") {
    // A command stopped by its time limit may have done part of its work: like a crash, it is asked about.
    const askFirst = code === ErrorCode.ToolTimeout && step.tool_called && sideEffecting && !(await rerunsSafely(context, projection, step));
    await inTurn(context, taskId, { type: "step-retrying", step_id: stepId }, signal);
    store.append(taskId, "step-retrying", { step_id: stepId, attempt: step.attempt, delay_ms: decision.delay_ms, reason: decision.reason, ...(askFirst ? { ask_first: true } : {}) });
    await context.sleep(decision.delay_ms, signal);
    await inTurn(context, taskId, { type: "step-started", step_id: stepId, retryOf: stepId }, signal);
    return "retry";
  }
  await inTurn(context, taskId, { type: "step-failed", step_id: stepId }, signal);
  store.append(taskId, "step-failed", { step_id: stepId, attempt: step.attempt, recovery: decision.action, reason: decision.reason });
  return "settled";
}
