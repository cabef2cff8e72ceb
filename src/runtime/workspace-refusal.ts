import { lstatSync } from "node:fs";
import { tmpdir } from "node:os";
import { resolve } from "node:path";
import { realpathOfDeepestAncestor } from "../permissions/path-judge.js";

// Each task's workspace is checked against the same few roots: their real paths are worked out once.
const realForms = new Map<string, string[]>();
function bothForms(root: string): string[] {
  let forms = realForms.get(root);
  if (!forms) {
    forms = [resolve(root), realpathOfDeepestAncestor(resolve(root))];
    realForms.set(root, forms);
  }
  return forms;
}

/** Folders of the system and of every user that no workspace may hold. */
const SYSTEM_FOLDERS = ["/etc", "/usr", "/bin", "/sbin", "/lib", "/boot", "/var", "/opt", "/srv", "/home", "/tmp", "/proc", "/sys", "/dev", "/run"];

/** Folders of the system no workspace may lie in. */
const SYSTEM_FOLDERS_NOT_TO_WORK_IN = ["/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/boot", "/proc", "/sys", "/dev", "/run", "/var/spool", "/var/cron"];

/**
 * Why a folder cannot be a workspace, or null: one that is, or lies inside, DuckLM's home, the
 * user's config folder, the bundled config or DuckLM's program would let tasks write what DuckLM
 * reads and runs. (A workspace that holds them, a checkout or a home directory, is fine: they are
 * hidden or read-only in it.)
 */
export function workspaceRefusal(workspace: string, protectedPaths: readonly string[], readOnlyPaths: readonly string[]): string | null {
  const real = realpathOfDeepestAncestor(resolve(workspace));
  const inside = (root: string) => bothForms(root).some((path) => real === path || real.startsWith(`${path}/`));
  // A workspace is writable to every command: one that holds the system's folders, other users'
  // homes or the temporary folder (where DuckLM keeps its private helpers, such as sudo's askpass)
  // would give a task all of them. A container's working folder is often `/`.
  const held = [...SYSTEM_FOLDERS, tmpdir()].find((folder) => bothForms(folder).some((path) => path === real || path.startsWith(real === "/" ? "/" : `${real}/`)));
  if (held) return `the workspace ${workspace} holds ${held}, which commands would then be free to change; choose a project folder (for example with --workspace)`;
  const system = SYSTEM_FOLDERS_NOT_TO_WORK_IN.find(inside);
  if (system) return `the workspace ${workspace} lies in ${system}, where what a command writes is run or read by the system (a cron job, a program on the PATH); choose a project folder`;
  const own = protectedPaths.find(inside);
  if (own) return `the workspace ${workspace} is DuckLM's own state or lies inside it (${own}): tasks would reach its database, token or config; choose another folder`;
  const program = readOnlyPaths.find(inside);
  if (program) return `the workspace ${workspace} is DuckLM's own program or lies inside it (${program}): tasks could change what DuckLM runs; choose another folder`;
  // A part of the program that is a link in the workspace (a node_modules linked in) cannot be kept
  // from being renamed and replaced by one of the task's making.
  const linked = readOnlyPaths.find((path) => path.startsWith(`${resolve(workspace)}/`) && lstatSync(path, { throwIfNoEntry: false })?.isSymbolicLink());
  if (linked) return `the workspace ${workspace} holds DuckLM's own program, and ${linked} in it is a symbolic link, which a task could replace with one of its own; choose another folder, or make it a folder`;
  return null;
}
