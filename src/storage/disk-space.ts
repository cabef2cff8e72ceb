import { statfsSync } from "node:fs";
import { DuckError, ErrorCode } from "../errors/duck-error.js";

/** Less free space than this on the home's filesystem and DuckLM does not start: SQLite could not even map its WAL index. */
export const MIN_FREE_BYTES_TO_START = 1024 * 1024;
/** Free space at which a store that failed for a full disk is tried again. */
export const FREE_BYTES_TO_RETRY = 256 * 1024;

/** Bytes an unprivileged writer may still use on the filesystem holding `path`, or null when that cannot be known. */
export function freeBytes(path: string): number | null {
  try {
    const stats = statfsSync(path);
    return Number(stats.bavail) * Number(stats.bsize);
  } catch {
    return null;
  }
}

/** The error for a home whose disk is full, with what to do. */
export function diskFullError(path: string, free: number): DuckError {
  return new DuckError(ErrorCode.DiskFull, `the disk that holds ${path} is full (${free} bytes free): free some space, then try again`, { details: { path, free_bytes: free, retry_after_s: 5 } });
}

/**
 * Refuses to open DuckLM's database on a full disk: SQLite memory-maps its WAL index, and a full
 * filesystem turns the first write into it into SIGBUS, a death without a word.
 */
export function assertRoomToStart(path: string): void {
  const free = freeBytes(path);
  if (free !== null && free < MIN_FREE_BYTES_TO_START) throw diskFullError(path, free);
}
