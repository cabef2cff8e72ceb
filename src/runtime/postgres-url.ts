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
