import { closeSync, constants, existsSync, fstatSync, openSync, readdirSync, readSync, realpathSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";

function looksLikeBareRepository(dir: string): boolean {
  return existsSync(join(dir, "HEAD")) && existsSync(join(dir, "objects")) && existsSync(join(dir, "refs"));
}

/**
 * git obeys the configuration of the repository it finds, which runs programs (diff drivers,
 * fsmonitor, pagers, filters). A git command runs unasked only in the workspace's own repository
 * (or one above it), whose `.git` no confined task can write; a repository inside the workspace (a
 * nested `.git`, a folder that looks like a bare repository), which a task could have made, makes it
 * a question. What an earlier command of the same line may create is judged by the caller.
 */
export function repositoryProblem(cwds: ReadonlyArray<string | null>, workspace: string): string | null {
  for (const cwd of cwds) {
    if (cwd === null) return "it runs where an earlier cd went, which is only known at run time";
    if (cwd !== workspace && !cwd.startsWith(`${workspace}/`)) return `it runs in ${cwd}, outside the workspace, where a task may have made a repository`;
    for (let dir = cwd; dir === workspace || dir.startsWith(`${workspace}/`); dir = dirname(dir)) {
      const dotGit = join(dir, ".git");
      if (dir !== workspace && (existsSync(dotGit) || looksLikeBareRepository(dir))) {
        return `${dir} holds a git repository of its own, whose configuration a task could have written`;
      }
      if (dir === workspace) {
        if (!existsSync(dotGit) && looksLikeBareRepository(dir)) return "the workspace looks like a bare repository, whose configuration a task could have written";
        break;
      }
    }
  }
  return null;
}

/** The git directory a `.git` entry leads to: itself, or where a `.git` file (`gitdir: …`) points. */
function gitDirectoryOf(dotGit: string): string | null {
  const info = statSync(dotGit, { throwIfNoEntry: false });
  if (!info) return null;
  if (info.isDirectory()) return dotGit;
  const pointer = /^gitdir:\s*(.+?)\s*$/m.exec(readTextOrEmpty(dotGit));
  if (!pointer) return null;
  return isAbsolute(pointer[1]!) ? pointer[1]! : resolve(dirname(dotGit), pointer[1]!);
}

/** Larger than any git config or pointer file anyone writes by hand. */
const MAX_READ_BYTES = 1024 * 1024;

/**
 * A small regular file's text, else "". An included config may lie in the workspace, where a task
 * can swap it for a FIFO (a read that never ends), /dev/zero or a huge file: none of those is read.
 */
function readTextOrEmpty(path: string): string {
  let fd: number | null = null;
  try {
    // Opened without blocking (a FIFO's open would wait for a writer), then judged by what was opened.
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
    const info = fstatSync(fd);
    if (!info.isFile() || info.size > MAX_READ_BYTES) return "";
    const bytes = Buffer.alloc(info.size);
    const read = readSync(fd, bytes, 0, info.size, 0);
    return bytes.subarray(0, read).toString("utf8");
  } catch {
    return "";
  } finally {
    if (fd !== null) closeSync(fd);
  }
}

function inside(workspace: string, path: string): boolean {
  return path === workspace || path.startsWith(`${workspace}/`);
}

/**
 * Where a `.git` file leads inside the workspace: the git directory it names (`--separate-git-dir`,
 * a worktree's) and that directory's common one. Written there, a task's settings would be obeyed
 * by the user's git as surely as through `.git` itself.
 */
export function pointedRepositories(dotGit: string, workspace: string): string[] {
  const info = statSync(dotGit, { throwIfNoEntry: false });
  if (!info?.isFile()) return [];
  const gitDir = gitDirectoryOf(dotGit);
  if (!gitDir) return [];
  const common = readTextOrEmpty(join(gitDir, "commondir")).trim();
  const paths = [gitDir, ...(common ? [isAbsolute(common) ? common : resolve(gitDir, common)] : [])];
  return paths.filter((path) => inside(workspace, path) && existsSync(path));
}

/** Folders of `.git/modules` looked through for submodules' configs. */
const MAX_MODULE_FOLDERS = 512;

/**
 * Every config file git reads for the repository a `.git` entry stands for, wherever it lies: its git
 * directory's (a `.git` file points to it, a worktree's lies in the main repository), the common
 * directory's, and those of its submodules under `modules/`.
 */
export function repositoryConfigFiles(dotGit: string): string[] {
  const gitDir = gitDirectoryOf(dotGit);
  if (!gitDir) return [];
  const common = readTextOrEmpty(join(gitDir, "commondir")).trim();
  const dirs = [gitDir, ...(common ? [isAbsolute(common) ? common : resolve(gitDir, common)] : [])];
  const configs = dirs.flatMap((dir) => [join(dir, "config"), join(dir, "config.worktree")]);
  const queue = dirs.map((dir) => join(dir, "modules"));
  for (let searched = 0; queue.length > 0 && searched < MAX_MODULE_FOLDERS; searched += 1) {
    const dir = queue.shift()!;
    let entries: import("node:fs").Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      continue;
    }
    for (const entry of entries) {
      if (entry.isFile() && (entry.name === "config" || entry.name === "config.worktree")) configs.push(join(dir, entry.name));
      else if (entry.isDirectory() && !["objects", "refs", "logs", "hooks", "info"].includes(entry.name)) queue.push(join(dir, entry.name));
    }
  }
  return [...new Set(configs)].filter((path) => existsSync(path));
}

/** How deep `[include]` files are followed; git itself stops at 10. */
const MAX_INCLUDE_DEPTH = 10;

