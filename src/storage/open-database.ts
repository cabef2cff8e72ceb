import Database from "better-sqlite3";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { migrate } from "./migrations.js";

export type SqliteDatabase = Database.Database;

export interface OpenDatabaseOptions {
  /** SQLite `synchronous` in WAL mode. NORMAL survives a process crash; FULL also a power loss. Defaults to NORMAL. */
  synchronous?: "NORMAL" | "FULL";
}

/** Opens (creating if needed) the one DuckLM database file, or `:memory:`, and applies migrations. */
export function openDatabase(file: string, options: OpenDatabaseOptions = {}): SqliteDatabase {
  if (file !== ":memory:") mkdirSync(dirname(file), { recursive: true });
  let db: SqliteDatabase;
  try {
    db = new Database(file);
  } catch (error) {
    throw new DuckError(ErrorCode.StorageFailed, `cannot open database ${file}: ${(error as Error).message}`, { cause: error });
  }
  db.pragma("journal_mode = WAL");
  db.pragma(`synchronous = ${options.synchronous ?? "NORMAL"}`);
  db.pragma("foreign_keys = ON");
  db.pragma("busy_timeout = 5000");
  migrate(db);
  return db;
}
