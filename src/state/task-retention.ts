import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { RuntimeConfig } from "../config/config-schemas.js";
import { BLOB_REMOVAL_LOCK, BlobStore } from "../storage/blob-store.js";
import { dialectOf, type SqlDatabase } from "../storage/sql-database.js";

export interface PruneOptions {
  /** Finished tasks last changed before this are pruned. */
  olderThan: Date | null;
  /** Keep only this many finished tasks, the newest. */
  keepNewest: number | null;
  action: "delete" | "archive";
  /** Where archived tasks go (one JSON-lines file each: the task row, then its events). */
  archiveDir: string;
}

export interface PruneResult {
  pruned: string[];
  archivedTo: string | null;
}

export function pruneOptionsFrom(config: RuntimeConfig["retention"], home: string, now = new Date()): PruneOptions {
  return {
    olderThan: config.finished_task_days === null ? null : new Date(now.getTime() - config.finished_task_days * 86_400_000),
    keepNewest: config.max_finished_tasks,
    action: config.action,
    archiveDir: join(home, "archive"),
  };
}

/**
 * Removes finished tasks (completed, failed, cancelled) with their events and checkpoints, so storage
 * does not grow without bound; memory rows stay. Unfinished tasks are never touched.
 */
export function pruneFinishedTasks(db: SqlDatabase, options: PruneOptions): PruneResult {
  const finished = db
    .prepare("SELECT id, updated_at FROM tasks WHERE state IN ('completed', 'failed', 'cancelled') ORDER BY updated_at DESC, id")
    .all() as Array<{ id: string; updated_at: string }>;
  const cutoff = options.olderThan?.toISOString() ?? null;
  const doomed = finished.filter((task, index) => (cutoff !== null && task.updated_at < cutoff) || (options.keepNewest !== null && index >= options.keepNewest)).map((task) => task.id);
  if (doomed.length === 0) return { pruned: [], archivedTo: null };
  if (options.action === "archive") {
    // An archive stands on its own: long texts are written out in full, not as references.
    const blobs = new BlobStore(db);
    mkdirSync(options.archiveDir, { recursive: true, mode: 0o700 });
    const taskRow = db.prepare("SELECT * FROM tasks WHERE id = ?");
    const events = db.prepare("SELECT task_id, seq, type, time, payload FROM events WHERE task_id = ? ORDER BY seq");
    for (const id of doomed) {
      const rows = (events.all(id) as Array<{ task_id: string; seq: number; type: string; time: string; payload: string }>).map((row) =>
        JSON.stringify({ ...row, payload: blobs.unpack(row.payload) }),
      );
      const task = taskRow.get(id) as { answer: string | null };
      writeFileSync(join(options.archiveDir, `${id}.jsonl`), `${JSON.stringify({ task: { ...task, answer: blobs.unpackText(task.answer) } })}\n${rows.join("\n")}\n`, { mode: 0o600 });
    }
  }
  const remove = db.prepare("DELETE FROM tasks WHERE id = ?");
  const referred = db.prepare("SELECT hash FROM blob_refs WHERE task_id = ?").pluck();
  // A blob goes with the last task that refers to it.
  const removeUnreferredBlob = db.prepare("DELETE FROM blobs WHERE hash = ? AND NOT EXISTS (SELECT 1 FROM blob_refs WHERE hash = ?)");
  // On PostgreSQL, removal waits for transactions writing blob references to commit, and they for it;
  // taken first, so that the removal holds no task row a writer could be waiting for meanwhile.
  const excludeBlobWriters = dialectOf(db) === "postgres" ? db.prepare(`SELECT pg_advisory_xact_lock(${BLOB_REMOVAL_LOCK})`) : null;
  db.transaction(() => {
    excludeBlobWriters?.run();
    const hashes = new Set<string>();
    for (const id of doomed) {
      for (const hash of referred.all(id) as string[]) hashes.add(hash);
      remove.run(id);
    }
    for (const hash of hashes) removeUnreferredBlob.run(hash, hash);
  })();
  return { pruned: doomed, archivedTo: options.action === "archive" ? options.archiveDir : null };
}
