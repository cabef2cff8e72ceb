import { existsSync } from "node:fs";
import { dirname, join } from "node:path";

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
