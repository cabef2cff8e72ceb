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
 * What of DuckLM's PostgreSQL connection a shell command must not reach: the folders where its server
 * may listen on a Unix socket (the one the connection string or PGHOST names, the ones the server
 * says it uses, and the usual ones) and the files pg reads credentials from (the password file, TLS
 * keys). A local server trusts a socket peer of the same user, so a command that reached one could
 * write approvals straight into DuckLM's tables: these are hidden from commands, as the SQLite file is.
 */
export function postgresPrivatePaths(url: string, env: NodeJS.ProcessEnv, serverSocketDirs: readonly string[] = []): string[] {
  const paths = new Set([...DEFAULT_SOCKET_DIRS, ...serverSocketDirs]);
  const named: Array<string | null | undefined> = [env.PGHOST, env.PGPASSFILE, env.PGSSLKEY, env.PGSSLCERT, env.PGSSLROOTCERT];
  if (env.HOME) named.push(`${env.HOME}/.pgpass`);
  const parameters = ["host", "sslkey", "sslcert", "sslrootcert", "passfile"];
  if (url.startsWith("/")) {
    // "/socket/dir database": pg reads a string that starts with a slash as a socket folder.
    named.push(url.split(/\s+/)[0]);
  } else if (url.startsWith("socket:")) {
    named.push(decodeURIComponent(url.slice("socket:".length).replace(/^\/\/[^/]*/, "").split("?")[0] ?? ""));
  }
  try {
    const parsed = new URL(url);
    named.push(decodeURIComponent(parsed.hostname), ...parameters.map((name) => parsed.searchParams.get(name)));
  } catch {
    // Not a WHATWG URL (postgresql://user@/db?host=/path, or key=value pairs), which pg reads all the same.
    for (const name of parameters) {
      const value = new RegExp(`[?&]${name}=([^&\\s]+)`).exec(url)?.[1] ?? new RegExp(`(?:^|\\s)${name}=(\\S+)`).exec(url)?.[1];
      if (value) named.push(decodeURIComponent(value));
    }
  }
  for (const path of named) if (path?.startsWith("/")) paths.add(path);
  return [...paths];
}
