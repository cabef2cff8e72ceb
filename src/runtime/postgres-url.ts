import type { DuckConfig } from "../config/config-schemas.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";

/** The PostgreSQL connection string runtime.json points to, or a clear error when it is not set. */
export function postgresUrlOf(config: DuckConfig, env: NodeJS.ProcessEnv): string {
  const variable = config.runtime.storage.postgres_url_env;
  const url = env[variable]?.trim();
  if (!url) {
    throw new DuckError(
      ErrorCode.ConfigInvalid,
      `runtime.json sets storage.backend to "postgres", but ${variable} is not set: export ${variable}=postgresql://user:password@host:5432/database (or name another variable in storage.postgres_url_env)`,
    );
  }
  return url;
}

/** Where PostgreSQL puts its local sockets on Debian and most distributions. */
const DEFAULT_SOCKET_DIRS = ["/run/postgresql", "/var/run/postgresql"];

/**
 * The folders where DuckLM's PostgreSQL server may listen on a Unix socket: the one the connection
 * string (or PGHOST) names, and the usual ones. A local server trusts a socket peer of the same user,
 * so a shell command that reached one could write approvals straight into DuckLM's tables: these are
 * hidden from commands, as the SQLite file is.
 */
export function postgresSocketDirs(url: string, env: NodeJS.ProcessEnv): string[] {
  const dirs = new Set(DEFAULT_SOCKET_DIRS);
  const named: Array<string | null | undefined> = [env.PGHOST];
  try {
    const parsed = new URL(url);
    named.push(parsed.searchParams.get("host"), decodeURIComponent(parsed.hostname));
  } catch {
    // Not a WHATWG URL (postgresql://user@/db?host=/path, or key=value pairs), which pg reads all the same.
    const host = /[?&]host=([^&\s]+)/.exec(url)?.[1] ?? /(?:^|\s)host=(\S+)/.exec(url)?.[1];
    if (host) named.push(decodeURIComponent(host));
  }
  for (const host of named) if (host?.startsWith("/")) dirs.add(host);
  return [...dirs];
}
