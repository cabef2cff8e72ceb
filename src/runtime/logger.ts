import { renameSync, statSync } from "node:fs";
import { dirname } from "node:path";
import pino, { type Logger } from "pino";
import { ensurePrivateDir, ensurePrivateFile } from "../storage/private-files.js";

export interface LoggerOptions {
  /** Log file; without it, logs go nowhere. */
  file?: string;
  /** pino level. Defaults to DUCKLM_LOG_LEVEL, then `info`. */
  level?: string;
  /** Past this size the file is set aside when a logger opens it. Defaults to COMMAND_LOG_MAX_BYTES. */
  maxBytes?: number;
}

/** How big a command's log grows before the next command sets it aside as `<name>.1.log`. */
export const COMMAND_LOG_MAX_BYTES = 10 * 1024 * 1024;

/** Fields never written to a log, wherever they appear one level down. */
export const LOG_REDACTIONS = ["password", "secret", "token", "authorization", "cookie", "*.password", "*.secret", "*.token", "*.authorization", "*.cookie"];

/**
 * Structured logs go to a file, so the CLI's own output stays readable. The file is bounded: a
 * command that finds it over `maxBytes` renames it to `<name>.1.log` (replacing the one before) and
 * starts afresh, so the log never holds more than two full files and what one command wrote.
 * Commands write synchronously (a line must reach the file before `process.exit`) and start in a
 * tenth of a second, which rules out pino-roll here: it writes asynchronously and costs 60–90 ms to
 * import. The long-running processes use it (service-logger.ts).
 */
export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? process.env.DUCKLM_LOG_LEVEL ?? "info";
  if (!options.file) return pino({ level: "silent" });
  ensurePrivateDir(dirname(options.file));
  setAsideWhenFull(options.file, options.maxBytes ?? COMMAND_LOG_MAX_BYTES);
  ensurePrivateFile(options.file);
  return pino({ level, redact: LOG_REDACTIONS }, pino.destination({ dest: options.file, sync: true }));
}

function setAsideWhenFull(file: string, maxBytes: number): void {
  const size = statSync(file, { throwIfNoEntry: false })?.size ?? 0;
  if (size <= maxBytes) return;
  // Two commands may find it full at once; the rename is atomic, and the loser's fails harmlessly.
  try {
    renameSync(file, file.replace(/(\.log)?$/, ".1.log"));
  } catch {
    // Someone else set it aside first; write to the fresh file they left.
  }
}
