import { createRequire } from "node:module";
import { join } from "node:path";
import pino, { type Logger, type StreamEntry } from "pino";
import { freeBytes } from "../storage/disk-space.js";
import { ensurePrivateDir } from "../storage/private-files.js";
import { LOG_REDACTIONS } from "./logger.js";

export interface ServiceLoggerOptions {
  /** pino level. Defaults to DUCKLM_LOG_LEVEL, then `info`. */
  level?: string;
  /** Also write readable lines to standard output. Defaults to whether it is a terminal. */
  pretty?: boolean;
  /** Size of one file (pino-roll's units: `10m`, `1k`). Defaults to SERVICE_LOG_FILE_SIZE. */
  fileSize?: string;
  /** Files kept, the one being written included. Defaults to SERVICE_LOG_FILES_KEPT. */
  filesKept?: number;
  /** Where the readable lines go (tests). Defaults to standard output. */
  prettyDestination?: NodeJS.WritableStream;
}

/**
 * One readable line per record: Fastify's request records say what was asked and how it ended (the
 * JSON file keeps every field), and any record of a request names its id, so an error can be told
 * to the request that caused it.
 */
export function readableMessage(record: Record<string, unknown>, messageKey: string): string {
  const message = String(record[messageKey] ?? "");
  const request = record.req as { method?: string; url?: string } | undefined;
  const response = record.res as { statusCode?: number } | undefined;
  const id = typeof record.reqId === "string" || typeof record.reqId === "number" ? ` [${record.reqId}]` : "";
  if (message === "incoming request" && request) return `→ ${request.method} ${request.url}${id}`;
  if (message === "request completed" && response) return `← ${response.statusCode}${typeof record.responseTime === "number" ? ` in ${Math.round(record.responseTime)} ms` : ""}${id}`;
  return `${message}${request?.method ? ` (${request.method} ${request.url})` : ""}${id}`;
}

/** pino-roll's stream, as far as this file uses it (pino's ThreadStream). */
interface LogWriter {
  write(chunk: string): boolean;
  on(event: "error" | "close", listener: (error?: Error) => void): unknown;
  readonly destroyed: boolean;
  unref?(): void;
}

/** How long after the log file's writer failed a new one is tried (once the disk has room). */
export const LOG_REOPEN_MS = 2_000;
/** Free space at which a failed log writer is started again. */
const LOG_REOPEN_FREE_BYTES = 1024 * 1024;

/**
 * The log file's stream, made to outlive its writer. pino-roll runs on a worker thread that dies at
 * a write error (a full disk); its stream then emits "error" at every later write, which nothing
 * would catch — the last-resort handler logged that through the same stream, for ever, at full CPU.
 * Here the failure is caught once; records go to standard error meanwhile; and once the disk has
 * room again (looked at no more often than LOG_REOPEN_MS) a new writer takes over.
 */
export class ResilientLogFile {
  private writer: LogWriter | null = null;
  private retryAt = 0;
  private warned = false;

  constructor(
    private readonly open: () => LogWriter,
    private readonly folder: string,
    private readonly fallback: (chunk: string) => void = (chunk) => {
      try {
        process.stderr.write(chunk);
      } catch {
        // Nowhere left to say it.
      }
    },
  ) {
    this.start();
  }

  /** Whether records reach the file now (false while they go to standard error). */
  get writing(): boolean {
    return this.writer !== null && !this.writer.destroyed;
  }

  write(chunk: string): boolean {
    if (!this.writing && Date.now() >= this.retryAt) {
      const free = freeBytes(this.folder);
      if (free === null || free >= LOG_REOPEN_FREE_BYTES) this.start();
      else this.retryAt = Date.now() + LOG_REOPEN_MS;
    }
    const writer = this.writer;
    if (writer && !writer.destroyed) {
      try {
        return writer.write(chunk);
      } catch (error) {
        this.failed(writer, error);
      }
    }
    this.fallback(chunk);
    return true;
  }

  private start(): void {
    let writer: LogWriter;
    try {
      writer = this.open();
    } catch (error) {
      this.failed(null, error);
      return;
    }
    this.writer = writer;
    writer.on("error", (error) => this.failed(writer, error));
    writer.on("close", () => this.failed(writer));
    if (this.warned) {
      this.warned = false;
      this.fallback(`${JSON.stringify({ level: 30, time: Date.now(), msg: "the log file is written again" })}\n`);
    }
  }

  private failed(writer: LogWriter | null, error?: unknown): void {
    if (writer !== null && writer !== this.writer) return;
    this.writer = null;
    writer?.unref?.();
    this.retryAt = Date.now() + LOG_REOPEN_MS;
    if (this.warned) return;
    this.warned = true;
    const why = error instanceof Error ? error.message : "its writer stopped";
    this.fallback(`${JSON.stringify({ level: 50, time: Date.now(), msg: `the log file cannot be written (${why}): records go to standard error until it can` })}\n`);
  }
}

/** How big one file of a long-running process's log grows before the next one starts, and how many are kept. */
export const SERVICE_LOG_FILE_SIZE = "10m";
export const SERVICE_LOG_FILES_KEPT = 5;

/**
 * The log of a process that keeps running (`ducklm serve`, `ducklm telegram`): JSON lines in
 * `<home>/logs/server.<n>.log`, a new file every 10 MB and the last five kept (pino-roll), and on a
 * terminal the same records as readable lines (pino-pretty). Loaded only by those commands: the
 * libraries cost a tenth of a second at start, which pino-roll spends on its own thread.
 */
export async function createServiceLogger(home: string, options: ServiceLoggerOptions = {}): Promise<Logger> {
  const level = options.level ?? process.env.DUCKLM_LOG_LEVEL ?? "info";
  const folder = join(home, "logs");
  ensurePrivateDir(folder);
  // pino-roll runs on a worker thread of pino's: it and the date library it loads (some 300 modules)
  // start beside the server instead of before it, and a write never waits for the disk. pino flushes
  // the worker when the process exits.
  const file = new ResilientLogFile(
    () =>
      pino.transport({
        target: createRequire(import.meta.url).resolve("pino-roll"),
        options: { file: join(folder, "server"), extension: ".log", size: options.fileSize ?? SERVICE_LOG_FILE_SIZE, limit: { count: (options.filesKept ?? SERVICE_LOG_FILES_KEPT) - 1, removeOtherLogFiles: true }, mkdir: true, mode: 0o600 },
      }) as unknown as LogWriter,
    folder,
  );
  const streams: StreamEntry[] = [{ level: level as pino.Level, stream: file }];
  if (options.pretty ?? process.stdout.isTTY === true) {
    const { default: pretty } = await import("pino-pretty");
    streams.push({
      level: level as pino.Level,
      stream: pretty({
        colorize: !process.env.NO_COLOR && !options.prettyDestination,
        // What the message already says is not repeated after it.
        ignore: "pid,hostname,reqId,req,res,responseTime",
        messageFormat: readableMessage,
        translateTime: "HH:MM:ss",
        singleLine: true,
        ...(options.prettyDestination ? { destination: options.prettyDestination } : {}),
      }),
    });
  }
  return pino({ level, redact: LOG_REDACTIONS }, pino.multistream(streams));
}
