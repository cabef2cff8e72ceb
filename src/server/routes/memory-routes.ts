import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { MemoryCreateSchema, MemoryPinSchema, MemoryQuerySchema, NumericIdParamsSchema } from "../../contracts/index.js";
import type { RouteOptions } from "./route-options.js";

/** Long-term memory: search, list, stats; remembering, forgetting and pinning are recorded as memory-edit tasks. */
export const memoryRoutes: FastifyPluginAsyncZod<RouteOptions> = async (app, { ducklm }) => {
  app.get("/memory", { schema: { summary: "Search memory (with `query`: keyword and vector ranks fused) or list it", querystring: MemoryQuerySchema } }, async (request) => {
    const { query, limit } = request.query;
    return query ? { hits: await ducklm.memory.recall(query, limit) } : { entries: ducklm.memory.list(limit) };
  });
  app.get("/memory/stats", { schema: { summary: "Memory entries, size, vector index" } }, async () => ducklm.memory.stats());
  app.post("/memory", { schema: { summary: "Remember something (a near-duplicate reinforces the entry it repeats); recorded as an event", body: MemoryCreateSchema } }, async (request, reply) => {
    const { action, entry, taskId } = await ducklm.memory.remember(request.body.text, request.body.kind, "api");
    return reply.code(action === "insert" ? 201 : 200).send({ action, entry, task_id: taskId });
  });
  app.post("/memory/:id/pin", { schema: { summary: "Pin an entry (cleanup never removes it)", params: NumericIdParamsSchema, body: MemoryPinSchema } }, async (request) => {
    const result = await ducklm.memory.pin(request.params.id, request.body.pinned, "api");
    return { id: request.params.id, pinned: request.body.pinned, task_id: result.taskId };
  });
  app.post("/memory/cleanup", { schema: { summary: "Decay weights and remove old, weak entries now" } }, async () => ducklm.memory.cleanup());
  app.post("/memory/reindex", { schema: { summary: "Embed every entry again and rebuild the vector index" } }, async () => ({ reindexed: await ducklm.memory.reindex() }));
  app.delete("/memory/:id", { schema: { summary: "Forget a memory entry", params: NumericIdParamsSchema } }, async (request) => {
    const result = await ducklm.memory.forget(request.params.id, "api");
    return { deleted: request.params.id, task_id: result.taskId };
  });
};
