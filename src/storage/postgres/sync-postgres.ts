import { createRequire } from "node:module";
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from "node:worker_threads";
import { DuckError, ErrorCode } from "../../errors/duck-error.js";

/**
 * One PostgreSQL connection that the main thread uses synchronously. Every store DuckLM has is
 * synchronous, because SQLite is: an event, its task row and its checkpoint are written in one
 * transaction that nothing else interleaves with. `pg` is asynchronous, so the connection lives on a
 * worker thread; the main thread posts statements to it and blocks on an Atomics counter until the
 * worker answers, exactly as it blocks inside better-sqlite3 while SQLite writes. See
 * docs/decisions/0010-postgresql-behind-synchronous-stores.md.
 */

/** One statement: `$1`-style placeholders and their values. */
export interface PgStatement {
  sql: string;
  params: readonly unknown[];
}

export interface PgResult {
  rows: Array<Record<string, unknown>>;
  /** Rows written (INSERT, UPDATE, DELETE) or returned. */
  rowCount: number;
  /** The command tag: a COMMIT the server turned into a rollback answers ROLLBACK. */
  command: string | null;
}

/** What PostgreSQL said when a statement failed, kept as fields because an Error does not cross threads whole. */
export class PostgresError extends Error {
  constructor(
    message: string,
    /** SQLSTATE, such as 23505 for a unique violation. */
    readonly code: string | undefined,
    readonly detail: string | undefined,
  ) {
    super(message);
    this.name = "PostgresError";
  }
}

export interface SyncPostgresOptions {
  /** How long one round trip may take before the caller gets an error instead of an answer. */
  timeoutMs?: number;
  /** Sent as application_name: which process a connection belongs to, in pg_stat_activity. */
  applicationName?: string;
}

/** `fatal`: the connection itself is gone (the server restarted, the network dropped it); nothing more can go through it. */
type Reply = { results: PgResult[] } | { error: { message: string; code?: string; detail?: string }; fatal?: boolean };

// The worker's program. It keeps one client, prepares each distinct statement once on the server,
// and sends each batch pipelined: every statement goes out at once, in order, and the answers come
// back in one trip instead of one trip a statement. Batches are a transaction's statements (see
// PostgresDatabase), so after a failed one the server refuses the rest and turns COMMIT into
// ROLLBACK; the first error is the one reported.
const WORKER_SOURCE = `
const { workerData } = require("node:worker_threads");
const pg = require(workerData.driver);
const { port, signal } = workerData;
// int8 (COUNT, SUM of integers, bigserial) and numeric as numbers, as SQLite gives them.
const types = {
  getTypeParser(oid, format) {
    if (oid === 20 || oid === 1700) return (value) => (value === null ? null : Number(value));
    return pg.types.getTypeParser(oid, format);
  },
};
const client = new pg.Client({ connectionString: workerData.url, application_name: workerData.applicationName, types, pipeline: true });
let broken = null;
client.on("error", (error) => { broken = error; });
client.on("end", () => { broken ??= new Error("the connection to PostgreSQL was closed"); });
// A lock another worker holds too long is an error after 10 s, not a stall; and a session of a process
// that froze inside a transaction is ended by the server after 15 s (our transactions never wait on
// anything between statements), so its locks are gone before a task lease (30 s by default) runs out
// and another process comes to take the task over.
const connected = client
  .connect()
  .then(() => client.query("SET lock_timeout = '10s'; SET idle_in_transaction_session_timeout = '15s'"))
  .catch((error) => { broken = error; });
const names = new Map();
function nameOf(sql) {
  let name = names.get(sql);
  if (!name) {
    name = "ducklm_" + names.size;
    names.set(sql, name);
  }
  return name;
}
function answer(reply) {
  port.postMessage(reply);
  Atomics.add(signal, 0, 1);
  Atomics.notify(signal, 0);
}
port.on("message", async (message) => {
  if (message === "close") {
    try { await client.end(); } catch {}
    answer({ results: [] });
    port.close();
    return;
  }
  await connected;
  if (broken) return answer({ error: { message: broken.message, code: broken.code }, fatal: true });
  // Statements without values (BEGIN, COMMIT, a migration) go as simple queries; the rest are prepared once.
  const settled = await Promise.allSettled(
    message.map((statement) => client.query(statement.params.length === 0 ? statement.sql : { name: nameOf(statement.sql), text: statement.sql, values: statement.params })),
  );
  const failed = settled.find((outcome) => outcome.status === "rejected");
  if (failed) {
    const error = failed.reason;
    // The client's own "error" event may come after the query's rejection: a socket error, a
    // terminated session (57P01…) or a connection failure (08…) ends the connection all the same.
    const connectionGone = broken !== null || /^(ECONNRESET|EPIPE|ETIMEDOUT|ECONNREFUSED|57P0[123]|08...)$/.test(String(error.code ?? "")) || /Connection terminated/i.test(error.message);
    return answer({ error: { message: error.message, code: error.code, detail: error.detail }, fatal: connectionGone });
  }
  answer({ results: settled.map(({ value }) => ({ rows: value.rows ?? [], rowCount: value.rowCount ?? 0, command: value.command ?? null })) });
});
`;

