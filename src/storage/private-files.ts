import { accessSync, chmodSync, closeSync, constants, existsSync, mkdirSync, openSync, readdirSync, statSync, type Stats } from "node:fs";
import { dirname, resolve } from "node:path";
import { DuckError, ErrorCode } from "../errors/duck-error.js";

/** What DuckLM itself writes into its folders: a folder holding one of these is DuckLM's to tighten. */
const OWN_ENTRY = /^(token|ducklm\.sqlite3|server\.json|memory\.hnsw|(ducklm|server)(\.\d+)?\.log|.+\.gguf(\.part)?)$/;

/** Why a folder or file could not be made, in words (an errno means little to most people). */
function whyNot(error: unknown, making: "folder" | "file"): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "ENOTDIR") return "a file stands where a folder of that path would be";
  if (code === "ENOENT") return making === "folder" ? "the folder above it refuses new entries" : "its folder does not take new files";
  if (code === "EACCES" || code === "EPERM") return making === "folder" ? "this user may not create it" : "this user may not write it";
  if (code === "EROFS") return "the filesystem is read-only";
  if (code === "ENOSPC") return "the disk is full";
  return (error as Error).message;
}

/** The error for a home that is a file (`--home /dev/null`). */
export function homeIsNotAFolder(dir: string): DuckError {
  return new DuckError(ErrorCode.StorageFailed, `${dir} is not a folder: choose a home DuckLM can write with --home or DUCKLM_HOME`, { details: { directory: dir } });
}

/**
 * DuckLM's home holds the token, the approvals and every task's log: only its owner may read it.
 * Creates the folder 0700, and tightens an existing one that is DuckLM's: this user's, and empty or
 * holding what DuckLM writes. Any other folder (`--home /etc`, a home directory) keeps its mode, as
 * running as root must never change a system folder; the files DuckLM writes in it are 0600 anyway.
 * A path that is not a folder (`--home /dev/null`) is refused.
 */
export function ensurePrivateDir(dir: string): void {
  const created = makeDirectories(dir);
  let info: Stats;
  try {
    info = statSync(dir);
  } catch (error) {
    throw new DuckError(ErrorCode.StorageFailed, `cannot use the folder ${dir}: ${whyNot(error, "folder")}; choose a home DuckLM can write with --home or DUCKLM_HOME`, { cause: error, details: { directory: dir } });
  }
  if (!info.isDirectory()) throw homeIsNotAFolder(dir);
  if ((info.mode & 0o777) === 0o700) return;
  if (!created && !isDuckLMFolder(dir, info)) return;
  try {
    chmodSync(dir, 0o700);
  } catch {
    // A read-only or foreign folder: opening files in it reports the real problem.
  }
}

function isDuckLMFolder(dir: string, info: Stats): boolean {
  if (typeof process.getuid === "function" && info.uid !== process.getuid()) return false;
  try {
    const entries = readdirSync(dir);
    return entries.length === 0 || entries.some((name) => OWN_ENTRY.test(name));
  } catch {
    return false;
  }
}

/** Creates a file 0600 if it is missing, and makes an existing one 0600. */
export function ensurePrivateFile(file: string): void {
  try {
    // An existing file is only checked, never opened: closing a descriptor of a database file would drop
    // the locks another connection of this process holds on it. A read-only home shows here, named.
    if (existsSync(file)) accessSync(file, constants.W_OK);
    else closeSync(openSync(file, "a", 0o600));
  } catch (error) {
    throw new DuckError(ErrorCode.StorageFailed, `cannot write ${file}: ${whyNot(error, "file")}; DuckLM's home must be writable: choose another with --home or DUCKLM_HOME`, {
      cause: error,
      details: { file },
    });
  }
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

/**
 * `mkdir -p`, one level at a time from the deepest folder that exists. Node's recursive mkdir retries
 * for ever where a parent refuses new entries with ENOENT (inside /proc); here that is an error.
 */
/** Whether it created `dir` itself. */
function makeDirectories(dir: string): boolean {
  const missing: string[] = [];
  for (let current = resolve(dir); !existsSync(current); current = dirname(current)) {
    missing.push(current);
    if (dirname(current) === current) break;
  }
  for (const folder of missing.reverse()) {
    try {
      mkdirSync(folder, { mode: 0o700 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EEXIST") continue;
      throw new DuckError(ErrorCode.StorageFailed, `cannot create the folder ${folder}${folder === dir ? "" : ` (for ${dir})`}: ${whyNot(error, "folder")}; choose a home DuckLM can write with --home or DUCKLM_HOME`, {
        cause: error,
        details: { directory: dir },
      });
    }
  }
  return missing.length > 0;
}
