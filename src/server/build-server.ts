import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import fastifyWebsocket from "@fastify/websocket";
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance } from "fastify";
import type { Logger } from "pino";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { documentOnFirstVisit, ZOD_COMPILERS } from "./api-docs.js";
import { DuckError, ErrorCode, storageErrorOf } from "../errors/duck-error.js";
import type { DuckLM } from "../runtime/ducklm.js";
import type { StreamOptions } from "./event-stream.js";
import { createRequestGuard } from "./request-guard.js";
import { answerRoutes } from "./routes/answer-routes.js";
import { memoryRoutes } from "./routes/memory-routes.js";
import { pageRoutes, VENDOR_MODULES, WEB_ASSETS } from "./routes/page-routes.js";
import { statusRoutes } from "./routes/status-routes.js";
import { taskRoutes } from "./routes/task-routes.js";

export const WEB_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../web");

export interface ServerOptions {
  ducklm: DuckLM;
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
  /** Where each request and its response go (at info), with login codes and tokens left out. */
  requestLog?: Logger;
}

/**
 * A request as the log shows it: method, path and caller. Login codes and anything named like a
 * token in the query are blanked; headers (the bearer token, the session cookie) are not logged.
 */
export function requestForLog(request: { method: string; url: string; ip?: string }): Record<string, unknown> {
  return { method: request.method, url: request.url.replace(/([?&](?:code|token|access_token|secret)=)[^&#]*/gi, "$1[hidden]"), remote: request.ip };
}

/** zod's wording of a value of the wrong kind, as a person would say it ("a number, not abc"). */
function plainIssue(message: string | undefined): string {
  if (!message) return "invalid";
  const kind = /^Invalid input: expected (\w+), received (\w+)$/.exec(message);
  if (!kind) return message;
  const [, expected, received] = kind;
  return received === "NaN" ? "must be a number" : `must be ${/^[aeiou]/.test(expected!) ? "an" : "a"} ${expected}, not ${/^[aeiou]/.test(received!) ? "an" : "a"} ${received}`;
}

const PUBLIC_PATHS = new Set(["/", "/index.html", "/health", "/login", "/session", ...WEB_ASSETS.map((asset) => `/${asset}`), ...Object.keys(VENDOR_MODULES).map((name) => `/vendor/${name}`)]);

function badUtf8(buffer: Buffer): boolean {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(buffer);
    return false;
  } catch {
    return true;
  }
}

/**
 * The HTTP API, the WebSocket stream and the web chat over the DuckLM API, secured by the request
 * guard; each group of routes is a Fastify plugin in `routes/`. Does not listen.
 */
export async function buildServer(options: ServerOptions): Promise<FastifyInstance> {
  const { ducklm } = options;
  // A busy machine (a model loading, tests in parallel) can take longer than Fastify's 10 s to load
  // the documentation plugins; starting slowly beats not starting.
  const app = Fastify({
    ...(options.requestLog ? { loggerInstance: options.requestLog.child({}, { serializers: { req: requestForLog } }) as FastifyBaseLogger } : { logger: options.logger ?? false }),
    bodyLimit: options.bodyLimit ?? 1024 * 1024,
    return503OnClosing: true,
    forceCloseConnections: true,
    pluginTimeout: 120_000,
    // Every route validates and serialises with zod. Named as the defaults (not set afterwards), they
    // spare Fastify from loading its own compilers (ajv, its formats, fast-json-stringify: about 240 modules) at start.
    schemaController: { compilersFactory: ZOD_COMPILERS },
  }).withTypeProvider<ZodTypeProvider>();

  // Bodies are JSON in valid UTF-8, or they are refused before anything parses them.
  app.removeContentTypeParser(["application/json", "text/plain"]);
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, (_request, body: Buffer, done) => {
    if (badUtf8(body)) return done(new DuckError(ErrorCode.InvalidInput, "the body is not valid UTF-8"), undefined);
    if (body.length === 0) return done(null, {});
    try {
      done(null, JSON.parse(body.toString("utf8")));
    } catch {
      done(new DuckError(ErrorCode.InvalidInput, "the body is not valid JSON"), undefined);
    }
  });

  app.setErrorHandler((raw: FastifyError | DuckError, request, reply) => {
    const error = storageErrorOf(raw) ?? raw;
    if (DuckError.isInstance(error)) {
      if (error.status >= 500) ducklm.logger.error({ err: error }, "request failed");
      const retryAfter = (error.details as { retry_after_s?: unknown } | undefined)?.retry_after_s;
      if ((error.status === 429 || error.status === 503) && typeof retryAfter === "number") void reply.header("retry-after", String(retryAfter));
      void reply.code(error.status).send({ error: { code: error.code, message: error.message } });
      return;
    }
    const fastifyError = error as FastifyError;
    if (fastifyError.validation) {
      const message = fastifyError.validation.map((issue) => `${issue.instancePath?.replace(/^\//, "").replace(/\//g, ".") || fastifyError.validationContext || "input"}: ${plainIssue(issue.message)}`).join("; ");
      void reply.code(400).send({ error: { code: ErrorCode.InvalidInput, message } });
      return;
    }
    const status = fastifyError.statusCode && fastifyError.statusCode >= 400 && fastifyError.statusCode < 600 ? fastifyError.statusCode : 500;
    if (status >= 500) ducklm.logger.error({ err: error }, "request failed");
    const code = status === 413 ? ErrorCode.BodyTooLarge : status === 415 ? ErrorCode.UnsupportedMediaType : status < 500 ? ErrorCode.InvalidInput : ErrorCode.Internal;
    // Fastify's own words for a body it takes no parser for say nothing of what it does take.
    const message = status === 415 ? `a body of type ${String(request.headers["content-type"] ?? "(none)").split(";")[0]} is not taken: send JSON with content-type: application/json` : status < 500 ? fastifyError.message : "internal error; see the log";
    void reply.code(status).send({ error: { code, message } });
  });
  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send({ error: { code: ErrorCode.RouteNotFound, message: `no route ${request.method} ${request.url.split("?")[0]}` } });
  });

  app.addHook("onRequest", createRequestGuard({ token: options.token, port: options.port, extraHosts: options.extraHosts ?? [], publicPaths: (path) => PUBLIC_PATHS.has(path), checkSession: (session) => ducklm.logins.checkSession(session) }));
  app.addHook("onSend", async (_request, reply, payload) => {
    reply.header("x-content-type-options", "nosniff");
    reply.header("referrer-policy", "no-referrer");
    return payload;
  });

  documentOnFirstVisit(app);
  await app.register(fastifyWebsocket, { options: { maxPayload: 64 * 1024 } });

  const routeOptions = { ducklm, token: options.token, ...(options.stream ? { stream: options.stream } : {}) };
  await app.register(pageRoutes, { ...routeOptions, webRoot: WEB_ROOT });
  await app.register(taskRoutes, routeOptions);
  await app.register(answerRoutes, routeOptions);
  await app.register(memoryRoutes, routeOptions);
  await app.register(statusRoutes, routeOptions);
  return app;
}
