import { existsSync, lstatSync, realpathSync } from "node:fs";
import { dirname, isAbsolute, relative, resolve, sep } from "node:path";
import { DuckError, ErrorCode } from "../errors/duck-error.js";

function outside(path: string, message: string): DuckError {
  return new DuckError(ErrorCode.PathOutsideWorkspace, message, { details: { path } });
}

function isWithin(root: string, candidate: string): boolean {
  const rel = relative(root, candidate);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel));
}

/**
 * Resolves a path the user or a model gave against the workspace, following symlinks through the
 * deepest existing ancestor, and refuses anything that lands outside it.
 */
export function resolveInWorkspace(workspace: string, requested: string): string {
  if (requested.includes("\0")) throw outside(requested, "path contains a NUL byte");
  const root = realpathSync(workspace);
  const absolute = resolve(root, requested);
  if (!isWithin(root, absolute)) throw outside(requested, `${requested} is outside the workspace ${root}`);

  // Walk up to the deepest ancestor that exists and resolve it through its links.
  let existing = absolute;
  const rest: string[] = [];
  while (!existsSync(existing)) {
    const parent = dirname(existing);
    if (parent === existing) break;
    if (lstatExists(existing)) throw outside(requested, `${requested} is a dangling link`);
    rest.unshift(existing.slice(parent.length + (parent.endsWith(sep) ? 0 : 1)));
    existing = parent;
  }
  const real = resolve(realpathSync(existing), ...rest);
  if (!isWithin(root, real)) throw outside(requested, `${requested} resolves to ${real}, outside the workspace ${root}`);
  return real;
}

function lstatExists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}
