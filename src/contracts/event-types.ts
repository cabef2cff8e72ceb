/**
 * Every event type DuckLM records, named noun-verb. This module is the only place they are spelled.
 */
export const EventType = {
  TaskReceived: "task-received",
  TaskStarted: "task-started",
  TaskResumed: "task-resumed",
  TaskQueued: "task-queued",
  TaskDequeued: "task-dequeued",
  TaskAwaitingPermission: "task-awaiting-permission",
  TaskCompleted: "task-completed",
  TaskFailed: "task-failed",
  TaskCancelled: "task-cancelled",
  ContextBuilt: "context-built",
  MemoryRecalled: "memory-recalled",
  MemoryWritten: "memory-written",
  ModelOutputStarted: "model-output-started",
  ModelOutputDelta: "model-output-delta",
  ModelOutputCompleted: "model-output-completed",
  ModelOutputFailed: "model-output-failed",
  DirectiveDecided: "directive-decided",
  DirectiveRetried: "directive-retried",
  IterationStarted: "iteration-started",
  ContextSummarised: "context-summarised",
  PlanAccepted: "plan-accepted",
  StepStarted: "step-started",
  StepRetrying: "step-retrying",
  StepCompleted: "step-completed",
  StepFailed: "step-failed",
  StepSkipped: "step-skipped",
  CoderProposed: "coder-proposed",
  ToolCalled: "tool-called",
  ToolResult: "tool-result",
  CriticScored: "critic-scored",
  PermissionRequested: "permission-requested",
  PermissionResolved: "permission-resolved",
  ApprovalGranted: "approval-granted",
  ApprovalUsed: "approval-used",
  ApprovalRevoked: "approval-revoked",
  SecretRequested: "secret-requested",
  SecretProvided: "secret-provided",
  FeedbackReceived: "feedback-received",
  WorkspaceRestored: "workspace-restored",
  AnswerCompleted: "answer-completed",
} as const;

export type EventTypeName = (typeof EventType)[keyof typeof EventType];

export const ALL_EVENT_TYPES: readonly EventTypeName[] = Object.values(EventType);
