import { isTerminalTaskState } from "../contracts/index.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { approvalSubjectOf } from "../permissions/permission-policy.js";
import { ANY_WORKSPACE, HOST_APPROVAL_PREFIX } from "../permissions/egress-policy.js";
import type { StepProjection, TaskProjection } from "../state/task-projection.js";
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
  const alwaysAllowed = answer === "allow_always" && request.category !== "no_always" && request.category !== "hard_stop";
  // A question about where a request goes is answered for those hosts, in every task and workspace.
  const hosts = alwaysAllowed ? (request.hosts ?? []) : [];
  const remember = alwaysAllowed && rememberable && hosts.length === 0;
  const decision = answer === "allow_always" && !remember && hosts.length === 0 ? "allow" : answer;
  const workspace = store.projection(taskId).workspace;
  store.transaction(() => {
    store.append(taskId, "permission-resolved", { request_id: requestId, step_id: request.step_id, decision, by });
    for (const host of hosts) {
      const approval = context.approvals.grant({ command: `${HOST_APPROVAL_PREFIX}${host}`, cwd: ANY_WORKSPACE, category: "unknown", grantedByTask: taskId, expiresAt: options.expiresAt ?? null });
      store.append(taskId, "approval-granted", { approval_id: approval.id, command: approval.command, cwd: approval.cwd, category: "unknown", expires_at: approval.expires_at });
    }
    if (remember) {
      const approval = context.approvals.grant({
        command: subject,
        cwd: workspace,
        category: request.category,
        grantedByTask: taskId,
        expiresAt: options.expiresAt ?? null,
        contentDigest: request.content_digest ?? null,
        network: request.network === true,
      });
      store.append(taskId, "approval-granted", {
        approval_id: approval.id,
        command: approval.command,
        cwd: approval.cwd,
        category: request.category,
        expires_at: approval.expires_at,
        ...(request.ran_files && request.content_digest ? { ran_files: request.ran_files } : {}),
        ...(approval.network ? { network: true } : {}),
      });
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
/** A person's rating of a task's answer, or of one of its steps. */
export interface Feedback {
  target: "answer" | "step";
  step_id?: string | null;
  /**
   * The decision the step belongs to, where the same step id was taken in more than one (each
   * single-tool decision names its step `step-1`). Needed only then.
   */
  iteration?: number | null;
  rating: "up" | "down";
  comment?: string;
}

/** The decisions of a task that took a step with this id, oldest first. */
function decisionsWithStep(projection: TaskProjection, stepId: string): number[] {
  const earlier = projection.iterations.filter((record) => record.steps.some((step) => step.id === stepId)).map((record) => record.iteration);
  return projection.steps[stepId] ? [...earlier, projection.iteration] : earlier;
}

function listed(numbers: number[]): string {
  return numbers.length === 1 ? String(numbers[0]) : `${numbers.slice(0, -1).join(", ")} and ${numbers.at(-1)}`;
}

/**
 * Records a rating. A step is found in any of the task's decisions; `asRecorded` replays a rating
 * from a log kept before ratings named their decision, as that version checked it (the latest
 * decision's steps only).
 */
export function recordFeedback(context: ExecutorContext, taskId: string, feedback: Feedback, by: string, options: { asRecorded?: boolean } = {}): void {
  const { store } = context;
  store.requireTask(taskId);
  const stepId = feedback.step_id ?? null;
  const details = { task_id: taskId, step_id: stepId, iteration: feedback.iteration ?? null };
  let iteration: number | undefined;
  if (feedback.target === "answer" && feedback.iteration !== undefined && feedback.iteration !== null) {
    throw new DuckError(ErrorCode.InvalidInput, "a decision's number goes with a step: give the step's id too", { details });
  }
  if (feedback.target === "step") {
    if (!stepId) throw new DuckError(ErrorCode.InvalidInput, `rating a step of task ${taskId} needs the step's id`, { details });
    const projection = store.projection(taskId);
    if (options.asRecorded) {
      if (!projection.steps[stepId]) throw new DuckError(ErrorCode.InvalidInput, `task ${taskId} has no step ${stepId}`, { details });
    } else {
      const decisions = decisionsWithStep(projection, stepId);
      if (decisions.length === 0) throw new DuckError(ErrorCode.InvalidInput, `task ${taskId} has no step ${stepId}`, { details });
      if (feedback.iteration !== undefined && feedback.iteration !== null && !decisions.includes(feedback.iteration)) {
        throw new DuckError(ErrorCode.InvalidInput, `task ${taskId} took no step ${stepId} in decision ${feedback.iteration}; it took one in decision ${listed(decisions)}`, { details });
      }
      if ((feedback.iteration === undefined || feedback.iteration === null) && decisions.length > 1) {
        throw new DuckError(
          ErrorCode.InvalidInput,
          `task ${taskId} took a step ${stepId} in decisions ${listed(decisions)}: say which (\`--iteration N\` in the CLI, "iteration" over HTTP)`,
          { details: { ...details, decisions } },
        );
      }
      iteration = feedback.iteration ?? decisions[0];
    }
  }
  const payload = { target: feedback.target, step_id: stepId, ...(iteration !== undefined ? { iteration } : {}), rating: feedback.rating, comment: (feedback.comment ?? "").slice(0, 4000), by };
  store.append(taskId, "feedback-received", payload, { durable: true });
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
