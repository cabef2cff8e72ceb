import type { Logger } from "pino";

/** How often a SQLite home shared with other processes is looked at while someone follows a task here. */
export const OTHER_WRITERS_POLL_MS = 100;

export interface OtherWritersOptions {
  /** SQLite's `PRAGMA data_version`: it changes when another connection (another process) commits. */
  dataVersion: () => number;
  /** Tasks someone here follows (the bus's subscribed tasks). */
  followed: () => string[];
  /** Another process committed: the task's subscribers here read what they have not had yet. */
  committedElsewhere: (taskId: string) => void;
  logger: Logger;
  intervalMs?: number;
}

/**
 * Another process on the same SQLite home (a `ducklm run` beside `ducklm serve`, a second server)
 * commits events that this process's subscribers would never hear of: SQLite has no notices. While
 * anyone here follows a task, the database's data version is looked at every OTHER_WRITERS_POLL_MS;
 * when another connection has committed, every followed task is read again from where each
 * subscriber stands (the bus checks continuity, so nothing is delivered twice or out of order).
 */
export function watchOtherWriters(options: OtherWritersOptions): { close(): void } {
  let version: number | null = null;
  const timer = setInterval(() => {
    const followed = options.followed();
    if (followed.length === 0) {
      version = null;
      return;
    }
    let now: number;
    try {
      now = options.dataVersion();
    } catch (error) {
      options.logger.warn({ err: error }, "could not look for other processes' commits");
      return;
    }
    // The first look after someone starts following reads again too: a commit may have come between
    // their catch-up and this look.
    const changed = version === null || now !== version;
    version = now;
    if (!changed) return;
    for (const taskId of followed) options.committedElsewhere(taskId);
  }, options.intervalMs ?? OTHER_WRITERS_POLL_MS);
  timer.unref();
  return { close: () => clearInterval(timer) };
}
