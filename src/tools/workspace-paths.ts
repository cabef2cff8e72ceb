import { constants, existsSync, lstatSync, readlinkSync, realpathSync } from "node:fs";
import { open, unlink, type FileHandle } from "node:fs/promises";
import { dirname, isAbsolute, relative, resolve, sep } from "node:path";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { realpathOfDeepestAncestor } from "../permissions/path-judge.js";

function outside(path: string, message: string): DuckError {
  return new DuckError(ErrorCode.PathOutsideWorkspace, message, { details: { path } });
}

export function isWithin(root: string, candidate: string): boolean {
  const rel = relative(root, candidate);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel));
}

function lstatOrNull(path: string) {
  try {
    return lstatSync(path);
  } catch {
    return null;
  }
}

/** Each protected path and, where links lead elsewhere, where it really is; worked out once per list. */
const realProtected = new WeakMap<readonly string[], string[]>();

function withRealPaths(protectedPaths: readonly string[]): string[] {
  let paths = realProtected.get(protectedPaths);
  if (!paths) {
    // The path a file tool checks is real (links followed); a protected path named through a link (a
    // workspace or home reached by a symlink, a hooks folder a task made a link) must be compared real too.
    paths = [...new Set(protectedPaths.flatMap((path) => [path, realpathOfDeepestAncestor(path)]))];
    realProtected.set(protectedPaths, paths);
  }
  return paths;
}

/** DuckLM's own state, the workspace's `.git` internals or its hooks folder (hooks and config make git run code). */
export function protectedReason(root: string, real: string, protectedPaths: readonly string[]): string | null {
  if (withRealPaths(protectedPaths).some((path) => isWithin(path, real))) return "it is DuckLM's own state (home, config or plugins) or the repository's hooks, which git runs";
  if (isWithin(root, real) && relative(root, real).split(sep).includes(".git")) return "it is inside .git, whose hooks and config make git run code";
  return null;
}

/** Refuses a write to DuckLM's own program (`readOnlyPaths`), which a task may read but never change. */
export function refuseReadOnly(requested: string, real: string, readOnlyPaths: readonly string[]): void {
  if (withRealPaths(readOnlyPaths).some((path) => isWithin(path, real))) {
    throw new DuckError(ErrorCode.PathProtected, `${requested} is off limits to tasks: it is part of DuckLM's own program (the code it runs, its packages, its bundled config or its web page), which tasks may read but never change`, { details: { path: requested } });
  }
}

function refuseProtected(requested: string, reason: string | null): void {
  if (reason) throw new DuckError(ErrorCode.PathProtected, `${requested} is off limits to tasks: ${reason}`, { details: { path: requested } });
}

/**
 * Resolves a path the user or a model gave against the workspace, following symlinks through the
 * deepest existing ancestor, and refuses anything that lands outside it, a NUL byte, a link as the
 * final component (dangling or not), `.git` internals and DuckLM's own state: the file a tool touches
 * is always a real file in the workspace that a task may touch.
 */
export function resolveInWorkspace(workspace: string, requested: string, protectedPaths: readonly string[] = []): string {
  if (requested.includes("\0")) throw outside(requested, "path contains a NUL byte");
  const root = realpathSync(workspace);
  const absolute = resolve(root, requested);
  if (!isWithin(root, absolute)) throw outside(requested, `${requested} is outside the workspace ${root}`);
  refuseProtected(requested, protectedReason(root, absolute, protectedPaths));
  if (lstatOrNull(absolute)?.isSymbolicLink()) throw outside(requested, `${requested} is a symbolic link; DuckLM does not read or write through a link`);

  // Walk up to the deepest ancestor that exists and resolve it through its links.
  let existing = absolute;
  const rest: string[] = [];
  while (!existsSync(existing)) {
    const parent = dirname(existing);
    if (parent === existing) break;
    if (lstatOrNull(existing)) throw outside(requested, `${requested} passes through a dangling link`);
    rest.unshift(existing.slice(parent.length + (parent.endsWith(sep) ? 0 : 1)));
    existing = parent;
  }
  const real = resolve(realpathSync(existing), ...rest);
  if (!isWithin(root, real)) throw outside(requested, `${requested} resolves to ${real}, outside the workspace ${root}`);
  refuseProtected(requested, protectedReason(root, real, protectedPaths));
  return real;
}

/** Where an open file really is, read back from the kernel (Linux), or null where that cannot be asked. */
function openedPath(handle: FileHandle): string | null {
  try {
    return readlinkSync(`/proc/self/fd/${handle.fd}`);
  } catch {
    return null;
  }
}

/**
 * Opens a path resolved by `resolveInWorkspace`, never following a final link, then checks where the
 * opened file really is. A directory swapped for a link between the check and the open is caught here;
 * a file this call created outside the workspace is removed again.
 */
export async function openInWorkspace(workspace: string, resolvedPath: string, flags: number, mode = 0o644, protectedPaths: readonly string[] = []): Promise<FileHandle> {
  const root = realpathSync(workspace);
  const handle = await open(resolvedPath, flags | constants.O_NOFOLLOW, mode).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ELOOP") throw outside(resolvedPath, `${resolvedPath} became a symbolic link; refusing`);
    throw error;
  });
  const actual = openedPath(handle);
  const check = actual ?? realpathSync(dirname(resolvedPath));
  if (!isWithin(root, check) || protectedReason(root, check, protectedPaths)) {
    await handle.close();
    if (actual && flags & constants.O_CREAT) await unlink(actual).catch(() => undefined);
    throw outside(resolvedPath, `${resolvedPath} was moved outside the workspace (or into protected state) while it was being opened; nothing was kept`);
  }
  return handle;
}