/** A config value as git reads it: quotes removed, `\\`, `\"` and `\n` unescaped, unquoted comments and trailing blanks dropped. */
function configValue(raw: string): string {
  let value = "";
  let quoted = false;
  for (let i = 0; i < raw.length; i += 1) {
    const char = raw[i]!;
    if (char === "\\" && i + 1 < raw.length) {
      const next = raw[(i += 1)]!;
      value += next === "n" ? "\n" : next === "t" ? "\t" : next;
    } else if (char === '"') quoted = !quoted;
    else if (!quoted && (char === "#" || char === ";")) break;
    else value += char;
  }
  return value.trim();
}

/**
 * The `core.hooksPath` values a git config file sets, and the files it includes, read as git reads
 * them: a `[section] key = value` on one line, values continued with a backslash, `[include]` and
 * `[includeIf]` paths (followed whatever their condition, since the condition may hold). Lenient
 * where git would refuse the file: a folder named by a line git ignores is protected all the same.
 */
function hooksPathsIn(file: string, depth: number, seen: Set<string>, included?: string[]): string[] {
  if (depth > MAX_INCLUDE_DEPTH || seen.has(file)) return [];
  seen.add(file);
  if (depth > 0) included?.push(file);
  const text = readTextOrEmpty(file).replace(/\\\r?\n/g, "");
  const found: string[] = [];
  let section = "";
  for (const raw of text.split(/\r?\n/)) {
    let line = raw.trim();
    const header = /^\[\s*([^\]\s"]+)(?:\s+"[^"]*")?\s*\]/.exec(line);
    if (header) {
      section = header[1]!.toLowerCase();
      line = line.slice(header[0].length).trim();
    }
    const entry = /^([A-Za-z][A-Za-z0-9-]*)\s*=(.*)$/.exec(line);
    if (!entry) continue;
    const key = entry[1]!.toLowerCase();
    const value = configValue(entry[2]!);
    if (section === "core" && key === "hookspath" && value) found.push(value);
    if ((section === "include" || section === "includeif") && key === "path" && value) {
      const target = value.replace(/^~(?=\/)/, homedir());
      found.push(...hooksPathsIn(isAbsolute(target) ? target : resolve(dirname(file), target), depth + 1, seen, included));
    }
  }
  return found;
}

/** The user's own git configs, read by every git command: a relative `core.hooksPath` there is taken inside the repository. */
function userGitConfigs(): string[] {
  const xdg = process.env.XDG_CONFIG_HOME || join(homedir(), ".config");
  return [join(homedir(), ".gitconfig"), join(xdg, "git", "config")];
}

/**
 * What of the workspace's repository lives outside a folder named `.git` and must be as protected:
 * the git directory a `.git` file points to, and a hooks folder named in `core.hooksPath` (husky's
 * `.husky/`), where git runs what it finds at the user's next commit: set in the repository's config,
 * in a file it includes (which may lie in the workspace), or, as a relative path, in the user's own
 * config. Read fresh each time, from the workspace's real path (file tools compare real paths).
 */
export function workspaceRepositoryPaths(givenWorkspace: string): string[] {
  return workspaceRepositoryEntries(givenWorkspace).map((entry) => entry.path);
}

/**
 * `workspaceRepositoryPaths`, each with whether it is a folder (a hooks folder, a git directory) or
 * a file (an included config): one that is missing is protected by a stand-in of its kind.
 */
export function workspaceRepositoryEntries(givenWorkspace: string, nestedRoots: readonly string[] = []): Array<{ path: string; folder: boolean }> {
  let workspace = givenWorkspace;
  try {
    workspace = realpathSync(givenWorkspace);
  } catch {
    // A workspace that cannot be resolved is refused by the tools themselves.
  }
  const folders: string[] = [];
  const files: string[] = [];
  // The workspace's own repository and every one nested in it: the user's git in any of them obeys what its config names.
  const roots = [...new Set([workspace, ...nestedRoots.map((root) => (root.startsWith(`${givenWorkspace}/`) ? join(workspace, root.slice(givenWorkspace.length)) : root))])];
  for (const root of roots) {
    const dotGit = join(root, ".git");
    const gitDir = gitDirectoryOf(dotGit);
    if (!gitDir) continue;
    folders.push(...pointedRepositories(dotGit, workspace));
    const common = readTextOrEmpty(join(gitDir, "commondir")).trim();
    const configs = [join(gitDir, "config"), ...(common ? [join(isAbsolute(common) ? common : resolve(gitDir, common), "config")] : []), ...userGitConfigs()];
    const seen = new Set<string>();
    const included: string[] = [];
    for (const config of configs) {
      for (const value of hooksPathsIn(config, 0, seen, included)) {
        // A relative hooks path is taken from the top of the repository's working tree, where its hooks run.
        const folder = resolve(root, value.replace(/^~(?=\/)/, homedir()));
        if (inside(workspace, folder)) folders.push(folder);
      }
    }
    // A config file the repository includes from inside the workspace is obeyed as its own config is.
    for (const file of included) if (inside(workspace, file)) files.push(file);
  }
  // Named both ways when the workspace was given through a link: the sandbox binds the path as given.
  const asGiven = (paths: string[]) => (workspace === givenWorkspace ? [] : paths.map((path) => join(givenWorkspace, path.slice(workspace.length))));
  const entries = new Map<string, boolean>();
  for (const path of [...folders, ...asGiven(folders)]) entries.set(path, true);
  for (const path of [...files, ...asGiven(files)]) entries.set(path, false);
  return [...entries].map(([path, folder]) => ({ path, folder }));
}
