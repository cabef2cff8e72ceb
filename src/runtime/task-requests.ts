import { isTerminalTaskState } from "../contracts/index.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { approvalSubjectOf } from "../permissions/permission-policy.js";
import type { StepProjection } from "../state/task-projection.js";
import type { ExecutorContext } from "./executor-context.js";

export type PermissionAnswer = "allow" | "allow_always" | "deny";

/** Whether an answer was recorded now, or the request had been answered before (a repeated answer is harmless). */
export type AnswerRecord = "recorded" | "answered-before";

/**
 * The step whose open request (permission or secret) has this id. A request answered before counts
 * as answered; anything else is refused.
 */
function openRequest(context: ExecutorContext, taskId: string, requestId: string, kind: "permission" | "secret"): StepProjection | null {
  const projection = context.store.projection(taskId);
  const step = Object.values(projection.steps).find((candidate) => (kind === "permission" ? candidate.permission_request : candidate.secret_request)?.request_id === requestId);
  // An answer to a task that has ended would grant what nothing asks for any more.
  if (step && isTerminalTaskState(projection.state)) {
    throw new DuckError(ErrorCode.TaskNotActive, `task ${taskId} has ended (${projection.state}); its ${kind} request ${requestId} is closed`, { details: { task_id: taskId, request_id: requestId } });
  }
  if (step) return step;
  const answerType = kind === "permission" ? "permission-resolved" : "secret-provided";
  if (context.store.listEvents(taskId).some((event) => event.type === answerType && event.payload.request_id === requestId)) return null;
  throw new DuckError(ErrorCode.PermissionRequestUnknown, `task ${taskId} has no open ${kind} request ${requestId}`, { details: { task_id: taskId, request_id: requestId } });
}

/**
 * Records the answer to an open permission request. "allow_always" also remembers the approval for
 * this exact command and directory (optionally until `expiresAt`); for a no_always command, or a
 * question that was not about the tool itself (an interrupted run), it counts as "allow" and nothing
 * is remembered.
 */
export function recordPermissionAnswer(context: ExecutorContext, taskId: string, requestId: string, answer: PermissionAnswer, by: string, options: { expiresAt?: Date } = {}): AnswerRecord {
  const { store } = context;
  const step = openRequest(context, taskId, requestId, "permission");
  if (!step) return "answered-before";
  const request = step.permission_request!;
  const subject = approvalSubjectOf(request.call);
  const rememberable = !subject.startsWith("tool:") || context.tools.get(request.call.tool)?.permission !== undefined;
  const remember = answer === "allow_always" && rememberable && request.category !== "no_always" && request.category !== "hard_stop";
  const decision = answer === "allow_always" && !remember ? "allow" : answer;
  const workspace = store.projection(taskId).workspace;
  store.transaction(() => {
    store.append(taskId, "permission-resolved", { request_id: requestId, step_id: request.step_id, decision, by });
    if (remember) {
      const approval = context.approvals.grant({ command: subject, cwd: workspace, category: request.category, grantedByTask: taskId, expiresAt: options.expiresAt ?? null });
      store.append(taskId, "approval-granted", { approval_id: approval.id, command: approval.command, cwd: approval.cwd, category: request.category, expires_at: approval.expires_at });
    }
  });
  return "recorded";
}

/**
 * Keeps the secret a step asked for (a sudo password) in this process's memory for that one run; only
 * the fact that it was provided becomes an event.
 */
export function recordSecret(context: ExecutorContext, taskId: string, requestId: string, secret: string, by: string): AnswerRecord {
  const step = openRequest(context, taskId, requestId, "secret");
  if (!step) return "answered-before";
  if (typeof secret !== "string" || secret.length === 0 || secret.length > 4096) throw new DuckError(ErrorCode.InvalidInput, "the secret must be 1 to 4096 characters");
  context.secrets.set(taskId, step.step.id, secret);
  context.store.append(taskId, "secret-provided", { request_id: requestId, step_id: step.step.id, by }, { durable: true });
  return "recorded";
}

/** Stores a person's judgement of an answer or a step, for the critic's calibration. */
export function recordFeedback(context: ExecutorContext, taskId: string, feedback: { target: "answer" | "step"; step_id?: string | null; rating: "up" | "down"; comment?: string }, by: string): void {
  const { store } = context;
  store.requireTask(taskId);
  const stepId = feedback.step_id ?? null;
  if (feedback.target === "step" && (!stepId || !store.projection(taskId).steps[stepId])) {
    throw new DuckError(ErrorCode.InvalidInput, `task ${taskId} has no step ${stepId ?? "(none given)"}`, { details: { task_id: taskId, step_id: stepId } });
  }
  store.append(taskId, "feedback-received", { target: feedback.target, step_id: stepId, rating: feedback.rating, comment: (feedback.comment ?? "").slice(0, 4000), by }, { durable: true });
}

/** Revokes a remembered approval; the revocation is recorded on the task that granted it. */
export function revokeApproval(context: ExecutorContext, approvalId: string, by: string): void {
  const approval = context.approvals.get(approvalId);
  if (!approval) throw new DuckError(ErrorCode.InvalidInput, `no approval with id ${approvalId}`, { details: { approval_id: approvalId } });
  const { store } = context;
  store.transaction(() => {
    if (!context.approvals.revoke(approvalId)) return;
    if (approval.granted_by_task && store.getTask(approval.granted_by_task)) {
      store.append(approval.granted_by_task, "approval-revoked", { approval_id: approvalId, command: approval.command, by });
    }
  });
}
