import { z } from "zod";
import { MemoryKindSchema } from "./memory.js";
import { TaskStateSchema } from "./task.js";

const Id = z.string().min(1).max(200).regex(/^[A-Za-z0-9_.:-]+$/, "only letters, digits and _ . : -");

export const ChatRequestSchema = z.strictObject({
  text: z.string().trim().min(1, "the task text is empty").max(100_000),
  session_id: Id.optional(),
  /** Wait for the task to finish (or to need the user) before answering. Defaults to false. */
  wait: z.boolean().default(false),
  /** Run commands no rule covers without asking (never no_always or hard_stop). */
  auto_approve: z.array(z.enum(["unknown", "network"])).max(2).default([]),
});

export const TaskIdParamsSchema = z.strictObject({ id: Id });

export const ConversationListQuerySchema = z.strictObject({
  limit: z.coerce.number().int().positive().max(200).default(50),
});

export const TaskListQuerySchema = z.strictObject({
  state: TaskStateSchema.optional(),
  limit: z.coerce.number().int().positive().max(500).default(50),
  /** The `next` of the previous page: the listing goes on after its last task. */
  cursor: z.string().max(400).optional(),
});

/** A listing's place, as an opaque cursor: the creation time and id of the last task shown. */
export function taskCursor(task: { created_at: string; id: string }): string {
  return Buffer.from(JSON.stringify([task.created_at, task.id])).toString("base64url");
}

export function readTaskCursor(cursor: string): { created_at: string; id: string } | null {
  try {
    const value = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as unknown;
    if (Array.isArray(value) && value.length === 2 && typeof value[0] === "string" && typeof value[1] === "string") return { created_at: value[0], id: value[1] };
  } catch {
    // Not one of ours.
  }
  return null;
}

export const SinceQuerySchema = z.strictObject({
  // Events are numbered from 1; 0 also means "from the start", as clients often count from 0.
  since: z.coerce.number().int().min(0).default(1).transform((since) => Math.max(1, since)),
  limit: z.coerce.number().int().positive().max(10_000).default(1_000),
});

export const RecentEventsQuerySchema = z.strictObject({
  limit: z.coerce.number().int().positive().max(1_000).default(100),
});

export const PermissionResolveSchema = z.strictObject({
  task_id: Id,
  request_id: Id,
  decision: z.enum(["allow", "allow_always", "deny"]),
  /** For allow_always: forget the approval after this many seconds. */
  expires_in_s: z.number().int().positive().max(31_536_000).optional(),
});

export const SecretResolveSchema = z.strictObject({
  task_id: Id,
  request_id: Id,
  secret: z.string().min(1).max(4096),
});

export const FeedbackSchema = z.strictObject({
  task_id: Id,
  step_id: Id.optional(),
  /** The decision the step belongs to, where the task took a step of that id in more than one. */
  iteration: z.number().int().positive().optional(),
  rating: z.enum(["up", "down"]),
  comment: z.string().max(4000).default(""),
});

export const MemoryQuerySchema = z.strictObject({
  query: z.string().max(500).optional(),
  limit: z.coerce.number().int().positive().max(200).default(20),
});

export const MemoryCreateSchema = z.strictObject({
  text: z.string().trim().min(1).max(20_000),
  kind: MemoryKindSchema.default("fact"),
});

export const MemoryPinSchema = z.strictObject({ pinned: z.boolean().default(true) });

export const NumericIdParamsSchema = z.strictObject({ id: z.coerce.number().int().positive() });

/** Every error body: a stable code and a message a person can act on. */
export const ErrorBodySchema = z.object({ error: z.object({ code: z.string(), message: z.string() }) });
