import { existsSync, readFileSync, statSync } from "node:fs";
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

function readTextOrEmpty(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
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

/**
 * What of the workspace's repository lives outside a folder named `.git` and must be as protected:
 * the git directory a `.git` file points to, and a hooks folder named in `core.hooksPath` (husky's
 * `.husky/`), where git runs what it finds at the user's next commit. Read fresh each time.
 */
export function workspaceRepositoryPaths(workspace: string): string[] {
  const dotGit = join(workspace, ".git");
  const gitDir = gitDirectoryOf(dotGit);
  if (!gitDir) return [];
  const folders = [...pointedRepositories(dotGit, workspace)];
  let section = "";
  const common = readTextOrEmpty(join(gitDir, "commondir")).trim();
  const configs = [join(gitDir, "config"), ...(common ? [join(isAbsolute(common) ? common : resolve(gitDir, common), "config")] : [])];
  for (const text of configs.map(readTextOrEmpty)) {
    for (const raw of text.split(/\r?\n/)) {
      const line = raw.trim();
      const header = /^\[\s*([^\]\s"]+)/.exec(line);
      if (header) section = header[1]!.toLowerCase();
      const entry = /^hookspath\s*=\s*"?([^"#;]+?)"?\s*(?:[#;].*)?$/i.exec(line);
      if (section === "core" && entry) {
        const folder = resolve(workspace, entry[1]!.replace(/^~(?=\/)/, homedir()));
        if (inside(workspace, folder)) folders.push(folder);
      }
    }
  }
  return [...new Set(folders)];
}
