import { DuckError, ErrorCode } from "../../errors/duck-error.js";
import type { DuckDatabase } from "../open-database.js";
import type { SqlDatabase } from "../sql-database.js";
import { PostgresDatabase } from "./postgres-database.js";
import { migratePostgres, NEWEST_POSTGRES_VERSION, schemaVersionOf } from "./postgres-schema.js";
import { PostgresError } from "./sync-postgres.js";

export interface PostgresDuckDatabase extends DuckDatabase {
  db: PostgresDatabase;
  dialect: "postgres";
}

export interface OpenPostgresOptions {
  /** Shown in pg_stat_activity, so an operator can tell DuckLM's connections apart. */
  applicationName?: string;
  timeoutMs?: number;
}

/** The folders the server keeps its Unix sockets in (empty when it does not say): hidden from commands. */
export function serverSocketDirs(db: SqlDatabase): string[] {
  if (!(db instanceof PostgresDatabase)) return [];
  try {
    const value = String(db.query({ sql: "SHOW unix_socket_directories", params: [] }).rows[0]?.unix_socket_directories ?? "");
    return value.split(",").map((dir) => dir.trim()).filter((dir) => dir.startsWith("/"));
  } catch {
    return [];
  }
}

/** A connection string without its password: what messages and /health may show. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    for (const name of ["password", "sslpassword"]) if (parsed.searchParams.has(name)) parsed.searchParams.set(name, "***");
    return parsed.toString();
  } catch {
    // postgresql://user@/db?host=/socket/dir, or key=value pairs: pg reads them, WHATWG URL does not.
    return url.replace(/(\/\/[^/:@\s]*:)[^@\s]*@/, "$1***@").replace(/(password=)\S+/gi, "$1***");
  }
}

/** What `ducklm doctor` reports of a PostgreSQL database: the server, and how far DuckLM's schema is. */
export function inspectPostgres(url: string): { location: string; serverVersion: string; schemaVersion: number; newestVersion: number } {
  const location = redactedUrl(url);
  let db: PostgresDatabase;
  try {
    db = new PostgresDatabase(url, { timeoutMs: 10_000 });
  } catch (error) {
    throw new DuckError(ErrorCode.StorageFailed, `cannot connect to PostgreSQL at ${location}: ${(error as Error).message}`, { cause: error });
  }
  try {
    const serverVersion = String(db.query({ sql: "SHOW server_version", params: [] }).rows[0]?.server_version ?? "unknown");
    const hasSchema = db.query({ sql: "SELECT to_regclass('ducklm_schema') IS NOT NULL AS present", params: [] }).rows[0]?.present === true;
    return { location, serverVersion, schemaVersion: hasSchema ? schemaVersionOf(db) : 0, newestVersion: NEWEST_POSTGRES_VERSION };
  } finally {
    db.close();
  }
}

/** Connects to the PostgreSQL database at `url` and brings its schema up to date. */
export function openPostgresDatabase(url: string, options: OpenPostgresOptions = {}): PostgresDuckDatabase {
  const location = redactedUrl(url);
  let db: PostgresDatabase;
  try {
    db = new PostgresDatabase(url, options);
  } catch (error) {
    throw new DuckError(ErrorCode.StorageFailed, `cannot connect to PostgreSQL at ${location}: ${(error as Error).message}; check that the server runs and that the connection string is right`, { cause: error });
  }
  try {
    migratePostgres(db);
  } catch (error) {
    db.close();
    const why = error instanceof PostgresError ? error.message : String((error as Error).message ?? error);
    throw new DuckError(ErrorCode.StorageFailed, `cannot bring DuckLM's tables up to date in PostgreSQL at ${location}: ${why}; the database user needs the right to create tables`, { cause: error });
  }
  return { db, dialect: "postgres", location, close: () => db.close() };
}
