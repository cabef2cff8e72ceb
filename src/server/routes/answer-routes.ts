import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import type { z } from "zod";
import { FeedbackSchema, PermissionResolveSchema, SecretResolveSchema } from "../../contracts/index.js";
import type { RouteOptions } from "./route-options.js";

/** A person's answers: permission requests, passwords, ratings. */
export const answerRoutes: FastifyPluginAsyncZod<RouteOptions> = async (app, { ducklm }) => {
  app.post("/permissions/resolve", { schema: { summary: "Answer a permission request", body: PermissionResolveSchema } }, async (request) => {
    const body = request.body;
    const handle = ducklm.answerPermission(body.task_id, body.request_id, body.decision, { by: "api", ...(body.expires_in_s ? { expiresAt: new Date(Date.now() + body.expires_in_s * 1000) } : {}) });
    return { task_id: handle.taskId, accepted: true };
  });
  const resolveSecret = async (body: z.infer<typeof SecretResolveSchema>) => {
    ducklm.provideSecret(body.task_id, body.request_id, body.secret, "api");
    return { task_id: body.task_id, accepted: true };
  };
  app.post("/secrets/resolve", { schema: { summary: "Hand over a password a step asked for (never stored)", body: SecretResolveSchema } }, async (request) => resolveSecret(request.body));
  app.post("/password/resolve", { schema: { summary: "Same as /secrets/resolve", body: SecretResolveSchema } }, async (request) => resolveSecret(request.body));
  app.post("/critic/feedback", { schema: { summary: "Rate an answer or a step", body: FeedbackSchema } }, async (request) => {
    const body = request.body;
    ducklm.feedback(body.task_id, { target: body.step_id ? "step" : "answer", step_id: body.step_id ?? null, iteration: body.iteration ?? null, rating: body.rating, comment: body.comment }, "api");
    return { accepted: true };
  });
};
