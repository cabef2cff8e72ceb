import { z } from "zod";
import { ModelWorkSchema } from "./model-work.js";

/** Every state a task can be in. Terminal: completed, failed, cancelled. */
export const TaskStateSchema = z.enum([
  "received",
  "queued",
  "running",
  "awaiting_permission",
  "completed",
  "failed",
  "cancelled",
]);
export type TaskState = z.infer<typeof TaskStateSchema>;

export const TERMINAL_TASK_STATES: ReadonlySet<TaskState> = new Set(["completed", "failed", "cancelled"]);

export function isTerminalTaskState(state: TaskState): boolean {
  return TERMINAL_TASK_STATES.has(state);
}

/** What a user hands to DuckLM: the web chat, the CLI and `POST /chat` all produce one. */
export const UserTaskSchema = z.object({
  /** The request in the user's words. */
  text: z.string().trim().min(1, "the task text is empty").max(100_000),
  /** Groups tasks of one conversation; history for the context comes from the same session. */
  session_id: z.string().min(1).max(200).optional(),
  /** Directory the tools work in. Defaults to the runtime's workspace. */
  workspace: z.string().min(1).max(4096).optional(),
  /**
   * Command categories approved in advance, for unattended runs. Only `unknown` (commands no rule
   * covers) can be: no_always is always asked and hard_stop never runs.
   */
  auto_approve: z.array(z.enum(["unknown", "network"])).max(2).default([]),
});
export type UserTask = z.infer<typeof UserTaskSchema>;

/** The stored row of a task, as listed by `ducklm tasks` and `GET /tasks`. */
export const TaskSummarySchema = z.object({
  id: z.string(),
  text: z.string(),
  state: TaskStateSchema,
  session_id: z.string().nullable(),
  workspace: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
  last_seq: z.number().int(),
  answer: z.string().nullable(),
  error: z.string().nullable(),
  /** What the task's model calls cost together; null before its first call reported it. */
  model_work: ModelWorkSchema.nullable(),
});
export type TaskSummary = z.infer<typeof TaskSummarySchema>;

/** A conversation: the tasks of one session (a task sent without one is a conversation of its own). */
export const ConversationSummarySchema = z.object({
  /** The session id, or the task's id for a task with none. */
  id: z.string(),
  session_id: z.string().nullable(),
  /** The first message. */
  title: z.string(),
  tasks: z.number().int(),
  latest_task_id: z.string(),
  /** The state of its latest task. */
  state: TaskStateSchema,
  started_at: z.string(),
  updated_at: z.string(),
});
export type ConversationSummary = z.infer<typeof ConversationSummarySchema>;
