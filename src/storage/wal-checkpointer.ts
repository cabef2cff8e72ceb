import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import type { SqliteDatabase } from "./open-database.js";

/**
 * Copies the WAL back into the database file every `intervalMs`, from a connection of its own on a
 * worker thread. A checkpoint writes pages and fsyncs the file: on the main thread that stalls every
 * task and stream for as long as the disk takes; on a worker it overlaps them, and SQLite lets a
 * PASSIVE checkpoint run beside the writer. The worker starts at the first interval, so a short
 * command never pays for one; where it cannot start, the checkpoint runs on the main thread instead.
 */
export interface WalCheckpointer {
  /** Stops the checkpoints, and returns once the worker's connection, if one was opened, is closed. */
  stop(): void;
}

// The worker's program: its own connection, no migrations, a PASSIVE checkpoint on every interval.
const WORKER_SOURCE = `
const { workerData, parentPort } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.file, { fileMustExist: true });
db.pragma("busy_timeout = 0");
const checkpoint = () => {
  try {
    db.pragma("wal_checkpoint(PASSIVE)");
  } catch {
    // A busy database skips one round; the next one catches up.
  }
};
checkpoint();
const timer = setInterval(checkpoint, workerData.intervalMs);
parentPort.on("message", () => {
  clearInterval(timer);
  try {
    db.close();
  } finally {
    Atomics.store(workerData.closed, 0, 1);
    Atomics.notify(workerData.closed, 0);
    parentPort.close();
  }
});
`;

/** The longest stop() waits for the worker's connection to close (a checkpoint under way finishes first). */
const STOP_WAIT_MS = 5_000;

export function startWalCheckpointer(db: SqliteDatabase, file: string, intervalMs: number): WalCheckpointer {
  let worker: Worker | null = null;
  // Set by the worker once its connection is closed: stop() waits for it.
  const closed = new Int32Array(new SharedArrayBuffer(4));
  let mainThreadTimer: ReturnType<typeof setInterval> | null = null;
  const onMainThread = () => {
    try {
      db.pragma("wal_checkpoint(PASSIVE)");
    } catch {
      // As in the worker: the next round catches up.
    }
  };
  const start = setTimeout(() => {
    try {
      const driver = createRequire(import.meta.url).resolve("better-sqlite3");
      worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { driver, file, intervalMs, closed } });
      // It never keeps the process alive, and a failure of its own only brings the main-thread timer back.
      worker.unref();
      worker.on("error", () => {
        worker = null;
        mainThreadTimer ??= setInterval(onMainThread, intervalMs).unref();
      });
    } catch {
      mainThreadTimer = setInterval(onMainThread, intervalMs).unref();
    }
  }, intervalMs);
  start.unref();
  return {
    stop() {
      clearTimeout(start);
      if (mainThreadTimer) clearInterval(mainThreadTimer);
      if (!worker) return;
      // Asked to close its connection and end (terminate() would cut it off mid-checkpoint), and waited
      // for, so that once the database is closed no connection of this process has the file open: a
      // repair may rename it, a test delete it.
      worker.postMessage("stop");
      Atomics.wait(closed, 0, 0, STOP_WAIT_MS);
      worker = null;
    },
  };
}
