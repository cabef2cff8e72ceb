import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { TaskIdParamsSchema } from "../../contracts/index.js";
import { DuckError, ErrorCode } from "../../errors/duck-error.js";
import { streamTask } from "../event-stream.js";
import type { RouteOptions } from "./route-options.js";

/** Health, remembered approvals and the live event stream. */
export const statusRoutes: FastifyPluginAsyncZod<RouteOptions> = async (app, { ducklm, stream }) => {
  app.get("/health", { schema: { summary: "Liveness and what is available" } }, async () => {
    const status = ducklm.status();
    // Where the data is (a file path, a database server) is not for callers without a token.
    const { location: _location, ...storage } = status.storage;
    // Degraded while the store refuses writes (a full disk): tasks wait and are driven again.
    return { status: status.storage.ok ? "ok" : "degraded", version: "0.1.0", uptime_s: Math.round(process.uptime()), tools: status.tools, sandbox: status.sandbox, storage, worker: status.worker, tasks: status.tasks };
  });
  app.get("/approvals", { schema: { summary: "Remembered approvals" } }, async () => ({ approvals: ducklm.approvals.list() }));
  app.delete("/approvals/:id", { schema: { summary: "Revoke a remembered approval", params: TaskIdParamsSchema } }, async (request) => {
    ducklm.approvals.revoke(request.params.id, "api");
    return { revoked: request.params.id };
  });
  app.get("/stream/:id", { websocket: true, schema: { params: TaskIdParamsSchema, querystring: z.strictObject({ since: z.coerce.number().int().min(0).default(1).transform((since) => Math.max(1, since)) }) } }, (socket, request) => {
    const params = request.params as { id: string };
    const query = request.query as { since: number };
    try {
      ducklm.getTask(params.id);
    } catch (error) {
      // Only a task that is not there is "no such task": a store that failed to answer is a server
      // error the client may retry (4404 would tell it to stop asking).
      if (DuckError.isInstance(error) && error.code === ErrorCode.TaskNotFound) socket.close(4404, "no such task");
      else {
        request.log.warn({ err: error, task_id: params.id }, "could not open a task's event stream");
        socket.close(1011, "the task could not be read: try again");
      }
      return;
    }
    streamTask(socket, ducklm.subscribe, params.id, query.since, stream);
  });
};
