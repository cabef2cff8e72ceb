import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import fastifyStatic from "@fastify/static";
import fastifySwagger from "@fastify/swagger";
import fastifySwaggerUi from "@fastify/swagger-ui";
import fastifyWebsocket from "@fastify/websocket";
import Fastify, { type FastifyError, type FastifyInstance } from "fastify";
import { jsonSchemaTransform, serializerCompiler, validatorCompiler, type ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import {
  ChatRequestSchema,
  FeedbackSchema,
  MemoryCreateSchema,
  MemoryPinSchema,
  MemoryQuerySchema,
  NumericIdParamsSchema,
  PermissionResolveSchema,
  RecentEventsQuerySchema,
  SecretResolveSchema,
  SinceQuerySchema,
  TaskIdParamsSchema,
  TaskListQuerySchema,
  isTerminalTaskState,
} from "../contracts/index.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import type { Runtime } from "../runtime/create-runtime.js";
import { outcomeOf } from "../runtime/task-outcome.js";
import { streamTask, type StreamOptions } from "./event-stream.js";
import { callerOf, cookieValue, createRequestGuard, SESSION_COOKIE } from "./request-guard.js";
import { loginPage } from "./login-page.js";

export const WEB_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../web");

export interface ServerOptions {
  runtime: Runtime;
  token: string;
  /** The port the server will listen on (Host and Origin checks compare against it). */
  port: number;
  /** Host names accepted besides the loopback ones. */
  extraHosts?: string[];
  /** Largest request body. Defaults to 1 MiB. */
  bodyLimit?: number;
  stream?: StreamOptions;
  /** Served as a plain logger; defaults to none. */
  logger?: boolean;
}

const STATUS_BY_CODE: Partial<Record<string, number>> = {
  [ErrorCode.InvalidInput]: 400,
  [ErrorCode.TaskNotFound]: 404,
  [ErrorCode.TaskNotActive]: 409,
  [ErrorCode.PermissionRequestUnknown]: 409,
  [ErrorCode.HardStop]: 403,
};

const WEB_ASSETS = ["app.js", "answer-stream.js", "style.css", "favicon.svg"];
const PUBLIC_PATHS = new Set(["/", "/index.html", "/health", "/login", "/session", ...WEB_ASSETS.map((asset) => `/${asset}`)]);
const PAGE_CSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'";

function badUtf8(buffer: Buffer): boolean {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(buffer);
    return false;
  } catch {
    return true;
  }
}

