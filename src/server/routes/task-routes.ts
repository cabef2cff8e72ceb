import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { ChatRequestSchema, ConversationListQuerySchema, RecentEventsQuerySchema, SinceQuerySchema, TaskIdParamsSchema, TaskListQuerySchema, readTaskCursor, taskCursor } from "../../contracts/index.js";
import { DuckError, ErrorCode } from "../../errors/duck-error.js";
import { z } from "zod";
import type { RouteOptions } from "./route-options.js";

/** Tasks: submit, list, one with what it waits for, its events, cancel, undo; and the newest events of all. */
/** Why, in the caller's words (the web chat's Stop button says so), recorded in the task-cancelled event. */
const CancelBodySchema = z.strictObject({ reason: z.string().trim().min(1).max(200).optional() }).nullish();
/** Which point to put the workspace back to: before `step` (the task's first change without it), or before the latest undo (`redo`). */
const UndoBodySchema = z
  .strictObject({ step: z.string().min(1).max(200).optional(), redo: z.boolean().optional(), dry_run: z.boolean().optional() })
  .refine((body) => !(body.step !== undefined && body.redo), { message: "give either step or redo, not both" })
  .nullish();

export const taskRoutes: FastifyPluginAsyncZod<RouteOptions> = async (app, { ducklm }) => {
  app.post("/chat", { schema: { summary: "Submit a task; answers with its id at once, or with its outcome when `wait` is true", body: ChatRequestSchema } }, async (request, reply) => {
    const body = request.body;
    // An id answered at once must be on disk before the answer. A caller that waits gets its answer only
    // once the task's events are committed, so its task joins the first batch like any other.
    const handle = ducklm.submit({ text: body.text, ...(body.session_id ? { session_id: body.session_id } : {}), auto_approve: body.auto_approve }, { durable: !body.wait });
    if (!body.wait) {
      const position = ducklm.getTask(handle.taskId).queue_position;
      return reply.code(202).send({ task_id: handle.taskId, state: position === null ? "received" : "queued", ...(position === null ? {} : { queue_position: position }) });
    }
    return await handle.done;
  });
  app.get("/tasks", { schema: { summary: "Tasks, newest first; `next` is the cursor of the following page", querystring: TaskListQuerySchema } }, async (request) => {
    const { state, limit, cursor } = request.query;
    const after = cursor === undefined ? null : readTaskCursor(cursor);
    if (cursor !== undefined && !after) throw new DuckError(ErrorCode.InvalidInput, "cursor: not a cursor this server gave out (use the `next` of a previous page)");
    const tasks = ducklm.listTasks({ ...(state ? { state } : {}), limit, ...(after ? { after } : {}) });
    return { tasks, next: tasks.length === limit ? taskCursor(tasks.at(-1)!) : null };
  });
  app.get("/conversations", { schema: { summary: "Conversations (a session's tasks, or a task sent without one), the most recently active first", querystring: ConversationListQuerySchema } }, async (request) => ({
    conversations: ducklm.listConversations(request.query.limit),
  }));
  app.get("/conversations/:id", { schema: { summary: "One conversation's tasks, oldest first (the id of a session, or of a task sent without one)", params: TaskIdParamsSchema } }, async (request) => ({
    id: request.params.id,
    tasks: ducklm.conversation(request.params.id),
  }));
  app.get("/tasks/:id", { schema: { summary: "One task with what it waits for", params: TaskIdParamsSchema } }, async (request) => ducklm.getTask(request.params.id));
  app.get("/tasks/:id/events", { schema: { summary: "A task's stored events from `since`", params: TaskIdParamsSchema, querystring: SinceQuerySchema } }, async (request) => ({
    events: ducklm.events(request.params.id, { since: request.query.since, limit: request.query.limit }),
  }));
  app.post("/tasks/:id/cancel", { schema: { summary: "Cancel a task", params: TaskIdParamsSchema, body: CancelBodySchema } }, async (request) => {
    ducklm.cancel(request.params.id, request.body?.reason ?? "cancelled through the API");
    // A task that waited in line, or that nobody drove, is cancelled already; a running one stops at its next step.
    const now = ducklm.getTask(request.params.id).task.state;
    return { task_id: request.params.id, state: now === "cancelled" ? "cancelled" : "cancelling" };
  });
  app.get("/tasks/:id/undo", { schema: { summary: "The steps a finished task's workspace can be put back before, oldest first", params: TaskIdParamsSchema } }, async (request) => ({
    task_id: request.params.id,
    points: await ducklm.undoPoints(request.params.id),
  }));
  app.post("/tasks/:id/undo", { schema: { summary: "Put the workspace back as it was before a finished task (or one of its steps); `dry_run` only lists the files", params: TaskIdParamsSchema, body: UndoBodySchema } }, async (request) => {
    const body = request.body ?? {};
    return ducklm.undo(request.params.id, { ...(body.step !== undefined ? { step: body.step } : {}), dryRun: body.dry_run === true, redo: body.redo === true, by: "api" });
  });
  app.get("/events", { schema: { summary: "The newest events of all tasks", querystring: RecentEventsQuerySchema } }, async (request) => ({ events: ducklm.recentEvents(request.query.limit) }));
};
