import type { EventPayloads } from "../contracts/index.js";
import { BlobStore } from "../storage/blob-store.js";
import { dialectOf, type SqlDatabase, type SqlStatement } from "../storage/sql-database.js";

/** A person's rating of one step, with the tool call it rated. */
export interface StepRating {
  task_id: string;
  step_id: string;
  tool: string;
  arguments: Record<string, unknown>;
  rating: "up" | "down";
  comment: string;
}

/** How many of the newest step ratings are looked through for similar ones. */
const SCANNED = 200;
/** How long ratings read from the database are used before reading again. */
const FRESH_MS = 5_000;

/**
 * People's ratings of steps (`feedback-received` events), newest first, each with the tool call it
 * rated, read from the event log so that there is one record of them. A partial index keeps the scan
 * to feedback rows only.
 */
export class StepRatings {
  private readonly newest: SqlStatement<[number]>;
  /** Ratings read lately, per tool: a critic call per step would otherwise query for each. */
  private readonly cached = new Map<string, { read: number; ratings: StepRating[] }>();

  constructor(
    db: SqlDatabase,
    private readonly blobs = new BlobStore(db),
  ) {
    const field = (column: string, name: string) => (dialectOf(db) === "postgres" ? `(${column}::jsonb ->> '${name}')` : `json_extract(${column}, '$.${name}')`);
    this.newest = db.prepare(
      `SELECT f.task_id AS task_id, f.payload AS feedback,
              (SELECT c.payload FROM events c
                WHERE c.task_id = f.task_id AND c.type = 'tool-called'
                  AND ${field("c.payload", "step_id")} = ${field("f.payload", "step_id")}
                ORDER BY c.seq DESC LIMIT 1) AS call
         FROM events f
        WHERE f.type = 'feedback-received' AND ${field("f.payload", "target")} = 'step'
        ORDER BY f.id DESC LIMIT ?`,
    );
  }

  /**
   * The newest ratings of steps that called `tool`, at most `limit`. Read again after feedback
   * recorded here (`forget`), and at least every few seconds for feedback another process recorded.
   */
  forTool(tool: string, limit: number, now = Date.now()): StepRating[] {
    const key = `${limit}|${tool}`;
    const hit = this.cached.get(key);
    if (hit && now - hit.read < FRESH_MS) return hit.ratings;
    const ratings = this.read(tool, limit);
    this.cached.set(key, { read: now, ratings });
    return ratings;
  }

  forget(): void {
    this.cached.clear();
  }

  private read(tool: string, limit: number): StepRating[] {
    const found: StepRating[] = [];
    for (const row of this.newest.all(SCANNED) as Array<{ task_id: string; feedback: string; call: string | null }>) {
      if (!row.call) continue;
      let feedback: EventPayloads["feedback-received"];
      let called: EventPayloads["tool-called"];
      try {
        feedback = this.blobs.unpack(row.feedback) as EventPayloads["feedback-received"];
        called = this.blobs.unpack(row.call) as EventPayloads["tool-called"];
      } catch {
        continue; // A damaged row is `db check`'s to report; the critic does without that rating.
      }
      if (called.call.tool !== tool) continue;
      found.push({ task_id: row.task_id, step_id: called.step_id, tool, arguments: called.call.arguments, rating: feedback.rating, comment: feedback.comment });
      if (found.length >= limit) break;
    }
    return found;
  }
}
