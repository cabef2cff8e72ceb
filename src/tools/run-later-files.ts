import { closeSync, lstatSync, lutimesSync, mkdirSync, openSync, readdirSync, rmdirSync, constants as fsConstants, unlinkSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { throughFolder, withFolderWithin } from "./folder-walk.js";

/**
 * Files in a workspace that the user's own tools run later, outside any sandbox: a `.git` (its
 * config runs programs at every `git status`), direnv's `.envrc`, editors' task and settings
 * folders, MCP client configs, agents' hook settings, git hook runners' configs (pre-commit,
 * lefthook, husky, whose v9 runs `.husky/pre-commit` through `.husky/_`). A confined command may
 * read them but never write or create them; the user grants a write by approving it. An entry may lie
 * in a folder (`.config/lefthook.yml`): while that folder is missing, it stands in for the entry.
 */
export const DEFAULT_RUN_LATER_FILES = [
  ".git/", ".envrc", ".vscode/", ".idea/", ".mcp.json", ".claude/", ".cursor/", ".gemini/", ".zed/", ".roo/", ".kiro/", ".continue/", ".windsurf/", ".pre-commit-config.yaml", ".hg/", ".jj/",
  "lefthook.yml", ".lefthook.yml", "lefthook.yaml", ".lefthook.yaml", "lefthook.toml", ".lefthook.toml", "lefthook.json", ".lefthook.json", "lefthook-local.yml", ".lefthook-local.yml", ".config/lefthook.yml",
  ".overcommit.yml", ".husky/", ".huskyrc", ".huskyrc.json", ".huskyrc.js", ".huskyrc.yaml", ".huskyrc.yml", "husky.config.js",
] as const;

/** Whether a run-later entry is a path inside the workspace: no empty, `.` or `..` part. */
export function isRunLaterPath(entry: string): boolean {
  return entry.replace(/\/+$/, "").split("/").every((part) => part !== "" && part !== "." && part !== "..");
}

/** A run-later entry: its name in the workspace, and whether it is a folder (written with a trailing `/`). */
export function runLaterEntry(entry: string): { name: string; folder: boolean } {
  return entry.endsWith("/") ? { name: entry.replace(/\/+$/, ""), folder: true } : { name: entry, folder: false };
}

interface Placeholder {
  workspace: string;
  name: string;
  users: number;
  ino: number;
  folder: boolean;
  /** Its inode change time after this process last marked it held: another process's mark changes it. */
  changedMs: number;
}

/** An empty folder, or an empty file: what a stand-in is, and what may be one another process made. */
function emptyEntry(path: string): { ino: number; folder: boolean; changedMs: number } | null {
  try {
    const info = lstatSync(path);
    if (info.isDirectory() && readdirSync(path).length === 0) return { ino: info.ino, folder: true, changedMs: info.ctimeMs };
    if (info.isFile() && info.size === 0) return { ino: info.ino, folder: false, changedMs: info.ctimeMs };
  } catch {
    // Not there.
  }
  return null;
}

/**
 * Marks an empty entry held: its modification time moves on to `until` (never back), which changes
 * its inode change time too. Returns that change time, or null when the entry is gone.
 */
function markHeld(path: string, until: number): number | null {
  try {
    const info = lstatSync(path);
    lutimesSync(path, info.atime, new Date(Math.max(info.mtimeMs, until)));
    return lstatSync(path).ctimeMs;
  } catch {
    return null;
  }
}

/**
 * The empty stand-ins for run-later files a workspace does not have, while commands run: each is
 * mounted read-only in the sandbox, so nothing can be created there. Made on the first command that
 * needs one and removed when the last of them ends — and then only if still empty, the same entry,
 * and not marked held by anyone since this process last marked it. Every command that stands on a
 * stand-in, in whichever DuckLM process, marks it held (its modification time moves on, which changes
 * its inode change time): so no process removes a stand-in another process's command still stands on
 * (the kernel would take that command's mount away). A stand-in two processes shared is left behind,
 * empty, rather than removed under one of them.
 */
export class RunLaterPlaceholders {
  private readonly held = new Map<string, Placeholder>();

  /**
   * Whether `path` may be a stand-in a command stands on now: one of this process's, or an empty entry
   * (perhaps another process's). Such an entry must be held by every command that binds it.
   */
  mayBeStandIn(path: string): boolean {
    return this.held.has(path) || emptyEntry(path) !== null;
  }

  /**
   * Makes (or shares) the stand-ins for the entries missing from the workspace, marked held until
   * `until` (ms since the epoch, the command's time limit), and marks empty ones that are there
   * (perhaps another process's stand-ins) as well. Returns the stand-ins made here to mount over, and
   * a release to call when the command has ended.
   */
  hold(workspace: string, entries: ReadonlyArray<{ name: string; folder: boolean }>, until: number): { paths: string[]; release: () => void } {
    const taken: string[] = [];
    for (const { name, folder } of entries) {
      const path = join(workspace, name);
      // Everything below goes through the parent folder's descriptor, opened part by part without
      // following a link: a task that swaps a folder of the workspace for a link to the host while
      // this runs makes nothing (and marks nothing) outside the workspace.
      const made = withFolderWithin(workspace, dirname(name), false, (parentFd) => {
        const at = throughFolder(parentFd, basename(name));
        const existing = this.held.get(path);
        if (existing) {
          existing.users += 1;
          existing.changedMs = markHeld(at, until) ?? existing.changedMs;
          return true;
        }
        try {
          if (folder) mkdirSync(at, { mode: 0o755 });
          else closeSync(openSync(at, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW, 0o644));
        } catch {
          // There already (the caller binds it read-only): if it is empty, it may be another's stand-in.
          if (emptyEntry(at)) markHeld(at, until);
          return false;
        }
        const changedMs = markHeld(at, until);
        if (changedMs === null) return false;
        this.held.set(path, { workspace, name, users: 1, ino: lstatSync(at).ino, folder, changedMs });
        return true;
      });
      if (made) taken.push(path);
    }
    let released = false;
    return {
      paths: taken,
      release: () => {
        if (released) return;
        released = true;
        for (const path of taken) this.releaseOne(path);
      },
    };
  }

  private releaseOne(path: string): void {
    const placeholder = this.held.get(path);
    if (!placeholder) return;
    placeholder.users -= 1;
    if (placeholder.users > 0) return;
    this.held.delete(path);
    withFolderWithin(placeholder.workspace, dirname(placeholder.name), false, (parentFd) => {
      const at = throughFolder(parentFd, basename(placeholder.name));
      const now = emptyEntry(at);
      // Written meanwhile (a file tool the user allowed), replaced, or marked held by another process since: it stays.
      if (!now || now.ino !== placeholder.ino || now.folder !== placeholder.folder || now.changedMs !== placeholder.changedMs) return;
      try {
        if (now.folder) rmdirSync(at);
        else unlinkSync(at);
      } catch {
        // Gone already, or no longer ours to remove.
      }
    });
  }
}
