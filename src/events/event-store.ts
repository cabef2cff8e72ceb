import type { DuckEvent, EventTypeName } from "../contracts/index.js";
import { BlobStore } from "../storage/blob-store.js";
import type { SqlDatabase, SqlStatement } from "../storage/sql-database.js";
import { payloadJsonOf } from "./event-json.js";

interface EventRow {
  task_id: string;
  seq: number;
  type: string;
  time: string;
  payload: string;
}

/** The key a payload that could not be read back carries instead of its fields (see `toEvent`). */
export const DAMAGED_PAYLOAD = "damaged_payload";

/**
 * A stored row as an event, its long texts read back from the blob store. A payload that is not valid
 * JSON or refers to a missing blob (a damaged row) becomes a marker naming the damage, so one bad row
 * does not take a whole list down; a projection refuses it.
 */
function toEvent(row: EventRow, blobs: BlobStore): DuckEvent {
  let payload: Record<string, unknown>;
  try {
    payload = blobs.unpack(row.payload) as Record<string, unknown>;
  } catch (error) {
    const what = error instanceof SyntaxError ? "is not valid JSON" : "cannot be read";
    payload = { [DAMAGED_PAYLOAD]: `the stored payload ${what} (${(error as Error).message}); run \`ducklm db check\`` };
  }
  return { task_id: row.task_id, seq: row.seq, type: row.type as EventTypeName, time: row.time, payload };
}

/**
 * Rows per INSERT statement: a task's first commit holds about a dozen events, and one statement for
 * all of them costs about what two single-row ones do.
 */
const ROWS_PER_INSERT = 16;

/** Append-only event log. Callers wrap `insertAll` in the transaction that also changes task state. */
export class EventStore {
  /** By row count: the INSERT statement for that many events at once. */
  private readonly insertStatements = new Map<number, SqlStatement>();
  private readonly byTaskStatement: SqlStatement<[string, number, number]>;
  private readonly recentStatement: SqlStatement<[number]>;
  private readonly lastSeqStatement: SqlStatement<[string]>;

  constructor(
    private readonly db: SqlDatabase,
    private readonly blobs = new BlobStore(db),
  ) {
    this.byTaskStatement = db.prepare(
      "SELECT task_id, seq, type, time, payload FROM events WHERE task_id = ? AND seq >= ? ORDER BY seq LIMIT ?",
    );
    this.recentStatement = db.prepare(
      "SELECT task_id, seq, type, time, payload FROM (SELECT * FROM events ORDER BY id DESC LIMIT ?) AS newest ORDER BY id",
    );
    this.lastSeqStatement = db.prepare("SELECT COALESCE(MAX(seq), 0) AS seq FROM events WHERE task_id = ?");
  }

  /**
   * Stores the events in the order given (their ids follow that order). `payloadJson[i]`: the JSON
   * text of `events[i]`'s payload, when the caller already made it.
   */
  insertAll(events: readonly DuckEvent[], payloadJson: readonly string[] = []): void {
    for (let start = 0; start < events.length; start += ROWS_PER_INSERT) {
      const end = Math.min(events.length, start + ROWS_PER_INSERT);
      const values: Array<string | number> = [];
      for (let i = start; i < end; i += 1) {
        const event = events[i]!;
        values.push(event.task_id, event.seq, event.type, event.time, this.blobs.pack(event.task_id, event.payload, payloadJson[i] ?? payloadJsonOf(event)));
      }
      this.insertStatementFor(end - start).run(...values);
    }
  }

  private insertStatementFor(rows: number): SqlStatement {
    let statement = this.insertStatements.get(rows);
    if (!statement) {
      statement = this.db.prepare(`INSERT INTO events (task_id, seq, type, time, payload) VALUES ${Array.from({ length: rows }, () => "(?, ?, ?, ?, ?)").join(", ")}`);
      this.insertStatements.set(rows, statement);
    }
    return statement;
  }

  /** Stored events of one task with `seq >= fromSeq`, in order. */
  list(taskId: string, fromSeq = 1, limit = Number.MAX_SAFE_INTEGER): DuckEvent[] {
    return (this.byTaskStatement.all(taskId, fromSeq, limit) as EventRow[]).map((row) => toEvent(row, this.blobs));
  }

  /** The newest events of all tasks, oldest first. */
  recent(limit: number): DuckEvent[] {
    return (this.recentStatement.all(limit) as EventRow[]).map((row) => toEvent(row, this.blobs));
  }

  lastSeq(taskId: string): number {
    return (this.lastSeqStatement.get(taskId) as { seq: number }).seq;
  }
}
