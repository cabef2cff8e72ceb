import type pg from "pg";
import type { Logger } from "pino";
import type { CommittedRange } from "../../state/task-store.js";
import type { SqlDatabase } from "../sql-database.js";

/**
 * Several DuckLM processes share one PostgreSQL database; a person watching a task may be connected
 * to any of them. Each commit sends a NOTIFY per task it holds events of (`notifyCommits`), which
 * PostgreSQL delivers only once the transaction commits; every process LISTENs (`listenForCommits`)
 * and has its subscribers read the new events from the table, so the stream is the stored one, in
 * order, whichever process wrote it. A notice is only a hint to read: one lost while a connection
 * was down is made good by reading again for every watched task when it is back.
 */
export const COMMIT_CHANNEL = "ducklm_events";

interface Notice {
  /** The process that committed (its lease owner id): it does not read its own commits back. */
  o: string;
  t: string;
  f: number;
  l: number;
}

/** The write that rides in each commit of `origin`: one notice per task, delivered at commit. */
export function notifyCommits(db: SqlDatabase, origin: string): (ranges: CommittedRange[]) => void {
  const notify = db.prepare("SELECT pg_notify(?, ?)");
  return (ranges) => {
    for (const range of ranges) notify.run(COMMIT_CHANNEL, JSON.stringify({ o: origin, t: range.taskId, f: range.from, l: range.to } satisfies Notice));
  };
}

export interface CommitListener {
  /** Settles once the first LISTEN is in place, or after LISTENING_WAIT_MS if it cannot be (it keeps trying). */
  listening: Promise<void>;
  close(): Promise<void>;
}

export interface CommitHandlers {
  /** Events `from`…`to` of a task were committed by another process. */
  committed(taskId: string, from: number, to: number): void;
  /** Notices may have been missed (the connection was down): read again what is watched. */
  missed(): void;
}

const RECONNECT_MS = 1_000;
const LISTENING_WAIT_MS = 5_000;

/** Listens for other processes' commits on a connection of its own, reconnecting when it drops. */
export function listenForCommits(url: string, origin: string, handlers: CommitHandlers, logger: Logger): CommitListener {
  let client: pg.Client | null = null;
  let closed = false;
  let retry: ReturnType<typeof setTimeout> | null = null;
  let heard: () => void = () => undefined;
  const listening = new Promise<void>((resolve) => {
    heard = resolve;
    setTimeout(resolve, LISTENING_WAIT_MS).unref();
  });

  const connect = async () => {
    // Loaded here: a process on SQLite never loads the driver.
    const { default: driver } = await import("pg");
    if (closed) return;
    const next = new driver.Client({ connectionString: url, application_name: `ducklm ${process.pid} listener` });
    client = next;
    next.on("notification", (message) => {
      if (message.channel !== COMMIT_CHANNEL || !message.payload) return;
      let notice: Notice;
      try {
        notice = JSON.parse(message.payload) as Notice;
      } catch {
        return; // Not one of ours.
      }
      if (notice.o === origin || typeof notice.t !== "string") return;
      handlers.committed(notice.t, Number(notice.f), Number(notice.l));
    });
    next.on("error", (error) => {
      logger.warn({ err: error }, "the PostgreSQL connection that hears other processes' commits failed; reconnecting");
      reconnect(next);
    });
    next.on("end", () => reconnect(next));
    try {
      await next.connect();
      await next.query(`LISTEN ${COMMIT_CHANNEL}`);
      // Commits made before this LISTEN (or while the connection was down) sent notices nobody heard.
      handlers.missed();
      heard();
    } catch (error) {
      logger.warn({ err: error }, "cannot listen for other processes' commits on PostgreSQL; trying again");
      reconnect(next);
    }
  };

  const reconnect = (failed: pg.Client) => {
    if (closed || client !== failed || retry) return;
    client = null;
    failed.removeAllListeners("notification");
    void failed.end().catch(() => undefined);
    retry = setTimeout(() => {
      retry = null;
      if (!closed) void connect();
    }, RECONNECT_MS);
    retry.unref();
  };

  void connect();
  return {
    listening,
    async close() {
      closed = true;
      if (retry) clearTimeout(retry);
      const current = client;
      client = null;
      // The listener is added after the first connect: keep the process from waiting on a dead one.
      if (current) await current.end().catch(() => undefined);
    },
  };
}
