import { dirname } from "node:path";
import pino, { type Logger } from "pino";
import { ensurePrivateDir, ensurePrivateFile } from "../storage/private-files.js";

export interface LoggerOptions {
  /** Log file; without it, logs go nowhere. */
  file?: string;
  /** pino level. Defaults to DUCKLM_LOG_LEVEL, then `info`. */
  level?: string;
}

/** Fields never written to a log, wherever they appear one level down. */
export const LOG_REDACTIONS = ["password", "secret", "token", "authorization", "cookie", "*.password", "*.secret", "*.token", "*.authorization", "*.cookie"];

/** Structured logs go to a file, so the CLI's own output stays readable. */
export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? process.env.DUCKLM_LOG_LEVEL ?? "info";
  if (!options.file) return pino({ level: "silent" });
  ensurePrivateDir(dirname(options.file));
  ensurePrivateFile(options.file);
  return pino({ level, redact: LOG_REDACTIONS }, pino.destination({ dest: options.file, sync: true }));
}
