import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from "node:fs";

/**
 * DuckLM's home holds the token, the approvals and every task's log: only its owner may read it.
 * Creates the folder 0700 (and tightens an existing one); a folder that cannot be changed is left as it is.
 */
export function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  try {
    chmodSync(dir, 0o700);
  } catch {
    // A read-only or foreign folder: opening files in it reports the real problem.
  }
}

/** Creates a file 0600 if it is missing, and makes an existing one 0600. */
export function ensurePrivateFile(file: string): void {
  if (!existsSync(file)) closeSync(openSync(file, "a", 0o600));
  makePrivate(file);
}

/** Sets an existing file to 0600; a missing file is no error. */
export function makePrivate(file: string): void {
  try {
    if (existsSync(file)) chmodSync(file, 0o600);
  } catch {
    // Not ours to change.
  }
}
