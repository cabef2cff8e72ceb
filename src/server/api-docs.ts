import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions, type RouteOptions } from "fastify";
import { jsonSchemaTransform, serializerCompiler, validatorCompiler } from "fastify-type-provider-zod";
import type { OpenAPIV3 } from "openapi-types";
import { ErrorCode } from "../errors/duck-error.js";

/** The zod compilers as Fastify's compiler factories (whose types speak of JSON Schema, not zod). */
export const ZOD_COMPILERS = { buildValidator: () => validatorCompiler, buildSerializer: () => serializerCompiler } as unknown as NonNullable<FastifyServerOptions["schemaController"]>["compilersFactory"];

const API_INFO = {
  title: "DuckLM API",
  version: "0.1.0",
  description: "Local agent runtime. Every route but the page, /login, /session and /health needs the install token or a browser session.",
};

/** Headers of an inner answer that the outer reply sets itself. */
const HOP_HEADERS = new Set(["content-length", "connection", "date", "transfer-encoding", "keep-alive"]);

function notFound(request: FastifyRequest, reply: FastifyReply): void {
  void reply.code(404).send({ error: { code: ErrorCode.RouteNotFound, message: `no route ${request.method} ${request.url.split("?")[0]}` } });
}

/**
 * The OpenAPI document (`/openapi.json`) and its pages (`/docs`), made when first asked for. The
 * generator, the UI and the YAML library they load (some 120 modules) are not needed to start, and
 * most servers never show their documentation. The app's routes are noted as they are added (call
 * this before registering them); at the first request they are declared again, schemas and all, on
 * an inner Fastify app with @fastify/swagger, whose document is the one shown, and the UI runs on
 * a second inner app. Both answer through the main app's routes, behind the same request guard.
 */
export function documentOnFirstVisit(app: FastifyInstance): void {
  const routes: RouteOptions[] = [];
  app.addHook("onRoute", (route) => {
    // Hidden routes are not in the document, and HEAD routes are Fastify's copies of GET ones.
    if ((route.schema as { hide?: boolean } | undefined)?.hide || route.method === "HEAD") return;
    routes.push(route);
  });

  let document: Promise<OpenAPIV3.Document> | null = null;
  const documented = () =>
    (document ??= (async () => {
      const { default: swagger } = await import("@fastify/swagger");
      const inner = Fastify({ logger: false, schemaController: { compilersFactory: ZOD_COMPILERS } });
      await inner.register(swagger, { openapi: { info: API_INFO }, transform: jsonSchemaTransform });
      await inner.register(async (scope) => {
        for (const route of routes) scope.route({ method: route.method, url: route.url, ...(route.schema ? { schema: route.schema } : {}), handler: async () => null });
      });
      await inner.ready();
      // OpenAPI 3.1, generated from the routes; the static mode below names its type 3.0.
      return inner.swagger() as OpenAPIV3.Document;
    })().catch((error: unknown) => {
      document = null;
      throw error;
    }));

  let pages: Promise<FastifyInstance> | null = null;
  const paged = () =>
    (pages ??= (async () => {
      const [{ default: swagger }, { default: swaggerUi }] = await Promise.all([import("@fastify/swagger"), import("@fastify/swagger-ui")]);
      const inner = Fastify({ logger: false });
      inner.setNotFoundHandler(notFound);
      await inner.register(swagger, { mode: "static", specification: { document: await documented() } });
      await inner.register(swaggerUi, { routePrefix: "/docs" });
      await inner.ready();
      return inner;
    })().catch((error: unknown) => {
      pages = null;
      throw error;
    }));

  app.get("/openapi.json", { schema: { hide: true } }, async () => documented());
  const page = async (request: FastifyRequest, reply: FastifyReply) => {
    const response = await (await paged()).inject({ method: request.method as "GET" | "HEAD", url: request.url, headers: { accept: request.headers.accept ?? "*/*" } });
    for (const [name, value] of Object.entries(response.headers)) {
      if (value !== undefined && !HOP_HEADERS.has(name)) void reply.header(name, value);
    }
    return reply.code(response.statusCode).send(response.rawPayload);
  };
  for (const url of ["/docs", "/docs/*"]) app.route({ method: ["GET", "HEAD"], url, schema: { hide: true }, handler: page });
}
