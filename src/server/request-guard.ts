import { hostname } from "node:os";
import type { FastifyReply, FastifyRequest } from "fastify";
import { ErrorCode, type ErrorCodeName } from "../errors/duck-error.js";
import { tokensEqual } from "./install-token.js";

/** The browser's session cookie, set only by visiting a one-time login link. */
export const SESSION_COOKIE = "ducklm_session";

export interface GuardOptions {
  token: string;
  port: number;
  /** Extra host names accepted in the Host header (when serving beyond loopback). */
  extraHosts: readonly string[];
  /** Paths served without a token or session (the page, its assets, the login page, /health). */
  publicPaths: (path: string) => boolean;
  /** Whether a session cookie's value is a live session. */
  checkSession: (session: string) => boolean;
}

/** What a request proves about who sent it. */
export type Caller = "token" | "session" | null;

/** The caller of a request the guard let through: the install token (CLI, scripts) or a browser session. */
export function callerOf(request: FastifyRequest, options: Pick<GuardOptions, "token" | "checkSession">): Caller {
  const authorization = request.headers.authorization;
  if (authorization?.startsWith("Bearer ")) return tokensEqual(authorization.slice(7).trim(), options.token) ? "token" : null;
  const session = cookieValue(request.headers.cookie, SESSION_COOKIE);
  return session && options.checkSession(session) ? "session" : null;
}

const LOOPBACK_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]", "::1"]);
const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** `host[:port]` → the host part, or null when the header is missing, empty or malformed. */
export function hostOf(header: string | undefined): { host: string; port: string | null } | null {
  if (!header) return null;
  const match = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?::(\d{1,5}))?$/.exec(header.trim());
  if (!match || !match[1]) return null;
  return { host: match[1].toLowerCase(), port: match[2] ?? null };
}

export function cookieValue(header: string | undefined, name: string): string | null {
  if (!header) return null;
  for (const part of header.split(";")) {
    const [key, ...rest] = part.trim().split("=");
    if (key === name) return rest.join("=");
  }
  return null;
}

function refuse(reply: FastifyReply, status: number, code: ErrorCodeName, message: string): FastifyReply {
  // A refused WebSocket upgrade must not leave its socket open: close the connection after the answer.
  reply.raw.once("finish", () => reply.request.raw.socket?.end());
  return reply.code(status).header("cache-control", "no-store").header("connection", "close").send({ error: { code, message } });
}

/**
 * Every request and WebSocket upgrade passes here first: one Host header, naming this machine (DNS
 * rebinding); a state-changing request or upgrade from a browser must come from this origin; and
 * everything but the page itself needs the install token (Authorization: Bearer) or a browser
 * session (an HttpOnly SameSite=Strict cookie that only a one-time login link sets; never a query string).
 */
export function createRequestGuard(options: GuardOptions) {
  const allowedHosts = new Set([...LOOPBACK_HOSTS, ...options.extraHosts.map((host) => host.toLowerCase())]);
  const machine = hostname().toLowerCase();
  const hostAllowed = (host: string) => allowedHosts.has(host) || host === machine || (host.endsWith(".localhost") && /^[a-z0-9-]+\.localhost$/.test(host));
  return async function guard(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const raw = request.raw;
    if (!raw.url || !raw.url.startsWith("/")) {
      await refuse(reply, 403, ErrorCode.ForbiddenHost, "absolute-form request targets are not accepted");
      return;
    }
    let hostHeaders = 0;
    for (let i = 0; i < raw.rawHeaders.length; i += 2) if (raw.rawHeaders[i]!.toLowerCase() === "host") hostHeaders += 1;
    if (hostHeaders > 1) {
      await refuse(reply, 400, ErrorCode.ForbiddenHost, "a request may carry one Host header, not several");
      return;
    }
    const host = hostOf(request.headers.host);
    if (!host || !hostAllowed(host.host) || (host.port !== null && Number(host.port) !== options.port)) {
      await refuse(reply, 403, ErrorCode.ForbiddenHost, "this server answers only requests addressed to it by a local name (Host header refused)");
      return;
    }
    const upgrade = (request.headers.upgrade ?? "").toLowerCase() === "websocket";
    const origin = request.headers.origin;
    if (origin !== undefined && (!SAFE_METHODS.has(request.method) || upgrade)) {
      let allowed: boolean;
      try {
        const parsed = new URL(origin);
        const originHost = hostOf(parsed.host);
        allowed = (parsed.protocol === "http:" || parsed.protocol === "https:") && originHost !== null && hostAllowed(originHost.host) && Number(parsed.port || (parsed.protocol === "https:" ? 443 : 80)) === options.port;
      } catch {
        allowed = false;
      }
      if (!allowed) {
        await refuse(reply, 403, ErrorCode.ForbiddenOrigin, `requests from ${origin} are not accepted`);
        return;
      }
    }
    const path = raw.url.split("?")[0] ?? "/";
    if (options.publicPaths(path) && SAFE_METHODS.has(request.method) && !upgrade) return;
    const authorization = request.headers.authorization;
    if (authorization?.startsWith("Bearer ")) {
      if (!tokensEqual(authorization.slice(7).trim(), options.token)) await refuse(reply, 401, ErrorCode.Unauthorized, "the token is wrong");
      return;
    }
    const session = cookieValue(request.headers.cookie, SESSION_COOKIE);
    if (session && options.checkSession(session)) return;
    // A person opening the API docs in a browser is sent to log in, not shown an error.
    if (request.method === "GET" && !upgrade && (path === "/docs" || path.startsWith("/docs/"))) {
      await reply.code(302).header("location", "/login").header("cache-control", "no-store").send();
      return;
    }
    await refuse(
      reply,
      401,
      ErrorCode.Unauthorized,
      session
        ? "this browser's session has ended: run `ducklm login` and open the link it prints"
        : "log in first: open the link `ducklm serve` printed (or run `ducklm login` for a new one), or send Authorization: Bearer <token> (the token is in <home>/token)",
    );
  };
}
