import { execFile, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, lstatSync, mkdirSync, readdirSync, rmdirSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { DuckError, ErrorCode } from "../errors/duck-error.js";

/** One file that a restore changes: written back as it was, or removed (it did not exist then). */
export interface CheckpointChange {
  path: string;
  change: "restored" | "removed" | "rewritten";
}

/** A snapshot of the workspace taken before a step ran. */
export interface Checkpoint {
  /** The `tool-called` event it was taken for (its seq in the task's events). */
  seq: number;
  commit: string;
  /** When it was taken (ISO). */
  at: string;
  /** What the snapshot said of itself: step, attempt, tool. */
  label: string;
}

export interface CheckpointSettings {
  /** Files larger than this are not kept (a restore leaves them as they are). */
  maxFileBytes: number;
  /**
   * DuckLM's own folders (its home, with these checkpoints and its database; the user's config): never
   * kept nor touched by a restore, wherever a workspace that holds them (a home given as one) has them.
   */
  excluded?: readonly string[];
}

/** How long git may take for one call before the snapshot is given up. */
const GIT_CALL_TIMEOUT_MS = 120_000;
const REF_ROOT = "refs/ducklm/tasks";
/**
 * What a snapshot leaves out: what the workspace's `.gitignore` files say, except those files and the
 * attribute files themselves (patterns given on the command line come first): a restore must be able
 * to put back the rules it reads, even where a task wrote rules that ignore themselves.
 */
const WORKSPACE_RULES = ["--exclude-per-directory=.gitignore", "--exclude=!.gitignore", "--exclude=!.gitattributes"];
/** A checkpoint's seq is zero-padded in its ref name, so that refs sort in event order. */
const SEQ_DIGITS = 10;

/**
 * Snapshots of workspaces in repositories of DuckLM's own (`<home>/checkpoints/<id>`), never the
 * user's `.git`: git does the incremental work (its index remembers what it hashed), honours the
 * workspace's `.gitignore`, and its checkout refuses to write through a link in a path. The
 * workspace's own attributes and the user's git config are not used, so a snapshot holds the bytes
 * as they were and nothing of the task's choosing runs.
 */
export class WorkspaceCheckpoints {
  private readonly root: string;
  private readonly git: string | null;
  /** One git operation at a time per repository in this process (git's index lock refuses a second). */
  private readonly turns = new Map<string, Promise<unknown>>();
  /** The pruning under way, if any (it runs in the background at start-up). */
  private pruning: Promise<unknown> | null = null;

  constructor(home: string, private readonly settings: CheckpointSettings) {
    this.root = join(home, "checkpoints");
    this.git = findGit();
  }

  /** Why snapshots cannot be taken here, or null when they can. */
  unavailable(): string | null {
    return this.git ? null : "git is not installed, and DuckLM keeps the workspace's checkpoints with it";
  }

  /**
   * Takes a snapshot of `workspace` for the task's step whose `tool-called` event is `seq`. Returns
   * the commit and the files left out for their size.
   */
  snapshot(workspace: string, taskId: string, seq: number, label: string): Promise<{ commit: string; leftOut: string[] }> {
    return this.inTurn(workspace, async (repo) => {
      const taken = await this.commitWorkspace(repo, workspace, label);
      await this.setRefs(repo, taken.commit, refOf(taskId, seq));
      return taken;
    });
  }

  /** Resolves once no snapshot, restore or read-ahead of this process is under way. */
  async settled(): Promise<void> {
    while (this.turns.size > 0 || this.pruning) await Promise.allSettled([...this.turns.values(), this.pruning]);
  }

  /** Whether the workspace has been snapshotted before (its first snapshot reads every file). */
  hasSnapshots(workspace: string): boolean {
    return existsSync(join(this.repositoryOf(workspace), "HEAD"));
  }

  /**
   * Reads the workspace into the repository's index ahead of its first snapshot, so that the snapshot
   * before a step only looks at what changed since.
   */
  prepare(workspace: string): Promise<void> {
    return this.inTurn(workspace, async (repo) => {
      const taken = await this.commitWorkspace(repo, workspace, "read ahead");
      await this.run(repo, null, ["update-ref", "refs/ducklm/last", taken.commit]);
    });
  }

  /** The task's checkpoints, oldest first. */
  list(workspace: string, taskId: string): Promise<Checkpoint[]> {
    const repo = this.repositoryOf(workspace);
    if (!existsSync(repo)) return Promise.resolve([]);
    return this.inTurn(workspace, async () => {
      const out = await this.run(repo, workspace, ["for-each-ref", "--sort=refname", "--format=%(refname)%00%(objectname)%00%(committerdate:iso-strict)%00%(contents:subject)", `${REF_ROOT}/${taskId}/`]);
      return out
        .split("\n")
        .filter(Boolean)
        .map((line) => {
          const [ref = "", commit = "", at = "", label = ""] = line.split("\0");
          return { seq: Number(ref.slice(ref.lastIndexOf("/") + 1)), commit, at, label };
        });
    });
  }

  /**
   * Puts the workspace back as `commit` holds it. The state it is in now is kept first (`savedAs`),
   * so a restore can itself be undone. With `dryRun`, only says what would change.
   */
  restore(workspace: string, taskId: string, commit: string, options: { dryRun?: boolean } = {}): Promise<{ savedAs: string | null; changes: CheckpointChange[] }> {
    return this.inTurn(workspace, async (repo) => {
      const now = await this.commitWorkspace(repo, workspace, `before restoring ${commit.slice(0, 12)}`);
      const changes = (await this.differences(repo, workspace, now.commit, commit)).filter((change) => !this.isExcluded(workspace, change.path));
      if (options.dryRun) return { savedAs: null, changes };
      await this.setRefs(repo, now.commit, `refs/ducklm/restores/${taskId}/${String(Date.now()).padStart(15, "0")}`);
      const removed = changes.filter((change) => change.change === "removed").map((change) => change.path);
      for (const path of removed) removeInside(workspace, path);
      if (removed.length > 0) await this.run(repo, workspace, ["update-index", "--force-remove", "-z", "--stdin"], removed.map((path) => `${path}\0`).join(""));
      const written = changes.filter((change) => change.change !== "removed").map((change) => change.path);
      // git writes each file as the commit holds it, replacing a link or folder in its way, never writing through one.
      if (written.length > 0) await this.run(repo, workspace, ["checkout", "--no-overlay", commit, "--pathspec-from-file=-", "--pathspec-file-nul"], written.map((path) => `${path}\0`).join(""));
      // With the ignore rules back as they were, what they do not ignore and the checkpoint does not
      // hold was made since (hidden until now by rules the step wrote): it goes too.
      const hidden = (await this.run(repo, workspace, ["ls-files", "-z", "--others", ...WORKSPACE_RULES, ...this.excludedWithin(workspace)])).split("\0").filter((path) => path && !path.endsWith("/"));
      for (const path of hidden) {
        if (this.isExcluded(workspace, path)) continue;
        const info = lstatSync(join(workspace, path), { throwIfNoEntry: false });
        if (!info || (info.isFile() && info.size > this.settings.maxFileBytes)) continue;
        removeInside(workspace, path);
        changes.push({ path, change: "removed" });
      }
      return { savedAs: now.commit, changes };
    });
  }

  /** The state the task's latest restore replaced, or null when it was never restored (or that was pruned). */
  lastReplaced(workspace: string, taskId: string): Promise<string | null> {
    const repo = this.repositoryOf(workspace);
    if (!existsSync(repo)) return Promise.resolve(null);
    return this.inTurn(workspace, async () => {
      const out = await this.run(repo, workspace, ["for-each-ref", "--sort=-refname", "--count=1", "--format=%(objectname)", `refs/ducklm/restores/${taskId}/`]);
      return out.trim() || null;
    });
  }

  /** Drops checkpoints older than `keepDays`, then the objects only they held. */
  prune(keepDays: number): Promise<number> {
    const work = this.pruneNow(keepDays);
    this.pruning = work.catch(() => undefined).finally(() => {
      if (this.pruning === tracked) this.pruning = null;
    });
    const tracked = this.pruning;
    return work;
  }

  private async pruneNow(keepDays: number): Promise<number> {
    if (!this.git || !existsSync(this.root)) return 0;
    const cutoff = Date.now() - keepDays * 86_400_000;
    let dropped = 0;
    for (const name of readdirSync(this.root)) {
      const repo = join(this.root, name);
      const drop: string[] = [];
      const out = await this.run(repo, null, ["for-each-ref", "--format=%(refname) %(committerdate:unix)", "refs/ducklm/"]);
      for (const line of out.split("\n").filter(Boolean)) {
        const [ref = "", when = "0"] = line.split(" ");
        if (Number(when) * 1000 < cutoff) drop.push(ref);
      }
      if (drop.length === 0) continue;
      await this.run(repo, null, ["update-ref", "--stdin"], drop.map((ref) => `delete ${ref}\n`).join(""));
      await this.run(repo, null, ["gc", "--prune=now", "--quiet"]);
      dropped += drop.length;
    }
    return dropped;
  }

  /** DuckLM's own folders inside the workspace, relative to it. */
  private excludedInside(workspace: string): string[] {
    const root = resolve(workspace);
    return (this.settings.excluded ?? []).map((path) => relative(root, resolve(path))).filter((inside) => inside !== "" && !inside.startsWith("..") && !isAbsolute(inside));
  }

  /** What the walk of the workspace leaves out: DuckLM's own folders, anchored at the workspace's top. */
  private excludedWithin(workspace: string): string[] {
    return this.excludedInside(workspace).map((inside) => `--exclude=/${inside.split(sep).join("/")}/`);
  }

  private isExcluded(workspace: string, path: string): boolean {
    const excluded = this.excludedInside(workspace);
    return excluded.some((inside) => path === inside || path.startsWith(`${inside}/`));
  }

  repositoryOf(workspace: string): string {
    return join(this.root, createHash("sha256").update(resolve(workspace)).digest("hex").slice(0, 24));
  }

  private async inTurn<T>(workspace: string, work: (repo: string) => Promise<T>): Promise<T> {
    if (!this.git) throw new DuckError(ErrorCode.UndoUnavailable, this.unavailable()!);
    const repo = this.repositoryOf(workspace);
    const before = this.turns.get(repo) ?? Promise.resolve();
    const mine = before.catch(() => undefined).then(() => work(repo));
    this.turns.set(repo, mine);
    try {
      return await mine;
    } finally {
      if (this.turns.get(repo) === mine) this.turns.delete(repo);
    }
  }

  /** Brings the repository's index to the workspace as it is and commits it; the last commit is its parent. */
  private async commitWorkspace(repo: string, workspace: string, label: string): Promise<{ commit: string; leftOut: string[] }> {
    if (!existsSync(join(repo, "HEAD"))) await this.create(repo, workspace);
    // What changed since the last snapshot, by git's look at sizes and times; ignored files are not listed.
    const listed = await this.run(repo, workspace, ["ls-files", "-z", "--others", "--modified", "--deleted", ...WORKSPACE_RULES, ...this.excludedWithin(workspace)]);
    const gone = new Set<string>();
    const keep = new Set<string>();
    const leftOut: string[] = [];
    for (const path of listed.split("\0").filter(Boolean)) {
      // A folder listed whole is a repository of its own inside the workspace: its files are its own git's.
      if (path.endsWith("/")) continue;
      if (this.isExcluded(workspace, path)) {
        gone.add(path);
        continue;
      }
      // Behind a link (a folder replaced by one), a file is not the workspace's: it is gone from it.
      const info = throughFoldersOnly(workspace, path) ? lstatSync(join(workspace, path), { throwIfNoEntry: false }) : undefined;
      // A fifo, socket or device holds nothing to keep (and git would refuse it): as if it were not there.
      if (!info || !(info.isFile() || info.isSymbolicLink())) gone.add(path);
      else if (info.isFile() && info.size > this.settings.maxFileBytes) {
        // Not kept as it is now; the version kept before stays restorable (it counts as gone from here).
        leftOut.push(path);
        gone.add(path);
      } else keep.add(path);
    }
    // Removals first: a folder's files leave before a file or link of the same name comes.
    if (gone.size > 0) await this.run(repo, workspace, ["update-index", "--force-remove", "-z", "--stdin"], [...gone].map((path) => `${path}\0`).join(""));
    if (keep.size > 0) await this.run(repo, workspace, ["update-index", "--add", "--remove", "-z", "--stdin"], [...keep].map((path) => `${path}\0`).join(""));
    const tree = (await this.run(repo, workspace, ["write-tree"])).trim();
    const parent = (await this.run(repo, workspace, ["rev-parse", "--verify", "--quiet", "refs/ducklm/last"], undefined, true)).trim();
    const commit = (await this.run(repo, workspace, ["commit-tree", tree, ...(parent ? ["-p", parent] : []), "-m", label])).trim();
    return { commit, leftOut };
  }

  /** Names a commit by `ref` and makes it the parent of the next one, in one transaction. */
  private async setRefs(repo: string, commit: string, ref: string): Promise<void> {
    await this.run(repo, null, ["update-ref", "--stdin"], `update refs/ducklm/last ${commit}\nupdate ${ref} ${commit}\n`);
  }

  private async create(repo: string, workspace: string): Promise<void> {
    mkdirSync(repo, { recursive: true, mode: 0o700 });
    await this.run(repo, null, ["init", "--quiet", "--bare", repo]);
    // The workspace's own attributes could turn on line-ending conversion or filters: the bytes are kept as they are.
    mkdirSync(join(repo, "info"), { recursive: true });
    writeFileSync(join(repo, "info", "attributes"), "* -text -filter -ident -working-tree-encoding -diff -merge\n");
    await this.run(repo, null, ["config", "ducklm.workspace", resolve(workspace)]);
  }

  /** What putting `target` in place of `now` changes, file by file. */
  private async differences(repo: string, workspace: string, now: string, target: string): Promise<CheckpointChange[]> {
    const out = await this.run(repo, workspace, ["diff-tree", "-r", "-z", "--no-renames", "--name-status", now, target]);
    const fields = out.split("\0").filter(Boolean);
    const changes: CheckpointChange[] = [];
    for (let i = 0; i + 1 < fields.length; i += 2) {
      const status = fields[i]!;
      const path = fields[i + 1]!;
      changes.push({ path, change: status === "A" ? "restored" : status === "D" ? "removed" : "rewritten" });
    }
    return changes;
  }

  private run(repo: string, workspace: string | null, args: string[], input?: string, allowFailure = false): Promise<string> {
    const git = this.git!;
    return new Promise((done, fail) => {
      const child = execFile(
        git,
        [
          // Nothing of the user's or the workspace's configuration runs: no hooks, no fsmonitor, no pager.
          "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.autocrlf=false", "-c", "core.symlinks=true",
          "-c", "core.quotePath=false", "-c", "gc.auto=0", "-c", "maintenance.auto=false", "-c", "core.untrackedCache=true",
          "-c", "user.name=DuckLM", "-c", "user.email=ducklm@localhost",
          `--git-dir=${repo}`,
          ...(workspace ? [`--work-tree=${workspace}`] : []),
          ...args,
        ],
        {
          cwd: workspace ?? repo,
          encoding: "utf8",
          maxBuffer: 256 * 1024 * 1024,
          timeout: GIT_CALL_TIMEOUT_MS,
          env: {
            PATH: process.env.PATH ?? "/usr/bin:/bin",
            HOME: repo,
            LC_ALL: "C",
            GIT_CONFIG_NOSYSTEM: "1",
            GIT_CONFIG_GLOBAL: "/dev/null",
            GIT_TERMINAL_PROMPT: "0",
            GIT_LITERAL_PATHSPECS: "1",
            GIT_COMMITTER_NAME: "DuckLM",
            GIT_COMMITTER_EMAIL: "ducklm@localhost",
          },
        },
        (error, stdout, stderr) => {
          if (error && !allowFailure) fail(new DuckError(ErrorCode.UndoUnavailable, `git ${args[0]} failed for the checkpoints of ${workspace ?? repo}: ${(stderr || error.message).trim().slice(0, 500)}`, { cause: error }));
          else done(error ? "" : stdout);
        },
      );
      if (input !== undefined) child.stdin?.end(input);
      else child.stdin?.end();
    });
  }
}

function refOf(taskId: string, seq: number): string {
  return `${REF_ROOT}/${taskId}/${String(seq).padStart(SEQ_DIGITS, "0")}`;
}

function findGit(): string | null {
  for (const dir of (process.env.PATH ?? "/usr/bin:/bin").split(":")) {
    // Only absolute folders: a relative one in PATH would find a git the workspace holds.
    if (!dir.startsWith("/")) continue;
    const candidate = join(dir, "git");
    try {
      if (statSync(candidate).isFile()) return spawnSync(candidate, ["--version"]).status === 0 ? candidate : null;
    } catch {
      // Missing, or in a folder this user may not enter: the next one.
    }
  }
  return null;
}

/** Whether every folder on the way to `path` inside the workspace is a real folder, not a link. */
function throughFoldersOnly(workspace: string, path: string): boolean {
  let at = workspace;
  for (const part of path.split("/").slice(0, -1)) {
    at = join(at, part);
    if (!lstatSync(at, { throwIfNoEntry: false })?.isDirectory()) return false;
  }
  return true;
}

/**
 * Removes a file a restore must take away, and the folders it leaves empty, never through a link:
 * every folder on its way must be a real folder of the workspace.
 */
function removeInside(workspace: string, path: string): void {
  if (!throughFoldersOnly(workspace, path)) return;
  const target = join(workspace, path);
  if (relative(workspace, target).startsWith("..") || relative(workspace, target).split(sep).includes("..")) return;
  const info = lstatSync(target, { throwIfNoEntry: false });
  if (!info || info.isDirectory()) return;
  unlinkSync(target);
  for (let folder = dirname(target); folder !== workspace && folder.startsWith(`${workspace}${sep}`); folder = dirname(folder)) {
    try {
      rmdirSync(folder);
    } catch {
      break;
    }
  }
}