/** The HTTP API, the WebSocket stream and the web chat, secured by the request guard. Does not listen. */
export async function buildServer(options: ServerOptions): Promise<FastifyInstance> {
  const { runtime } = options;
  const { loop, store } = runtime;
  const app = Fastify({ logger: options.logger ?? false, bodyLimit: options.bodyLimit ?? 1024 * 1024, return503OnClosing: true, forceCloseConnections: true }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  // Bodies are JSON in valid UTF-8, or they are refused before anything parses them.
  app.removeContentTypeParser(["application/json"]);
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, (_request, body: Buffer, done) => {
    if (badUtf8(body)) return done(new DuckError(ErrorCode.InvalidInput, "the body is not valid UTF-8"), undefined);
    if (body.length === 0) return done(null, {});
    try {
      done(null, JSON.parse(body.toString("utf8")));
    } catch {
      done(new DuckError(ErrorCode.InvalidInput, "the body is not valid JSON"), undefined);
    }
  });

  app.setErrorHandler((error: FastifyError | DuckError, _request, reply) => {
    if (DuckError.isInstance(error)) {
      void reply.code(STATUS_BY_CODE[error.code] ?? 500).send({ error: { code: error.code, message: error.message } });
      return;
    }
    const fastifyError = error as FastifyError;
    if (fastifyError.validation) {
      const message = fastifyError.validation.map((issue) => `${issue.instancePath?.replace(/^\//, "").replace(/\//g, ".") || fastifyError.validationContext || "input"}: ${issue.message ?? "invalid"}`).join("; ");
      void reply.code(400).send({ error: { code: ErrorCode.InvalidInput, message } });
      return;
    }
    const status = fastifyError.statusCode && fastifyError.statusCode >= 400 && fastifyError.statusCode < 600 ? fastifyError.statusCode : 500;
    if (status >= 500) runtime.logger.error({ err: error }, "request failed");
    const code = status === 413 ? "DUCK_ERR_BODY_TOO_LARGE" : status === 415 ? "DUCK_ERR_UNSUPPORTED_MEDIA_TYPE" : status < 500 ? ErrorCode.InvalidInput : ErrorCode.Internal;
    void reply.code(status).send({ error: { code, message: status < 500 ? fastifyError.message : "internal error; see the log" } });
  });
  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send({ error: { code: "DUCK_ERR_NOT_FOUND", message: `no route ${request.method} ${request.url.split("?")[0]}` } });
  });

  const checkSession = (session: string) => runtime.logins.checkSession(session);
  app.addHook("onRequest", createRequestGuard({ token: options.token, port: options.port, extraHosts: options.extraHosts ?? [], publicPaths: (path) => PUBLIC_PATHS.has(path), checkSession }));
  app.addHook("onSend", async (_request, reply, payload) => {
    reply.header("x-content-type-options", "nosniff");
    reply.header("referrer-policy", "no-referrer");
    return payload;
  });

  await app.register(fastifySwagger, {
    openapi: { info: { title: "DuckLM API", version: "0.1.0", description: "Local agent runtime. Every route but / and /health needs the install token." } },
    transform: jsonSchemaTransform,
  });
  await app.register(fastifySwaggerUi, { routePrefix: "/docs" });
  await app.register(fastifyWebsocket, { options: { maxPayload: 64 * 1024 } });
  if (existsSync(WEB_ROOT)) await app.register(fastifyStatic, { root: WEB_ROOT, serve: false });

  // The page itself holds nothing secret; everything it does needs the session a login link gives.
  app.get("/", { schema: { hide: true } }, async (_request, reply) => {
    reply.header("content-security-policy", PAGE_CSP);
    reply.header("cache-control", "no-store");
    return reply.type("text/html; charset=utf-8").send(readFileSync(join(WEB_ROOT, "index.html")));
  });

  // A one-time link (printed by `ducklm serve` and `ducklm login`) becomes an HttpOnly session cookie;
  // the redirect drops the code from the address bar. The install token never reaches a browser.
  app.get("/login", { schema: { hide: true, querystring: z.strictObject({ code: z.string().max(200).optional() }) } }, async (request, reply) => {
    reply.header("content-security-policy", PAGE_CSP).header("cache-control", "no-store").header("referrer-policy", "no-referrer");
    const code = request.query.code;
    if (code) {
      const session = runtime.logins.redeemCode(code);
      if (session) {
        reply.header("set-cookie", `${SESSION_COOKIE}=${session}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${30 * 24 * 3600}`);
        return reply.code(303).header("location", "/").send();
      }
      return reply.code(401).type("text/html; charset=utf-8").send(loginPage("This login link has been used or has expired."));
    }
    return reply.type("text/html; charset=utf-8").send(loginPage(null));
  });
  app.get("/session", { schema: { summary: "Whether this client is logged in (a browser session or the install token)" } }, async (request) => {
    const caller = callerOf(request, { token: options.token, checkSession });
    return { authenticated: caller !== null, via: caller };
  });
  app.post("/logout", { schema: { summary: "End this browser's session" } }, async (request, reply) => {
    const session = cookieValue(request.headers.cookie, SESSION_COOKIE);
    if (session) runtime.logins.endSession(session);
    reply.header("set-cookie", `${SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0`);
    return { logged_out: true };
  });
  for (const asset of WEB_ASSETS) {
    app.get(`/${asset}`, { schema: { hide: true } }, async (_request, reply) => reply.sendFile(asset));
  }

  app.get("/health", { schema: { summary: "Liveness and what is available" } }, async () => ({
    status: "ok",
    version: "0.1.0",
    uptime_s: Math.round(process.uptime()),
    tools: runtime.tools.names(),
    sandbox: { confined: runtime.sandbox.kind === "bwrap", note: runtime.sandbox.note, warning: runtime.sandboxWarning },
  }));

  app.get("/events", { schema: { summary: "The newest events of all tasks", querystring: RecentEventsQuerySchema } }, async (request) => ({
    events: store.recentEvents(request.query.limit),
  }));

  app.post("/chat", { schema: { summary: "Submit a task; answers with its id at once, or with its outcome when `wait` is true", body: ChatRequestSchema } }, async (request, reply) => {
    const body = request.body;
    const handle = loop.submit(
      { text: body.text, ...(body.session_id ? { session_id: body.session_id } : {}), auto_approve: body.auto_approve },
      { durable: true },
    );
    if (!body.wait) return reply.code(202).send({ task_id: handle.taskId, state: "received" });
    return await handle.done;
  });

  app.get("/tasks", { schema: { summary: "Tasks, newest first", querystring: TaskListQuerySchema } }, async (request) => ({
    tasks: store.listTasks({ ...(request.query.state ? { state: request.query.state } : {}), limit: request.query.limit }),
  }));

  app.get("/tasks/:id", { schema: { summary: "One task with what it waits for", params: TaskIdParamsSchema } }, async (request) => {
    const task = store.requireTask(request.params.id);
    return { task, ...outcomeOf(store.projection(task.id)) };
  });

  app.get("/tasks/:id/events", { schema: { summary: "A task's stored events from `since`", params: TaskIdParamsSchema, querystring: SinceQuerySchema } }, async (request) => {
    store.requireTask(request.params.id);
    return { events: store.listEvents(request.params.id, request.query.since, request.query.limit) };
  });

  app.post("/tasks/:id/cancel", { schema: { summary: "Cancel a task", params: TaskIdParamsSchema } }, async (request) => {
    const task = store.requireTask(request.params.id);
    if (isTerminalTaskState(task.state)) throw new DuckError(ErrorCode.TaskNotActive, `task ${task.id} is already ${task.state}`);
    loop.cancel(task.id, "cancelled through the API");
    return { task_id: task.id, state: "cancelling" };
  });

  app.post("/permissions/resolve", { schema: { summary: "Answer a permission request", body: PermissionResolveSchema } }, async (request) => {
    const body = request.body;
    store.requireTask(body.task_id);
    const handle = loop.resolvePermission(body.task_id, body.request_id, body.decision, "api", body.expires_in_s ? { expiresAt: new Date(Date.now() + body.expires_in_s * 1000) } : {});
    return { task_id: handle.taskId, accepted: true };
  });

  const resolveSecret = async (body: z.infer<typeof SecretResolveSchema>) => {
    store.requireTask(body.task_id);
    loop.provideSecret(body.task_id, body.request_id, body.secret, "api");
    return { task_id: body.task_id, accepted: true };
  };
  app.post("/secrets/resolve", { schema: { summary: "Hand over a password a step asked for (never stored)", body: SecretResolveSchema } }, async (request) => resolveSecret(request.body));
  app.post("/password/resolve", { schema: { summary: "Same as /secrets/resolve", body: SecretResolveSchema } }, async (request) => resolveSecret(request.body));

  app.post("/critic/feedback", { schema: { summary: "Rate an answer or a step", body: FeedbackSchema } }, async (request) => {
    const body = request.body;
    loop.recordFeedback(body.task_id, { target: body.step_id ? "step" : "answer", step_id: body.step_id ?? null, rating: body.rating, comment: body.comment }, "api");
    return { accepted: true };
  });

  app.get("/memory", { schema: { summary: "Search memory (with `query`: keyword and vector ranks fused) or list it", querystring: MemoryQuerySchema } }, async (request) => {
    const { query, limit } = request.query;
    return query ? { hits: await runtime.memory.recall(query, limit) } : { entries: runtime.memory.store.list(limit) };
  });
  app.get("/memory/stats", { schema: { summary: "Memory entries, size, vector index" } }, async () => runtime.memory.stats());
  app.post("/memory", { schema: { summary: "Remember something (a near-duplicate reinforces the entry it repeats)", body: MemoryCreateSchema } }, async (request, reply) => {
    const { action, entry } = await runtime.memory.remember(request.body.text, request.body.kind, null);
    return reply.code(action === "insert" ? 201 : 200).send({ action, entry });
  });
  app.post("/memory/:id/pin", { schema: { summary: "Pin an entry (cleanup never removes it)", params: NumericIdParamsSchema, body: MemoryPinSchema } }, async (request) => {
    if (!runtime.memory.pin(request.params.id, request.body.pinned)) throw new DuckError(ErrorCode.TaskNotFound, `no memory entry ${request.params.id}`);
    return { id: request.params.id, pinned: request.body.pinned };
  });
  app.post("/memory/cleanup", { schema: { summary: "Decay weights and remove old, weak entries now" } }, async () => runtime.memory.cleanup());
  app.post("/memory/reindex", { schema: { summary: "Embed every entry again and rebuild the vector index" } }, async () => ({ reindexed: await runtime.memory.reindex() }));
  app.delete("/memory/:id", { schema: { summary: "Forget a memory entry", params: NumericIdParamsSchema } }, async (request) => {
    if (!runtime.memory.forget(request.params.id)) throw new DuckError(ErrorCode.TaskNotFound, `no memory entry ${request.params.id}`);
    return { deleted: request.params.id };
  });

  app.get("/approvals", { schema: { summary: "Remembered approvals" } }, async () => ({ approvals: runtime.approvals.list() }));
  app.delete("/approvals/:id", { schema: { summary: "Revoke a remembered approval", params: TaskIdParamsSchema } }, async (request) => {
    loop.revokeApproval(request.params.id, "api");
    return { revoked: request.params.id };
  });

  app.get("/openapi.json", { schema: { hide: true } }, async () => app.swagger());

  app.get("/stream/:id", { websocket: true, schema: { params: TaskIdParamsSchema, querystring: z.strictObject({ since: z.coerce.number().int().min(1).default(1) }) } }, (socket, request) => {
    const params = request.params as { id: string };
    const query = request.query as { since: number };
    if (!store.getTask(params.id)) {
      socket.close(4404, "no such task");
      return;
    }
    streamTask(socket, runtime.bus, params.id, query.since, options.stream);
  });

  return app;
}
