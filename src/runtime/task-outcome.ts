import { isTerminalTaskState, type EventPayloads, type TaskState } from "../contracts/index.js";
import type { TaskProjection } from "../state/task-projection.js";

/** What a caller learns when the loop stops driving a task (finished, or waiting for the user). */
export interface TaskOutcome {
  task_id: string;
  state: TaskState;
  answer: string | null;
  error: { code: string; message: string } | null;
  /** Open permission requests, when the task waits for the user. */
  pending_permissions: Array<EventPayloads["permission-requested"]>;
  /** Open requests for a secret (a sudo password). */
  pending_secrets: Array<EventPayloads["secret-requested"]>;
}

export function outcomeOf(projection: TaskProjection): TaskOutcome {
  // A task that has ended waits for nobody: a question it left open is no longer one.
  const ended = isTerminalTaskState(projection.state);
  return {
    task_id: projection.task_id,
    state: projection.state,
    answer: projection.answer,
    error: projection.error,
    pending_permissions: Object.values(projection.steps)
      .filter(() => !ended)
      .map((step) => step.permission_request)
      .filter((request): request is EventPayloads["permission-requested"] => request !== null),
    pending_secrets: Object.values(projection.steps)
      .filter(() => !ended)
      .map((step) => step.secret_request)
      .filter((request): request is EventPayloads["secret-requested"] => request !== null),
  };
}
