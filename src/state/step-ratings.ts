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
  private readonly callsOf: SqlStatement<[unknown]>;
  private readonly dialect: "sqlite" | "postgres";
  /** Ratings read lately, per tool: a critic call per step would otherwise query for each. */
  private readonly cached = new Map<string, { read: number; ratings: StepRating[] }>();

  constructor(
    db: SqlDatabase,
    private readonly blobs = new BlobStore(db),
  ) {
    // The JSON is read here, not by the database: PostgreSQL's jsonb refuses the \u0000 that stored
    // payloads may hold (a long text's reference, a NUL a tool was given), and one such row would fail
    // the read for every step.
    this.dialect = dialectOf(db);
    this.newest = db.prepare("SELECT task_id, payload FROM events WHERE type = 'feedback-received' ORDER BY id DESC LIMIT ?");
    // With each task's iteration-started events, which tell which decision a call belongs to.
    this.callsOf = db.prepare(
      `SELECT task_id, type, payload FROM events WHERE type IN ('tool-called', 'iteration-started') AND ${this.dialect === "postgres" ? "task_id = ANY(?::text[])" : "task_id IN (SELECT value FROM json_each(?))"} ORDER BY seq`,
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
    let ratings: StepRating[];
    try {
      ratings = this.read(tool, limit);
    } catch {
      // Ratings only calibrate the critic: a read that fails leaves a step to be judged without them.
      return hit?.ratings ?? [];
    }
    this.cached.set(key, { read: now, ratings });
    return ratings;
  }

  forget(): void {
    this.cached.clear();
  }

  private read(tool: string, limit: number): StepRating[] {
    // A damaged row is `db check`'s to report; the critic does without that rating.
    const parse = <T>(json: string): T | null => {
      try {
        return this.blobs.unpack(json) as T;
      } catch {
        return null;
      }
    };
    const ratings = (this.newest.all(SCANNED) as Array<{ task_id: string; payload: string }>).flatMap((row) => {
      const feedback = parse<EventPayloads["feedback-received"]>(row.payload);
      return feedback?.target === "step" && feedback.step_id ? [{ task_id: row.task_id, step_id: feedback.step_id, feedback }] : [];
    });
    if (ratings.length === 0) return [];
    const tasks = [...new Set(ratings.map((rating) => rating.task_id))];
    // Each step's latest call, in the task as a whole and in its decision: the rows come oldest
    // first, so a later call of a step replaces an earlier one.
    const calls = new Map<string, EventPayloads["tool-called"]>();
    const decisionOf = new Map<string, number>();
    for (const row of this.callsOf.all(this.dialect === "postgres" ? tasks : JSON.stringify(tasks)) as Array<{ task_id: string; type: string; payload: string }>) {
      if (row.type === "iteration-started") {
        const started = parse<EventPayloads["iteration-started"]>(row.payload);
        if (started) decisionOf.set(row.task_id, started.iteration);
        continue;
      }
      const called = parse<EventPayloads["tool-called"]>(row.payload);
      if (!called) continue;
      calls.set(`${row.task_id}|${called.step_id}`, called);
      calls.set(`${row.task_id}|${decisionOf.get(row.task_id) ?? 1}|${called.step_id}`, called);
    }
    const found: StepRating[] = [];
    for (const { task_id, step_id, feedback } of ratings) {
      const called = calls.get(feedback.iteration === undefined ? `${task_id}|${step_id}` : `${task_id}|${feedback.iteration}|${step_id}`);
      if (!called || called.call.tool !== tool) continue;
      found.push({ task_id, step_id, tool, arguments: called.call.arguments, rating: feedback.rating, comment: feedback.comment });
      if (found.length >= limit) break;
    }
    return found;
  }
}
