import Database from "better-sqlite3";
import { dirname } from "node:path";
import { DuckError, ErrorCode, storageErrorOf } from "../errors/duck-error.js";
import { migrate } from "./migrations.js";
import { dialectOf, type SqlDatabase, type SqlDialect } from "./sql-database.js";
import { startWalCheckpointer } from "./wal-checkpointer.js";
import { ensurePrivateDir, ensurePrivateFile, makePrivate } from "./private-files.js";

export type SqliteDatabase = Database.Database;

export interface OpenDatabaseOptions {
  /** SQLite `synchronous` in WAL mode. NORMAL survives a process crash; FULL also a power loss. Defaults to NORMAL. */
  synchronous?: "NORMAL" | "FULL";
  /**
   * How often the WAL is copied back into the database file, in ms. Defaults to 1000. Checkpoints run
   * on a worker thread at this interval instead of inside commits (see
   * docs/decisions/0003-group-commit-and-wal-checkpoints.md and wal-checkpointer.ts).
   */
  checkpointIntervalMs?: number;
  /**
   * WAL size, in pages, past which the committing connection checkpoints inside its commit: the
   * backstop for a process so busy that the timer does not get its turn. Defaults to WAL_BACKSTOP_PAGES.
   */
  walBackstopPages?: number;
}

/** 16,384 pages of 4 KiB: the WAL stays under about 64 MiB however busy the process. */
export const WAL_BACKSTOP_PAGES = 16_384;

/** The database the stores are on, whichever backend holds it. */
export interface DuckDatabase {
  db: SqlDatabase;
  dialect: SqlDialect;
  /** Where it is, for messages and /health: a file path, or a PostgreSQL server without its password. */
  location: string;
  close(): void;
}

export interface SqliteDuckDatabase extends DuckDatabase {
  db: SqliteDatabase;
  dialect: "sqlite";
  /** Stops the checkpoint timer, folds the WAL back into the file and closes the connection. */
  close(): void;
}

/** The SQLite connection under `db`, for what only SQLite has (pragmas, integrity checks, repair). */
export function sqliteOf(db: SqlDatabase): SqliteDatabase {
  if (dialectOf(db) !== "sqlite") throw new DuckError(ErrorCode.InvalidInput, "this needs DuckLM's SQLite database; the configured store is PostgreSQL");
  return db as SqliteDatabase;
}

/** Opens (creating if needed) the one DuckLM database file, or `:memory:`, and applies migrations. */
export function openDatabase(file: string, options: OpenDatabaseOptions = {}): SqliteDuckDatabase {
  let db: SqliteDatabase;
  try {
    if (file !== ":memory:") {
      ensurePrivateDir(dirname(file));
      // SQLite gives the WAL and shared-memory files the database file's mode: 0600 for all three.
      ensurePrivateFile(file);
    }
    db = new Database(file);
  } catch (error) {
    // The home's own check already says what is wrong with the folder and what to do.
    if (error instanceof DuckError) throw error;
    throw storageErrorOf(error, file) ?? new DuckError(ErrorCode.StorageFailed, `cannot open database ${file}: ${(error as Error).message}; check that its folder exists and is writable, or choose another home with --home`, { cause: error });
  }
  try {
    db.pragma("journal_mode = WAL");
    db.pragma(`synchronous = ${options.synchronous ?? "NORMAL"}`);
    db.pragma("foreign_keys = ON");
    db.pragma("busy_timeout = 5000");
    // A checkpoint inside a commit stalls that commit on fsync, so the timer below does that work off
    // the path; SQLite's own size trigger stays as the backstop, set far above what a second writes.
    const backstopPages = options.walBackstopPages ?? WAL_BACKSTOP_PAGES;
    db.pragma(`wal_autocheckpoint = ${backstopPages}`);
    // Once checkpointed, a WAL that grew past the backstop is cut back to it rather than kept at its peak.
    db.pragma(`journal_size_limit = ${backstopPages * 4096}`);
    migrate(db);
  } catch (error) {
    db.close();
    // "file is not a database", "database disk image is malformed", a read-only file: said with the file and what to do.
    throw storageErrorOf(error, file) ?? error;
  }
  if (file !== ":memory:") for (const suffix of ["-wal", "-shm"]) makePrivate(`${file}${suffix}`);
  // An in-memory database has no WAL to copy back.
  const checkpointer = file === ":memory:" ? null : startWalCheckpointer(db, file, options.checkpointIntervalMs ?? 1_000);
  return {
    db,
    dialect: "sqlite",
    location: file,
    close() {
      checkpointer?.stop();
      if (!db.open) return;
      try {
        db.pragma("wal_checkpoint(TRUNCATE)");
      } catch {
        // Another connection still reads; its own close will fold the WAL back.
      }
      db.close();
    },
  };
}

