import { DuckError, ErrorCode } from "../../errors/duck-error.js";
import { openDatabase } from "../open-database.js";
import { openPostgresDatabase } from "./open-postgres.js";

/** What `ducklm migrate --to postgres` copied, table by table (rows in PostgreSQL afterwards). */
export interface CopyReport {
  from: string;
  to: string;
  rows: Record<string, number>;
}

/**
 * The tables copied, parents before the rows that refer to them. Task leases are not: they name
 * processes of the old home, and every task is free for the next process to drive.
 */
const TABLES = ["tasks", "events", "checkpoints", "blobs", "blob_refs", "memories", "approvals", "web_logins"] as const;
/** Rows sent before the copy waits for the server to take them, so a large home is not held in memory at once. */
const ROWS_PER_ROUND_TRIP = 500;

/**
 * Copies a SQLite home's database into an empty PostgreSQL database, in one transaction: all of it
 * or none. Refuses while a process on the home still drives tasks (their next events would land in
 * the old file only) and when the target already holds DuckLM data. Ids are kept, so event order,
 * memory ids and references stay as they were; the counts are checked at the end.
 */
export function copyToPostgres(sqliteFile: string, url: string, now: Date = new Date()): CopyReport {
  const source = openDatabase(sqliteFile);
  try {
    const live = source.db.prepare("SELECT COUNT(*) AS n FROM task_leases WHERE expires_at > ?").get(now.toISOString()) as { n: number };
    if (live.n > 0) {
      throw new DuckError(ErrorCode.InvalidInput, `a DuckLM process on this home is running ${live.n} task(s): stop it (ducklm serve, ducklm run) and migrate again, so that nothing is written to ${sqliteFile} after the copy`);
    }
    const target = openPostgresDatabase(url, { applicationName: "ducklm migrate" });
    // One read transaction on the source: every table is copied as of the same moment.
    source.db.prepare("BEGIN").run();
    try {
      const held = target.db.query({ sql: "SELECT (SELECT COUNT(*) FROM tasks) + (SELECT COUNT(*) FROM memories) + (SELECT COUNT(*) FROM approvals) AS n", params: [] }).rows[0]!.n as number;
      if (held > 0) throw new DuckError(ErrorCode.InvalidInput, `${target.location} already holds DuckLM data (${held} tasks, memories and approvals): migrate into an empty database`);
      const rows: Record<string, number> = {};
      target.db.transaction(() => {
        for (const table of TABLES) {
          // The target's columns: the source has the same ones (the schemas match), except what PostgreSQL computes itself.
          const columns = target.db
            .query({ sql: "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND is_generated = 'NEVER' ORDER BY ordinal_position", params: [table] })
            .rows.map((row) => String(row.column_name));
          const insert = target.db.prepare(`INSERT INTO ${table} (${columns.join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`);
          let copied = 0;
          for (const row of source.db.prepare(`SELECT ${columns.join(", ")} FROM ${table}`).raw().iterate() as IterableIterator<unknown[]>) {
            insert.run(...row);
            copied += 1;
            if (copied % ROWS_PER_ROUND_TRIP === 0) target.db.query({ sql: "SELECT 1", params: [] });
          }
          rows[table] = copied;
        }
        // New rows continue after the copied ids.
        for (const table of ["events", "memories"]) {
          target.db.query({ sql: `SELECT setval(pg_get_serial_sequence('${table}', 'id'), GREATEST(COALESCE(MAX(id), 0), 1), MAX(id) IS NOT NULL) FROM ${table}`, params: [] });
        }
        for (const table of TABLES) {
          const stored = target.db.query({ sql: `SELECT COUNT(*) AS n FROM ${table}`, params: [] }).rows[0]!.n as number;
          if (stored !== rows[table]) throw new DuckError(ErrorCode.StorageFailed, `copying ${table} went wrong: ${rows[table]} rows read, ${stored} in PostgreSQL; nothing was kept`);
        }
      })();
      return { from: sqliteFile, to: target.location, rows };
    } finally {
      source.db.prepare("ROLLBACK").run();
      target.close();
    }
  } finally {
    source.close();
  }
}