const DEFAULT_TIMEOUT_MS = 30_000;

export class SyncPostgres {
  private readonly worker: Worker;
  private readonly port: MessagePort;
  private readonly signal = new Int32Array(new SharedArrayBuffer(4));
  private readonly timeoutMs: number;
  private closed = false;

  constructor(
    /** A postgres:// connection string; never logged, since it may carry a password. */
    url: string,
    options: SyncPostgresOptions = {},
  ) {
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const { port1, port2 } = new MessageChannel();
    this.port = port1;
    const driver = createRequire(import.meta.url).resolve("pg");
    this.worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { driver, url, applicationName: options.applicationName ?? "ducklm", port: port2, signal: this.signal },
      transferList: [port2],
    });
    // The connection is ended by close(); the thread alone never keeps the process alive.
    this.worker.unref();
    // A thread that dies (out of memory) leaves the next round trip to time out; it must not also take the process down.
    this.worker.on("error", () => {
      this.closed = true;
    });
    // Fails here, with the server's own words, when it cannot be reached or refuses the login.
    try {
      this.run([{ sql: "SELECT 1", params: [] }]);
    } catch (error) {
      this.closed = true;
      void this.worker.terminate();
      throw error;
    }
  }

  /** Runs the statements in order in one round trip, and returns each one's result. */
  run(statements: readonly PgStatement[]): PgResult[] {
    if (this.closed) throw new DuckError(ErrorCode.StorageFailed, "the PostgreSQL connection is closed");
    const reply = this.roundTrip(statements);
    if ("error" in reply) {
      if (reply.fatal) this.close();
      throw new PostgresError(reply.error.message, reply.error.code, reply.error.detail);
    }
    for (const result of reply.results) for (const row of result.rows) reviveBuffers(row);
    return reply.results;
  }

  query(sql: string, params: readonly unknown[] = []): PgResult {
    return this.run([{ sql, params }])[0]!;
  }

  /** False once the connection is gone (closed, timed out, dropped by the server): a new one is needed. */
  get open(): boolean {
    return !this.closed;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.roundTrip("close");
    } catch {
      // A connection that is already gone has nothing left to end.
    }
    void this.worker.terminate();
  }

  private roundTrip(message: readonly PgStatement[] | "close"): Reply {
    const before = Atomics.load(this.signal, 0);
    this.port.postMessage(message);
    const waited = Atomics.wait(this.signal, 0, before, this.timeoutMs);
    const received = receiveMessageOnPort(this.port);
    if (!received) {
      // A late answer would be taken for the next statement's: this connection is done.
      this.closed = true;
      void this.worker.terminate();
      const why = waited === "timed-out" ? `did not answer within ${this.timeoutMs} ms` : "answered nothing";
      throw new DuckError(ErrorCode.StorageFailed, `PostgreSQL ${why}: check that the server is up and reachable (ducklm doctor)`);
    }
    return received.message as Reply;
  }
}

/** bytea arrives as a Uint8Array (a Buffer does not survive postMessage); the stores read Buffers. */
function reviveBuffers(row: Record<string, unknown>): void {
  for (const key in row) {
    const value = row[key];
    if (value instanceof Uint8Array && !Buffer.isBuffer(value)) row[key] = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  }
}
