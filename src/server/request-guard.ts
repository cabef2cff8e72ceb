import { hostname } from "node:os";
import type { FastifyReply, FastifyRequest } from "fastify";
import { tokensEqual } from "./install-token.js";

export const TOKEN_COOKIE = "ducklm_token";

export interface GuardOptions {
  token: string;
  port: number;
  /** Extra host names accepted in the Host header (when serving beyond loopback). */
  extraHosts: readonly string[];
  /** Paths served without a token (the page that hands out the cookie, its assets, /health). */
  publicPaths: (path: string) => boolean;
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

function cookieValue(header: string | undefined, name: string): string | null {
  if (!header) return null;
  for (const part of header.split(";")) {
    const [key, ...rest] = part.trim().split("=");
    if (key === name) return rest.join("=");
  }
  return null;
}

function refuse(reply: FastifyReply, status: number, code: string, message: string): FastifyReply {
  // A refused WebSocket upgrade must not leave its socket open: close the connection after the answer.
  reply.raw.once("finish", () => reply.request.raw.socket?.end());
  return reply.code(status).header("cache-control", "no-store").header("connection", "close").send({ error: { code, message } });
}

/**
 * Every request and WebSocket upgrade passes here first: the Host must be this machine (DNS
 * rebinding), a state-changing request or upgrade from a browser must come from this origin, and
 * everything but the page itself needs the install token (Authorization: Bearer, or the page's
 * HttpOnly SameSite=Strict cookie; never a query string).
 */
export function createRequestGuard(options: GuardOptions) {
  const allowedHosts = new Set([...LOOPBACK_HOSTS, ...options.extraHosts.map((host) => host.toLowerCase())]);
  const machine = hostname().toLowerCase();
  const hostAllowed = (host: string) => allowedHosts.has(host) || host === machine || (host.endsWith(".localhost") && /^[a-z0-9-]+\.localhost$/.test(host));
  return async function guard(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const raw = request.raw;
    if (!raw.url || !raw.url.startsWith("/")) {
      await refuse(reply, 403, "DUCK_ERR_FORBIDDEN_HOST", "absolute-form request targets are not accepted");
      return;
    }
    const host = hostOf(request.headers.host);
    if (!host || !hostAllowed(host.host) || (host.port !== null && Number(host.port) !== options.port)) {
      await refuse(reply, 403, "DUCK_ERR_FORBIDDEN_HOST", "this server answers only requests addressed to it by a local name (Host header refused)");
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
        await refuse(reply, 403, "DUCK_ERR_FORBIDDEN_ORIGIN", `requests from ${origin} are not accepted`);
        return;
      }
    }
    const path = raw.url.split("?")[0] ?? "/";
    if (options.publicPaths(path) && SAFE_METHODS.has(request.method) && !upgrade) return;
    const authorization = request.headers.authorization;
    const offered = authorization?.startsWith("Bearer ") ? authorization.slice(7).trim() : cookieValue(request.headers.cookie, TOKEN_COOKIE);
    if (!offered) {
      await refuse(reply, 401, "DUCK_ERR_UNAUTHORIZED", "a token is required: open the page DuckLM prints at start, or send Authorization: Bearer <token> (the token is in <home>/token)");
      return;
    }
    if (!tokensEqual(offered, options.token)) {
      await refuse(reply, 401, "DUCK_ERR_UNAUTHORIZED", "the token is wrong");
      return;
    }
  };
}
