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

/**
 * The hooks folder the workspace's repository names in `core.hooksPath` when it lies inside the
 * workspace (husky's `.husky/`): git runs what is there at the user's next commit, so it is as
 * protected as `.git` itself. Read fresh each time; empty when there is none.
 */
export function workspaceHookFolders(workspace: string): string[] {
  const gitDir = gitDirectoryOf(join(workspace, ".git"));
  if (!gitDir) return [];
  const folders: string[] = [];
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
        if (folder === workspace || folder.startsWith(`${workspace}/`)) folders.push(folder);
      }
    }
  }
  return folders;
}
