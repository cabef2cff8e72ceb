import type { FastifyReply, FastifyRequest } from "fastify";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { ErrorCode } from "../../errors/duck-error.js";
import { readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { loginPage } from "../login-page.js";
import { callerOf, cookieValue, SESSION_COOKIE } from "../request-guard.js";
import type { RouteOptions } from "./route-options.js";

export const WEB_ASSETS = ["app.js", "answer-stream.js", "markdown.js", "style.css", "favicon.svg"];

/** The page's libraries, served from the installed packages (ES modules as they ship). */
export const VENDOR_MODULES: Record<string, string> = {
  "marked.js": "marked",
  "purify.js": "dompurify",
  "highlight.js": "@highlightjs/cdn-assets/es/highlight.min.js",
};
const PAGE_CSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'";

const loadSender = () => import("@fastify/send");
let sender: ReturnType<typeof loadSender> | null = null;

/**
 * One of the page's files, with what a browser needs to cache it (ETag, Last-Modified, 304s and
 * ranges, from @fastify/send, loaded with the first file asked for rather than at start).
 */
async function sendPageFile(request: FastifyRequest, reply: FastifyReply, root: string, file: string, cacheControl?: string): Promise<FastifyReply> {
  const { default: send } = await (sender ??= loadSender());
  const sent = await send(request.raw, file, { root, dotfiles: "deny" });
  if (sent.type === "error") {
    const { code, message } =
      sent.statusCode === 404
        ? { code: ErrorCode.RouteNotFound, message: `no file ${file}` }
        : sent.statusCode < 500
          ? { code: ErrorCode.InvalidInput, message: `${file} cannot be sent as asked (${sent.statusCode}); ask without a Range or conditional header` }
          : { code: ErrorCode.Internal, message: "the file could not be read" };
    return reply.code(sent.statusCode).send({ error: { code, message } });
  }
  void reply.code(sent.statusCode).headers(sent.headers);
  if (cacheControl) void reply.header("cache-control", cacheControl);
  return reply.send(sent.stream);
}

/**
 * The chat page and its assets (public: they hold nothing secret), and logging in: a one-time link
 * (printed by `ducklm serve` and `ducklm login`) becomes an HttpOnly session cookie; the redirect drops
 * the code from the address bar. The install token never reaches a browser.
 */
export const pageRoutes: FastifyPluginAsyncZod<RouteOptions & { webRoot: string }> = async (app, { ducklm, token, webRoot }) => {
  const checkSession = (session: string) => ducklm.logins.checkSession(session);
  app.get("/", { schema: { hide: true } }, async (_request, reply) => {
    reply.header("content-security-policy", PAGE_CSP).header("cache-control", "no-store");
    return reply.type("text/html; charset=utf-8").send(readFileSync(join(webRoot, "index.html")));
  });
  for (const asset of WEB_ASSETS) app.get(`/${asset}`, { schema: { hide: true } }, async (request, reply) => sendPageFile(request, reply, webRoot, asset));
  for (const [name, specifier] of Object.entries(VENDOR_MODULES)) {
    const file = fileURLToPath(import.meta.resolve(specifier));
    // The libraries change only with an install: a day in the browser's cache.
    app.get(`/vendor/${name}`, { schema: { hide: true } }, async (request, reply) => sendPageFile(request, reply, dirname(file), basename(file), "public, max-age=86400"));
  }

  app.get("/login", { schema: { hide: true, querystring: z.strictObject({ code: z.string().max(200).optional() }) } }, async (request, reply) => {
    reply.header("content-security-policy", PAGE_CSP).header("cache-control", "no-store").header("referrer-policy", "no-referrer");
    const code = request.query.code;
    if (code) {
      const session = ducklm.logins.redeemCode(code);
      if (session) {
        reply.header("set-cookie", `${SESSION_COOKIE}=${session}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${30 * 24 * 3600}`);
        return reply.code(303).header("location", "/").send();
      }
      return reply.code(401).type("text/html; charset=utf-8").send(loginPage("This login link has been used or has expired."));
    }
    return reply.type("text/html; charset=utf-8").send(loginPage(null));
  });
  app.get("/session", { schema: { summary: "Whether this client is logged in (a browser session or the install token)" } }, async (request) => {
    const caller = callerOf(request, { token, checkSession });
    return { authenticated: caller !== null, via: caller };
  });
  app.post("/logout", { schema: { summary: "End this browser's session" } }, async (request, reply) => {
    const session = cookieValue(request.headers.cookie, SESSION_COOKIE);
    if (session) ducklm.logins.endSession(session);
    reply.header("set-cookie", `${SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0`);
    return { logged_out: true };
  });
};
