import { spawnSync, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { accessSync, chmodSync, closeSync, constants as fsConstants, existsSync, lstatSync, mkdtempSync, openSync, readdirSync, readlinkSync, realpathSync, renameSync, rmSync, statSync, writeFileSync, type Stats } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { basename, dirname, join, relative } from "node:path";
import type { Duplex, Writable } from "node:stream";
import type { Logger } from "pino";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { pointedRepositories, repositoryConfigFiles, workspaceRepositoryEntries } from "../permissions/git-repository.js";
import { commandEnvironment, type EnvironmentPolicy } from "./command-environment.js";
import { SANDBOX_PROXY_PORT, startNetworkProxy, type NetworkProxy } from "./network-proxy.js";
import { withFolderWithin } from "./folder-walk.js";
import { DEFAULT_RUN_LATER_FILES, RunLaterPlaceholders, runLaterEntry } from "./run-later-files.js";
import { ChannelService, serveSandboxChannel, SUPERVISOR_SOURCE } from "./sandbox-channel.js";
import { commitSettingsOf, maskedConfigOf, rootOnlyPaths, rootSearchFolders } from "./sandbox-masks.js";
import { confinedCommandFilter, seccompSupported } from "./sandbox-seccomp.js";
import { changeableByOtherUsers, runningSandboxes, type SandboxMounts } from "./running-sandboxes.js";

export interface SandboxLaunch {
  file: string;
  args: string[];
  /** The command's whole environment: DuckLM's variables that pass the allow-list, and the sandbox's own (the proxy's address). */
  env: NodeJS.ProcessEnv;
  /**
   * Descriptors from 3 on that the sandbox itself needs: "pipe" for the seccomp filter and DuckLM's
   * channel, then open descriptors of what it binds from the workspace (bound by descriptor, so that
   * a link swapped in after the check cannot redirect the mount).
   */
  extraStdio?: Array<"pipe" | "ignore" | number>;
  /**
   * Called with the process just started: feeds it the filter, serves its channel, and lets go of
   * what the launch held (stand-ins) when it exits.
   */
  attach?(child: ChildProcess): void;
  /**
   * Called once the command has ended: what the sandbox did after it that the command's output must
   * say (a git repository it made, set aside).
   */
  afterExit?(): string[];
}

export interface ShellLaunchOptions {
  workspace: string;
  /** The command may use the network (through the filtering proxy when confined). */
  network: boolean;
  /** Folders a confined command may write besides the workspace. */
  extraWritable?: readonly string[];
  /** Folders a confined command may read although they are hidden otherwise (the sudo relay's shim). */
  extraReadable?: readonly string[];
  /** The sudo relay's socket: served to the command on a port of its own loopback. */
  sudoRelaySocket?: string;
  /** Run-later files (of the sandbox's list) this command may write and create: the user approved it. */
  writableRunLater?: readonly string[];
  /**
   * The most the command may run, enforced beside it (coreutils `timeout`), not by DuckLM's own timer
   * alone: a DuckLM process that is paused (stopped, suspended) cannot stop it, and another process
   * taking its task over must know when it has surely ended.
   */
  timeLimitMs?: number;
}

/** How a shell command is started: confined by bubblewrap, or as a plain `bash -c`. */
export interface ShellSandbox {
  readonly kind: "bwrap" | "none";
  /** What commands run under: confined, unconfined because no sandbox works here, or turned off. */
  readonly confinement: Confinement;
  /** What confinement there is, or why there is none. */
  readonly note: string;
  /** Which of DuckLM's variables reach a command besides the defaults, and which never. */
  readonly environment: EnvironmentPolicy;
  launch(command: string, options: ShellLaunchOptions): Promise<SandboxLaunch>;
  /** Gets ready for commands (searches what it hides): awaited before a command's time limit starts. */
  prepare?(): Promise<void>;
  /** Stops what the sandbox started (the network proxy). */
  dispose(): Promise<void>;
}

/** How shell commands run: in the sandbox, without one (nothing runs unattended), or with confinement turned off. */
export type Confinement = "confined" | "none" | "off";

/** Commands are parsed as bash, so they run in bash (sh where a system has no bash). */
export const SHELL = existsSync("/bin/bash") ? "/bin/bash" : "/bin/sh";

/** coreutils' `timeout`, where the system has it. */
const TIMEOUT_PROGRAM = ["/usr/bin/timeout", "/bin/timeout"].find((path) => existsSync(path)) ?? null;
/** How long after its own time limit a command is killed beside DuckLM (so DuckLM's timer, which says why, comes first). */
export const HARD_LIMIT_MARGIN_MS = 2_000;

/** The first descriptor bubblewrap is given a bind source on (after the filter's 3 and the channel's 4). */
const FIRST_BOUND_FD = 5;

/** The program and arguments that run `argv` killed at `timeLimitMs` (plus the margin) whatever DuckLM's state. */
function limited(argv: string[], timeLimitMs: number | undefined): string[] {
  if (timeLimitMs === undefined || TIMEOUT_PROGRAM === null) return argv;
  return [TIMEOUT_PROGRAM, "--signal=KILL", `${Math.ceil((timeLimitMs + HARD_LIMIT_MARGIN_MS) / 1000)}s`, ...argv];
}

/**
 * Runs its arguments with every descriptor above 2 closed but the ones named: DuckLM may have been
 * started holding descriptors it did not open (a socket of whatever started it), which would pass
 * into every command otherwise.
 */
function withInheritedClosed(argv: string[], keep: readonly number[]): string[] {
  const kept = ["0", "1", "2", ...keep.map(String)].join("|");
  const script = `for f in /proc/self/fd/*; do n=\${f##*/}; case $n in ${kept}) ;; *) eval "exec $n>&-" 2>/dev/null ;; esac; done; exec "$@"`;
  return [SHELL, "-c", script, "ducklm-sandbox", ...argv];
}

/** A plain `bash -c`, with the allow-listed environment all the same. */
export function unconfinedShellWith(environment: EnvironmentPolicy = {}): ShellSandbox {
  return {
    kind: "none",
    confinement: "none",
    note: "shell commands run unconfined",
    environment,
    launch: async (command, options) => {
      const [file, ...args] = limited([SHELL, "-c", command], options.timeLimitMs);
      return { file: file!, args, env: commandEnvironment(process.env, environment) };
    },
    dispose: async () => undefined,
  };
}

export const unconfinedShell: ShellSandbox = unconfinedShellWith();

// Sockets of services that would run a command for the caller outside the sandbox (systemd and
// D-Bus activation, container engines): hidden from every confined command, though none can open a
// Unix socket anyway.
const SERVICE_SOCKET_DIRS = [
  "/run/user", "/run/dbus", "/var/run/dbus", "/run/containerd", "/run/podman", "/run/systemd/private", "/run/incus", "/run/libvirt", "/var/run/libvirt",
  "/run/crio", "/run/k3s", "/run/buildkit", "/run/tailscale", "/var/run/tailscale", "/run/lxd", "/var/snap/lxd/common/lxd",
];
const SERVICE_SOCKET_FILES = ["/run/docker.sock", "/var/run/docker.sock", "/run/snapd.socket", "/var/lib/lxd/unix.socket", "/var/lib/incus/unix.socket", "/run/containerd/containerd.sock"];

/**
 * What a home that is, or lies in, the workspace keeps read-only, and a missing one impossible to
 * make: what the user's shell, git and toolchains run or read (a trailing `/` for a folder).
 */
const HOME_STARTUP_FILES = [".bashrc", ".bash_profile", ".bash_login", ".profile", ".bash_logout", ".zshrc", ".zprofile", ".zshenv", ".zlogin", ".zlogout", ".inputrc", ".config/fish/", ".config/git/", ".gitconfig", ".npmrc", ".local/bin/"];
/** Names of configs in visible toolchains that may hold a registry token or a password: shown with it masked. */
const TOOLCHAIN_CONFIG_NAMES = new Set(["config.toml", "config", "npmrc", ".npmrc", "pip.conf", "pip.ini", ".pypirc", "settings.xml", "gradle.properties", ".yarnrc", ".yarnrc.yml", "credentials", "credentials.toml"]);
/** Bounds on the masked copies made before each command (a task could plant repositories by the thousand): past them, a config with a credential is hidden. */
const MAX_CONFIGS_MASKED = 64;
/** A home given as the workspace: how many of its top-level folders and files stay writable (each is a mount). */
const MAX_HOME_ENTRIES_WRITABLE = 512;
const MAX_MASKED_BYTES = 4 * 1024 * 1024;
/** /proc's files that only root may read; hidden when DuckLM runs as root (the kernel sees root's uid). */
const ROOT_ONLY_PROC_FILES = ["/proc/slabinfo", "/proc/vmallocinfo", "/proc/timer_list", "/proc/kallsyms", "/proc/sched_debug", "/proc/pagetypeinfo", "/proc/kpagecount", "/proc/kpageflags", "/proc/kpagecgroup", "/proc/iomem", "/proc/ioports", "/proc/keys", "/proc/key-users"];

/**
 * The configs inside the visible toolchain folders that may hold credentials (nvm's global npmrc,
 * pyenv's pip.conf, cargo's config): found by name, at most a few levels down, once a minute.
 */
class ToolchainConfigs {
  private found: string[] = [];
  private key = "";
  private foundAt = 0;

  current(folders: readonly string[]): string[] {
    const key = folders.join("\0");
    if (key === this.key && Date.now() - this.foundAt < ROOT_ONLY_REFRESH_MS) return this.found;
    this.key = key;
    this.foundAt = Date.now();
    this.found = [];
    for (const folder of folders) {
      const queue: Array<[string, number]> = [[folder, 0]];
      for (let searched = 0; queue.length > 0 && searched < 2_000; searched += 1) {
        const [dir, level] = queue.shift()!;
        let entries: import("node:fs").Dirent[];
        try {
          entries = readdirSync(dir, { withFileTypes: true });
        } catch {
          continue;
        }
        for (const entry of entries) {
          if (entry.isFile() && TOOLCHAIN_CONFIG_NAMES.has(entry.name)) this.found.push(join(dir, entry.name));
          else if (entry.isDirectory() && level < 5 && !["node_modules", "lib", "include", "share", "registry", "toolchains", "caches"].includes(entry.name)) queue.push([join(dir, entry.name), level + 1]);
        }
      }
    }
    return this.found;
  }
}

function realOrNull(path: string): string | null {
  try {
    return realpathSync(path);
  } catch {
    return null;
  }
}

/** Whether `path` is its own real path (no part of it a link) and lies in `folder`. */
function realInside(path: string, folder: string): boolean {
  const real = realOrNull(path);
  return real === path && (real === folder || real.startsWith(`${folder}/`));
}

/** Whether a path that may not exist yet would be made in `folder`: its deepest existing part is real and there. */
function creatableInside(path: string, folder: string): boolean {
  let existing = path;
  while (!lstatSync(existing, { throwIfNoEntry: false })) {
    const parent = dirname(existing);
    if (parent === existing) return false;
    existing = parent;
  }
  return realInside(existing, folder) && (existing === path || statSync(existing).isDirectory());
}

/** What a repository a command made is renamed to: git no longer finds it, and nothing of it is lost. */
export const SET_ASIDE_SUFFIX = ".set-aside-by-ducklm";

/**
 * Renames every git repository that appeared in the workspace while a command ran (a `.git` folder
 * or file, a bare repository): the sandbox cannot stop a command from making one below the top,
 * and the user's own git there (a prompt, an editor) would run what its config or hooks say,
 * outside any sandbox. Returns what to tell the task. Only real folders of the workspace are walked
 * and renamed; a search that cannot be complete renames nothing and says so.
 */
function setAsideRepositoriesMade(workspace: string, before: ReadonlySet<string>, git: GitRunner | null, logger: Logger | undefined): string[] {
  let after: { gitEntries: string[]; bareRepositories: string[] };
  try {
    after = repositoriesIn(workspace, git);
  } catch (error) {
    return [`[DuckLM could not look for git repositories the command made: ${(error as Error).message}]`];
  }
  const isNew = (path: string) => !before.has(path) && path !== join(workspace, ".git") && realInside(dirname(path), workspace);
  // A `.git` is set aside whole; a bare repository loses its HEAD, without which git takes it for a folder.
  const made = [...after.gitEntries.filter(isNew), ...after.bareRepositories.filter(isNew).map((bare) => join(bare, "HEAD"))];
  const notes: string[] = [];
  for (const path of made) {
    const taken = lstatSync(`${path}${SET_ASIDE_SUFFIX}`, { throwIfNoEntry: false }) !== undefined;
    const aside = `${path}${SET_ASIDE_SUFFIX}${taken ? `-${Date.now()}` : ""}`;
    try {
      renameSync(path, aside);
      logger?.warn({ repository: path, set_aside_as: aside }, "a command made a git repository in the workspace; it was set aside");
      notes.push(`[DuckLM set aside the git repository this command made, ${relative(workspace, path)}, as ${relative(workspace, aside)}: git run by you there later would obey its config and hooks outside the sandbox. Check them, then rename it back.]`);
    } catch (error) {
      notes.push(`[DuckLM could not set aside the git repository this command made at ${relative(workspace, path)}: ${(error as Error).message}]`);
    }
  }
  return notes;
}

/**
 * What guards a run-later entry that lies in a folder (`.config/lefthook.yml`): the first part of its
 * path that is not a folder of the workspace, when there is one. A missing folder stands in for it
 * (empty and read-only, nothing can be made in it); a file or a link there is kept as it is, so that it
 * cannot be swapped for a folder that holds the entry.
 */
function guardedInstead(workspace: string, entry: { name: string; folder: boolean }, mayBeStandIn: (path: string) => boolean): { name: string; folder: boolean } {
  const parts = entry.name.split("/");
  for (let count = 1; count < parts.length; count += 1) {
    const name = parts.slice(0, count).join("/");
    const info = lstatSync(join(workspace, name), { throwIfNoEntry: false });
    if (info === undefined) return { name, folder: true };
    if (!info.isDirectory()) return { name, folder: false };
    // Another command's stand-in for the folder: shared with it, never filled with stand-ins of its own
    // (they would keep it from being taken away when that command ends).
    if (mayBeStandIn(join(workspace, name))) return { name, folder: true };
  }
  return entry;
}

/**
 * Opens what a bind mount will take its source from, and checks that the descriptor leads where the
 * path says: bound by descriptor, a folder a task swaps for a link after this check is still the one
 * checked. Null when the path is no longer itself.
 */
function openedAsChecked(path: string): number | null {
  let fd: number;
  try {
    fd = openSync(path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK | fsConstants.O_NOCTTY);
  } catch {
    return null;
  }
  let leadsTo: string | null = null;
  try {
    leadsTo = readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    // Unreadable: not what was checked.
  }
  if (leadsTo !== path) {
    closeSync(fd);
    return null;
  }
  return fd;
}

/**
 * Makes the folder `relativeFolder` of `workspace` (and its parents) part by part through descriptors,
 * never through a link: checked a moment ago, a folder a running task swaps for a link since then
 * makes nothing outside. False when it cannot be made there.
 */
function madeWithin(workspace: string, relativeFolder: string): boolean {
  return withFolderWithin(workspace, relativeFolder, true, () => true) ?? false;
}

function isDirectory(path: string): boolean {
  return statSync(path, { throwIfNoEntry: false })?.isDirectory() ?? false;
}

/**
 * Folders searched for repositories at most, before every command: past it the search could miss a
 * repository whose config a command would then write, so no command runs in such a workspace.
 */
const MAX_FOLDERS_SEARCHED = 100_000;
/** Repositories protected at most (each is a mount, and bubblewrap's arguments are bounded): past it, no command runs. */
const MAX_REPOSITORIES_FOUND = 1024;

/** A `.git` folder with a HEAD, or a `.git` file that points somewhere (`gitdir:`): what git would use. */
function looksLikeGitEntry(path: string, folder: boolean): boolean {
  if (folder) return existsSync(join(path, "HEAD"));
  try {
    const info = statSync(path);
    return info.size > 0 && info.size < 4096;
  } catch {
    return false;
  }
}

/** What one folder holds that the search for repositories needs, as of its inode change time. */
interface FolderListing {
  ino: number;
  changedMs: number;
  folders: string[];
  gitEntries: Array<{ name: string; folder: boolean }>;
  /** It holds a HEAD, `objects/` and `refs/`: a bare repository to git. */
  bare: boolean;
}

/**
 * Listings of the folders searched, reused while a folder's inode change time stays (adding,
 * removing or renaming an entry changes it, and no one can set it back): the search walks the whole
 * workspace before every command, and reading each folder again would take seconds in a large one.
 */
const folderListings = new Map<string, FolderListing>();

/** Why a search for repositories could not be complete: no confined command runs then. */
function incompleteSearch(workspace: string, why: string, remedy: string): DuckError {
  return new DuckError(ErrorCode.ToolFailed, `${why}: DuckLM cannot be sure to find every git repository in ${workspace}, whose config and hooks no command may change, so no confined command runs there; ${remedy}`);
}

/**
 * A folder's listing, from the cache while it has not changed. Null when it is gone or no longer a
 * folder. Throws when it cannot be read and a command could have made it so (its owner's, or a
 * folder it may enter): what lies below it would not be searched.
 */
function listingOf(workspace: string, dir: string): FolderListing | null {
  const info = lstatSync(dir, { throwIfNoEntry: false });
  if (!info?.isDirectory()) return null;
  const cached = folderListings.get(dir);
  if (cached !== undefined && cached.ino === info.ino && cached.changedMs === info.ctimeMs) return cached;
  let entries: import("node:fs").Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return null;
    // Another user's folder this one cannot even enter: no command (of this user) can reach below it either.
    if (info.uid !== process.getuid?.() && !canEnter(dir)) return null;
    throw incompleteSearch(workspace, `DuckLM cannot read the folder ${dir} (${code ?? (error as Error).message})`, `make it readable (chmod u+rx ${dir}) or choose another workspace`);
  }
  const names = new Set(entries.map((entry) => entry.name));
  const folders = entries.filter((entry) => entry.isDirectory() && entry.name !== ".git").map((entry) => entry.name);
  const gitEntries = entries.filter((entry) => entry.name === ".git" && (entry.isDirectory() || entry.isFile())).map((entry) => ({ name: entry.name, folder: entry.isDirectory() }));
  const bare = names.has("HEAD") && folders.includes("objects") && folders.includes("refs");
  const listing = { ino: info.ino, changedMs: info.ctimeMs, folders, gitEntries, bare };
  if (folderListings.size > 2 * MAX_FOLDERS_SEARCHED) folderListings.clear();
  folderListings.set(dir, listing);
  return listing;
}

function canEnter(dir: string): boolean {
  try {
    accessSync(dir, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The repositories of the workspace and inside it, at any depth, dependency folders included: the
 * `.git` folders (and `.git` files, which point git elsewhere), and every submodule its index names,
 * read-only to confined commands — config, hooks, `commondir` and all — and, being mount points,
 * impossible to rename or replace; and the bare repositories (a `mirror.git`), whose config and hooks
 * the caller keeps read-only. What the user's own git later reads there, no task has written. A
 * search that cannot be complete — more folders or repositories than its bounds, a folder it cannot
 * read — throws: a repository it missed would be left writable.
 */
export function repositoriesIn(workspace: string, git: GitRunner | null = null): { gitEntries: string[]; bareRepositories: string[] } {
  const found: string[] = [];
  const bareRepositories: string[] = [];
  const queue = [workspace];
  for (let next = 0; next < queue.length; next += 1) {
    if (next >= MAX_FOLDERS_SEARCHED) throw incompleteSearch(workspace, `the workspace holds more than ${MAX_FOLDERS_SEARCHED.toLocaleString("en")} folders`, "choose a smaller workspace");
    const dir = queue[next]!;
    const listing = listingOf(workspace, dir);
    if (listing === null) continue;
    // Only what git would take for a repository counts: empty `.git` entries by the hundred are not repositories.
    for (const entry of listing.gitEntries) if (looksLikeGitEntry(join(dir, entry.name), entry.folder)) found.push(join(dir, entry.name));
    const bare = listing.bare && dir !== workspace;
    if (bare) bareRepositories.push(dir);
    if (found.length + bareRepositories.length > MAX_REPOSITORIES_FOUND) throw incompleteSearch(workspace, `the workspace holds more than ${MAX_REPOSITORIES_FOUND.toLocaleString("en")} git repositories`, "remove some, or choose a smaller workspace");
    // A bare repository's objects hold no repository git would use, and many folders.
    for (const name of listing.folders) if (!(bare && name === "objects")) queue.push(join(dir, name));
  }
  return { gitEntries: [...new Set([...found, ...submoduleGitEntries(workspace, git)])], bareRepositories };
}

/**
 * The submodules the workspace's index names that have no `.git` yet (not checked out): a task that
 * made one would point the user's next `git status` at a repository of its own. Relative to the workspace.
 */
export function missingSubmoduleGitEntries(workspace: string, git: GitRunner | null): string[] {
  if (!workspaceIndex(workspace)) return [];
  return submoduleGitEntries(workspace, git, true).map((dotGit) => dotGit.slice(workspace.length + 1));
}

/**
 * The `.git` entries of the submodules the workspace's index names (gitlinks), at any depth: the
 * user's `git status` looks into each, so a search a task can exhaust with folders must not be what
 * protects them.
 */
function submoduleGitEntries(workspace: string, git: GitRunner | null, missing = false): string[] {
  // Asked once per version of the index: it is looked at before every command.
  const index = workspaceIndex(workspace);
  if (!index) return [];
  const key = `${workspace}:${index.mtimeMs}:${index.size}:${index.ino}`;
  let gitlinks = submoduleCache.get(key);
  if (!gitlinks) {
    gitlinks = listGitlinks(workspace, git);
    if (submoduleCache.size > 64) submoduleCache.clear();
    submoduleCache.set(key, gitlinks);
  }
  return gitlinks.filter((dotGit) => Boolean(lstatSync(dotGit, { throwIfNoEntry: false })) !== missing);
}

const submoduleCache = new Map<string, string[]>();

/** The index of a repository whose `.git` is a folder; a worktree's `.git` is a file, and has none here. */
function workspaceIndex(workspace: string): Stats | undefined {
  try {
    return lstatSync(join(workspace, ".git", "index"), { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

/** Runs git on the workspace's repository, whose config a task may have written: see `confinedGit`. */
export type GitRunner = (args: readonly string[]) => { status: number | null; stdout: string };

/**
 * git run on the workspace's repository from outside the sandbox would obey its config, which a task
 * can reach (an included file in the workspace): `core.fsmonitor` runs a program at `ls-files`. So
 * it runs with that switched off from the command line (which beats every config file), without the
 * user's or the system's config, and inside a sandbox of its own (read-only, no network, the seccomp
 * filter), so that nothing it might still run can act.
 */
export function confinedGit(binary: string, filterFile: string): GitRunner {
  return (args) => {
    const filter = openSync(filterFile, "r");
    try {
      const result = spawnSync(
        binary,
        ["--unshare-user", "--disable-userns", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--seccomp", "3",
          "git", "-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false", "-c", "safe.directory=*", ...args],
        { stdio: ["ignore", "pipe", "ignore", filter], encoding: "utf8", timeout: 10_000, maxBuffer: 64 * 1024 * 1024, env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: "/nonexistent", GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" } },
      );
      return { status: result.status, stdout: result.stdout ?? "" };
    } finally {
      closeSync(filter);
    }
  };
}

/** The `.git` paths of every gitlink in the workspace's index. */
function listGitlinks(workspace: string, git: GitRunner | null): string[] {
  if (!git) return [];
  const listed = git(["-C", workspace, "ls-files", "--stage", "-z"]);
  if (listed.status !== 0 || !listed.stdout) return [];
  const entries: string[] = [];
  for (const record of listed.stdout.split("\0")) {
    const match = /^160000 [0-9a-f]+ \d+\t(.+)$/.exec(record);
    if (!match) continue;
    entries.push(join(workspace, match[1]!, ".git"));
  }
  return entries;
}

/**
 * The folders between the workspace and a hidden path inside it. Bound onto themselves they become
 * mount points, which cannot be renamed: `mv data elsewhere` would otherwise move DuckLM's home out
 * from under its hiding place.
 */
function pinnedAncestors(workspace: string, hidden: string): string[] {
  const pinned: string[] = [];
  for (let dir = dirname(hidden); dir.length > workspace.length && dir.startsWith(`${workspace}/`); dir = dirname(dir)) pinned.unshift(dir);
  return pinned;
}

/** How many operands each of the options DuckLM gives bubblewrap takes. */
const BUBBLEWRAP_OPERANDS: Record<string, number> = {
  "--unshare-user": 0, "--disable-userns": 0, "--uid": 1, "--gid": 1, "--ro-bind": 2, "--bind": 2, "--ro-bind-fd": 2, "--bind-fd": 2,
  "--tmpfs": 1, "--dev": 1, "--proc": 1, "--remount-ro": 1, "--chdir": 1, "--die-with-parent": 0, "--new-session": 0, "--unshare-pid": 0,
  "--unshare-ipc": 0, "--unshare-uts": 0, "--unshare-cgroup-try": 0, "--unshare-net": 0, "--cap-drop": 1, "--seccomp": 1,
};

/**
 * bubblewrap's options with every mount on a path a running command could redirect during setup left
 * out (see RunningSandboxes), and what this command's namespace will have mounted. Leaving out a bind
 * by descriptor (a read-only `.git`, a pinned folder, a stand-in) or a masked config copy gives this
 * command no more than the running command has already; any other mount (the workspace itself, what
 * hides DuckLM's or the user's files) cannot be left out, and the command is refused instead.
 */
function mountsNoOneCanRedirect(args: readonly string[], writable: readonly string[], isMaskedCopy: (path: string) => boolean): { options: string[]; registered: SandboxMounts } {
  const operations: string[][] = [];
  for (let index = 0; index < args.length; ) {
    const count = BUBBLEWRAP_OPERANDS[args[index]!];
    if (count === undefined) throw new Error(`unexpected bubblewrap option ${args[index]}`);
    operations.push(args.slice(index, index + 1 + count));
    index += 1 + count;
  }
  const isMount = (operation: string[]) => ["--ro-bind", "--bind", "--ro-bind-fd", "--bind-fd", "--tmpfs", "--dev", "--proc", "--remount-ro"].includes(operation[0]!);
  const pathsOf = (operation: string[]) => (["--ro-bind", "--bind"].includes(operation[0]!) ? operation.slice(1) : [operation.at(-1)!]);
  const paths = [...new Set(operations.filter(isMount).flatMap(pathsOf))];
  const redirectable = runningSandboxes.redirectable(paths);
  // Another user's processes are in no registry this process reads: a path of the workspace (or the
  // workspace itself) that they could change is out too.
  // The roots themselves were checked, with what lies on their way, before anything was made in them.
  const rootOf = (path: string) => writable.find((root) => path === root || path.startsWith(`${root}/`));
  const otherUsers = new Map(paths.flatMap((path) => {
    const root = rootOf(path);
    const problem = root === undefined ? null : changeableByOtherUsers(path, false, root);
    return problem === null ? [] : [[path, problem] as const];
  }));
  for (const path of otherUsers.keys()) redirectable.add(path);
  const options: string[] = [];
  const fixed: string[] = [];
  const sealed: string[] = [];
  for (const operation of operations) {
    if (isMount(operation)) {
      const unsafe = pathsOf(operation).find((path) => redirectable.has(path));
      if (unsafe !== undefined) {
        const optional = operation[0] === "--ro-bind-fd" || operation[0] === "--bind-fd" || (operation[0] === "--ro-bind" && isMaskedCopy(operation[1]!));
        if (optional) continue;
        const otherUser = otherUsers.get(unsafe);
        if (otherUser !== undefined) throw new DuckError(ErrorCode.ToolFailed, `another user could swap ${unsafe} for a link while this command's sandbox is set up (${otherUser}); move the workspace to a folder only you and root can change`);
        throw new DuckError(ErrorCode.ToolFailed, `another command running in this workspace could swap ${unsafe} for a link while this one's sandbox is set up; run the command again once it has ended`);
      }
      const destination = operation.at(-1)!;
      fixed.push(destination);
      if (operation[0] !== "--bind" && operation[0] !== "--bind-fd") sealed.push(destination);
    }
    options.push(...operation);
  }
  return { options, registered: { writable, fixed, sealed } };
}

export interface BubblewrapOptions {
  /** DuckLM's home, config and plugin folders, and credentials the user names: hidden from every command. */
  hiddenPaths: readonly string[];
  /**
   * What commands may read but never change, even inside the workspace: DuckLM's program (its build,
   * sources, packages, page and bundled config), which holds no secret.
   */
  readOnlyPaths?: readonly string[];
  /** Commands given the network may reach private (LAN) addresses. Defaults to false. */
  allowPrivateNetwork?: boolean;
  /** Hosts commands given the network may never reach (permissions.json `hosts.deny`). */
  deniedHost?: (host: string) => boolean;
  /** Which addresses commands given the network may reach, instead of public ones only (tests). */
  allowAddress?: (address: string) => boolean;
  /** The user's home: an empty folder to commands but for `homeVisible` and the workspace. Defaults to `os.homedir()`. */
  home?: string;
  /** Folders of the home (toolchains) commands may read, by absolute path. Defaults to none. */
  homeVisible?: readonly string[];
  /**
   * Entries of the workspace that the user's own tools run later (`.git/`, `.envrc`, a trailing `/`
   * for a folder): read-only to commands, and impossible to create. Defaults to DEFAULT_RUN_LATER_FILES.
   */
  runLaterFiles?: readonly string[];
  /** Which of DuckLM's variables commands get besides the defaults, and which never. */
  environment?: EnvironmentPolicy;
  binary?: string;
  logger?: Logger;
}

/** The uid and gid a command has inside its user namespace when DuckLM runs as root. */
export const CONFINED_ROOT_ID = 1000;
/** The port the supervisor serves the sudo relay on, inside the sandbox's own network namespace. */
export const SANDBOX_SUDO_PORT = 3129;
/** Kernel interfaces only root may read; hidden when DuckLM runs as root. */
const ROOT_READABLE_KERNEL_FOLDERS = ["/sys/kernel/debug", "/sys/kernel/tracing", "/sys/kernel/security", "/sys/firmware", "/sys/kernel/slab", "/sys/kernel/mm/damon"];
/** How often what only root may read is searched for again (in the background), when DuckLM runs as root. */
const ROOT_ONLY_REFRESH_MS = 60_000;
/** Temporary folders of other processes: every command gets private, empty ones instead. */
const SHARED_TEMPORARY_FOLDERS = ["/tmp", "/var/tmp"];

/** The home folders commands never see: the user's, root's and every other user's. */
function homesOf(home: string): string[] {
  return [...new Set([home, "/root", "/home"].map((path) => realOrNull(path)).filter((path): path is string => path !== null && isDirectory(path)))];
}

/** The folder a program is installed under (`…/bin/node` → `…`), for one that lives in a hidden home. */
function installRootOf(executable: string): string {
  const real = realOrNull(executable) ?? executable;
  return dirname(dirname(real));
}

/**
 * What only root may read on this machine, kept current: searched once (tasks start after it) and
 * again in the background every ROOT_ONLY_REFRESH_MS; /run, small and changing, at every command.
 * A fact of the machine, so one search serves every sandbox of the process. DuckLM's own program and
 * the temporary folders are not searched (they hold nothing of root's alone, or are private anyway).
 */
class RootOnlyFiles {
  private latest: string[] | null = null;
  private searching: Promise<string[]> | null = null;
  private searchedAt = 0;

  constructor(private readonly skipped: readonly string[]) {}

  async current(): Promise<string[]> {
    if (this.latest === null || Date.now() - this.searchedAt > ROOT_ONLY_REFRESH_MS) this.searching ??= this.search();
    const settled = this.latest ?? (await this.searching!);
    return [...settled, ...(await rootOnlyPaths(["/run"]))];
  }

  private async search(): Promise<string[]> {
    try {
      const found = await rootOnlyPaths(rootSearchFolders(), (path) => this.skipped.includes(path));
      this.latest = found;
      this.searchedAt = Date.now();
      return found;
    } finally {
      this.searching = null;
    }
  }
}

let rootOnlyFiles: RootOnlyFiles | null = null;
/** The process's search for what only root may read, made when a sandbox of a root process first needs it. */
function rootOnlyFilesOfThisMachine(): RootOnlyFiles {
  rootOnlyFiles ??= new RootOnlyFiles([...SHARED_TEMPORARY_FOLDERS, PROGRAM_ROOT]);
  return rootOnlyFiles;
}

/** DuckLM's own package: readable by anyone, and large (its node_modules). */
const PROGRAM_ROOT = realOrNull(join(import.meta.dirname, "..", "..")) ?? join(import.meta.dirname, "..", "..");

/**
 * bubblewrap: the command runs in a user namespace of its own (an ordinary uid, no capabilities,
 * no_new_privs, no further namespaces), under a seccomp filter that refuses Unix sockets and
 * setuid modes; the whole filesystem read-only, /proc's kernel knobs too; every home an empty folder
 * but for the toolchains the user lists; private /tmp and /var/tmp; the workspace writable, except
 * its `.git` and the other files the user's tools run later; DuckLM's own state and the credentials
 * listed hidden; a new session (no terminal injection); no network — a command given the network
 * reaches it only through a proxy that refuses this machine, so DuckLM's API stays out of reach.
 */
export function bubblewrapShell(options: BubblewrapOptions): ShellSandbox {
  const binary = options.binary ?? "bwrap";
  let proxy: Promise<NetworkProxy> | null = null;
  // DuckLM's private folders (askpass, sudo relay, network proxy) live in the temporary folder too.
  const temporary = SHARED_TEMPORARY_FOLDERS.includes(tmpdir()) ? [] : [tmpdir()];
  const asRoot = process.getuid?.() === 0;
  const home = options.home ?? homedir();
  const runLater = (options.runLaterFiles ?? DEFAULT_RUN_LATER_FILES).map(runLaterEntry);
  const placeholders = new RunLaterPlaceholders();
  const knownRepositories = new Map<string, Set<string>>();
  const toolchainConfigs = new ToolchainConfigs();
  const rootOnly = asRoot ? rootOnlyFilesOfThisMachine() : null;
  // The sandbox's own folder, made at the first command: the supervisor script, and the private
  // copies bound over originals.
  let ownFolder: string | null = null;
  const folder = (): string => {
    if (ownFolder) return ownFolder;
    ownFolder = mkdtempSync(join(tmpdir(), "ducklm-sandbox-"));
    chmodSync(ownFolder, 0o700);
    writeFileSync(join(ownFolder, "supervisor.cjs"), SUPERVISOR_SOURCE, { mode: 0o644 });
    return ownFolder;
  };
  // A private copy is named by its content: commands that see the same text share one file.
  const privateCopy = (text: string): string => {
    const path = join(folder(), `copy-${createHash("sha256").update(text).digest("hex").slice(0, 32)}`);
    if (!existsSync(path)) writeFileSync(path, text, { mode: 0o644 });
    return path;
  };
  const filter = confinedCommandFilter();
  // git on the workspace's repository, confined (made with the sandbox's folder, at the first command).
  let gitRunner: GitRunner | null = null;
  const git = (): GitRunner => {
    if (gitRunner) return gitRunner;
    const filterFile = join(folder(), "seccomp.bpf");
    writeFileSync(filterFile, filter, { mode: 0o600 });
    gitRunner = confinedGit(binary, filterFile);
    return gitRunner;
  };
  return {
    kind: "bwrap",
    confinement: "confined",
    environment: options.environment ?? {},
    note: "shell commands run as an ordinary user in a sandbox: they can write only inside the workspace (not its .git or the files your tools run later), see no home folder but the toolchains allowed, no Unix socket, none of DuckLM's own files, and no network unless allowed (bubblewrap and seccomp)",
    async prepare() {
      await rootOnly?.current();
    },
    async launch(command, launch) {
      const within = (path: string, folderPath: string) => path === folderPath || path.startsWith(`${folderPath}/`);
      // Before anything is made in it: a workspace another user could change, or swap for a link on
      // its way, is no place for DuckLM to make stand-ins or mount on.
      for (const root of [launch.workspace, ...(launch.extraWritable ?? [])]) {
        const otherUser = changeableByOtherUsers(root, true);
        if (otherUser !== null) throw new DuckError(ErrorCode.ToolFailed, `another user could change ${root} while a command runs (${otherUser}); move the workspace to a folder only you and root can change`);
      }
      // Checked before anything is made: without it, other DuckLM processes would not see this command.
      const registry = runningSandboxes.folder();
      // A workspace inside another command's (a task in a folder of another's workspace) could be
      // swapped for a link by that command while the stand-ins are made: DuckLM would make them where it leads.
      const movable = runningSandboxes.exclusive(() => runningSandboxes.redirectable([launch.workspace, ...(launch.extraWritable ?? [])]));
      if (movable.size > 0) throw new DuckError(ErrorCode.ToolFailed, `a command running now could move ${[...movable].join(", ")} (it lies in that command's writable folder); run this one again once it has ended`);
      // Worked out at every launch: a path that appears or moves after start is hidden all the same.
      // The registry of running commands too: a command that changed it could hide its own from another process's check.
      const hidden = [...new Set([...options.hiddenPaths, ...temporary, registry].map((path) => realOrNull(path)).filter((path): path is string => path !== null))];
      const args = ["--unshare-user", "--disable-userns", ...(asRoot ? ["--uid", String(CONFINED_ROOT_ID), "--gid", String(CONFINED_ROOT_ID)] : [])];
      args.push("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--remount-ro", "/proc");
      for (const path of SHARED_TEMPORARY_FOLDERS) if (isDirectory(path)) args.push("--tmpfs", path);
      const hide = (path: string) => (isDirectory(path) ? args.push("--tmpfs", path) : args.push("--ro-bind", "/dev/null", path));
      // Later mounts cover earlier ones: what holds the workspace is hidden first, and the workspace bound over it.
      const holdsWorkspace = (path: string) => within(launch.workspace, path);
      const hiddenRootOnly = rootOnly ? (await rootOnly.current()).filter((path) => !within(path, launch.workspace)) : [];
      if (rootOnly) {
        // One that holds the workspace is hidden too: the workspace is bound back over it, its siblings stay hidden.
        for (const path of hiddenRootOnly) hide(path);
        // /proc's files only root may read (the kernel's slabs, timers, address maps).
        for (const path of ROOT_ONLY_PROC_FILES) if (statSync(path, { throwIfNoEntry: false })?.isFile()) args.push("--ro-bind", "/dev/null", path);
        for (const path of ROOT_READABLE_KERNEL_FOLDERS) if (isDirectory(path)) args.push("--tmpfs", path);
      }
      const homes = homesOf(home).filter((path) => !within(path, launch.workspace));
      for (const path of homes) args.push("--tmpfs", path);
      const inHiddenHome = (path: string) => homes.some((homeFolder) => within(path, homeFolder));
      const homeInWorkspace = within(home, launch.workspace);
      const visible = [...new Set([...(options.homeVisible ?? []), installRootOf(process.execPath)].map((path) => realOrNull(path)).filter((path): path is string => path !== null))];
      for (const path of visible) if (inHiddenHome(path) && !within(path, launch.workspace)) args.push("--ro-bind", path, path);
      // What git commits need of the user's settings, and nothing else of them (credentials).
      const commitSettings = inHiddenHome(home) || homeInWorkspace ? commitSettingsOf(join(home, ".gitconfig")) : null;
      for (const path of hidden.filter(holdsWorkspace)) hide(path);
      for (const path of [launch.workspace, ...(launch.extraWritable ?? [])]) args.push("--bind", path, path);
      // Every repository found in the workspace stays protected while it is there (a `.git` that lost its HEAD still holds a config).
      const known = knownRepositories.get(launch.workspace) ?? new Set<string>();
      const searched = repositoriesIn(launch.workspace, git());
      for (const dotGit of searched.gitEntries) known.add(dotGit);
      // Those gone are forgotten, and the set is bounded (the oldest go first): thousands of mounts
      // would pass bubblewrap's limit on arguments and stop every command.
      for (const dotGit of known) if (!lstatSync(dotGit, { throwIfNoEntry: false })) known.delete(dotGit);
      for (const dotGit of [...known].slice(0, Math.max(0, known.size - MAX_REPOSITORIES_FOUND))) known.delete(dotGit);
      knownRepositories.set(launch.workspace, known);
      const found = [...known].filter((dotGit) => lstatSync(dotGit, { throwIfNoEntry: false }));
      // A bare repository's config and hooks are guarded as a `.git`'s are: a missing hooks folder gets a stand-in.
      const bareEntries = searched.bareRepositories.flatMap((bare) => [{ path: join(bare, "config"), folder: false }, { path: join(bare, "hooks"), folder: true }]);
      const repositoryEntries = [...workspaceRepositoryEntries(launch.workspace, found.filter((dotGit) => basename(dotGit) === ".git").map(dirname)), ...bareEntries];
      // Only what is itself, in the workspace, is bound: a `gitdir:` or a folder that leads out through a
      // link would bind what it leads to (the host's /etc, writable as root) over the sandbox's own.
      const repositories = [...new Set([...found, ...found.flatMap((dotGit) => pointedRepositories(dotGit, launch.workspace)), ...repositoryEntries.map((entry) => entry.path).filter((path) => existsSync(path))])].filter((path) => realInside(path, launch.workspace));
      const inside = hidden.filter((candidate) => !holdsWorkspace(candidate));
      // Outside the workspace everything is read-only already; inside, such a folder is bound read-only.
      // A home given as the workspace keeps what the user's shell, git and toolchains run read-only.
      const homeProtected = homeInWorkspace ? [...HOME_STARTUP_FILES.map((name) => join(home, name.replace(/\/$/, ""))), ...(options.homeVisible ?? [])] : [];
      const readOnly = [...new Set([...(options.readOnlyPaths ?? []), ...homeProtected].map((path) => realOrNull(path)).filter((path): path is string => path !== null && path.startsWith(`${launch.workspace}/`)))];
      // A folder of the program that is not there (`dist` before a build, `src` of an installed
      // package) must not be made by a task either: the next start would run what it put there. A
      // throwaway tmpfs covers a missing folder, /dev/null a missing file (one named with an extension,
      // `.npmrc`); bubblewrap leaves the empty folder or file it mounts on.
      const absent = (options.readOnlyPaths ?? []).filter((path) => path.startsWith(`${launch.workspace}/`) && isDirectory(dirname(path)) && !lstatSync(path, { throwIfNoEntry: false }));
      // Run-later files: those there are bound read-only; a missing one gets an empty stand-in, bound
      // read-only while the command runs. Without a `.git`, a `HEAD` stands in too: with `objects/` and
      // `refs/` beside it, the workspace itself would be a bare repository to the user's git.
      const granted = new Set((launch.writableRunLater ?? []).map((name) => name.replace(/\/+$/, "")));
      const guarded = runLater.filter((entry) => !granted.has(entry.name)).map((entry) => guardedInstead(launch.workspace, entry, (path) => placeholders.mayBeStandIn(path)));
      // A `.git` that may be a stand-in (another command's, or one left behind) counts as missing: its
      // HEAD is guarded too, or a command beside it could make the workspace itself a repository.
      const dotGit = join(launch.workspace, ".git");
      if (guarded.some((entry) => entry.name === ".git") && (!lstatSync(dotGit, { throwIfNoEntry: false }) || placeholders.mayBeStandIn(dotGit))) guarded.push({ name: "HEAD", folder: false });
      // Every guarded entry goes to the stand-ins: one there that is a stand-in of a command still
      // running is shared (held) rather than taken for the user's, or its end would remove it from under this one.
      const missing = guarded.filter((entry) => !lstatSync(join(launch.workspace, entry.name), { throwIfNoEntry: false }) || placeholders.mayBeStandIn(join(launch.workspace, entry.name)));
      // A submodule not checked out gets a stand-in `.git` too, its folder made if need be (git makes
      // it empty); a hooks folder or an included config the repository names but that is missing, a
      // stand-in of its kind.
      for (const name of missingSubmoduleGitEntries(launch.workspace, git())) {
        // Made by DuckLM itself: never through a link that leads out of the workspace.
        if (!creatableInside(join(launch.workspace, name), launch.workspace) || !madeWithin(launch.workspace, dirname(name))) continue;
        missing.push({ name, folder: true });
      }
      for (const entry of repositoryEntries) {
        if (!entry.path.startsWith(`${launch.workspace}/`) || lstatSync(entry.path, { throwIfNoEntry: false }) || !creatableInside(entry.path, launch.workspace)) continue;
        if (!madeWithin(launch.workspace, relative(launch.workspace, dirname(entry.path)))) continue;
        missing.push({ name: entry.path.slice(launch.workspace.length + 1), folder: entry.folder });
      }
      const stand = placeholders.hold(launch.workspace, missing, Date.now() + (launch.timeLimitMs ?? 0) + HARD_LIMIT_MARGIN_MS);
      // The guarded entries that are there: bound read-only where they really are (a link to a folder of
      // the workspace protects that folder; one that leads out needs nothing, outside is read-only).
      const present = [
        ...new Set(
          guarded
            .map((entry) => join(launch.workspace, entry.name))
            .filter((path) => !stand.paths.includes(path) && lstatSync(path, { throwIfNoEntry: false }))
            .map((path) => realOrNull(path))
            .filter((path): path is string => path !== null && path !== launch.workspace && within(path, launch.workspace) && !repositories.includes(path)),
        ),
      ];
      // What is bound from inside the workspace is bound by descriptor, from fd 5 on (3 and 4 are the filter and channel).
      const boundFds: number[] = [];
      const bindChecked = (flag: "--bind-fd" | "--ro-bind-fd", path: string) => {
        const fd = openedAsChecked(path);
        if (fd === null) {
          for (const opened of boundFds) closeSync(opened);
          stand.release();
          throw new DuckError(ErrorCode.ToolFailed, `the workspace changed while its sandbox was set up (${path} is no longer what was checked); run the command again`);
        }
        boundFds.push(fd);
        args.push(flag, String(FIRST_BOUND_FD + boundFds.length - 1), path);
      };
      // Pinned first, protected after: a pinned folder must not cover a read-only `.git` or a hidden
      // path within it. Folders holding a nested `.git` are pinned too, or renaming one (`mv sub x`)
      // would carry the read-only `.git` off and leave a writable copy in its place.
      // A stand-in's folders too: moved aside, they would carry the stand-in off and leave room for the real thing.
      // A home given as the workspace (or inside it) is sealed at its top level: read-only, but for its
      // folders and files whose names do not start with a dot, bound writable again. What runs later
      // from a home is found under its dot entries, more of them than any list names (`.ssh/config`, a
      // `.pth` in `.local/lib`, an editor's rc, an autostart entry), and none can be made or changed.
      const realHome = homeInWorkspace ? realOrNull(home) : null;
      const sealedHome = realHome !== null && within(realHome, launch.workspace) ? realHome : null;
      const underSealedHome = (path: string) => sealedHome !== null && (path === sealedHome || (within(path, sealedHome) && relative(sealedHome, path).startsWith(".")));
      if (sealedHome !== null) {
        bindChecked("--ro-bind-fd", sealedHome);
        // `~/bin` is on the PATH of many a login shell (Debian's and Ubuntu's .profile): what runs later, like the dot entries.
        const entries = readdirSync(sealedHome, { withFileTypes: true }).filter((entry) => !entry.name.startsWith(".") && entry.name !== "bin" && (entry.isDirectory() || entry.isFile()));
        for (const entry of entries.slice(0, MAX_HOME_ENTRIES_WRITABLE)) bindChecked("--bind-fd", join(sealedHome, entry.name));
      }
      const pinned = new Set([...inside, ...repositories, ...readOnly, ...present, ...stand.paths].flatMap((path) => pinnedAncestors(launch.workspace, path)));
      // Pinned within the sealed part of a home, a folder stays read-only: only a mount point is needed there.
      for (const ancestor of pinned) bindChecked(underSealedHome(ancestor) ? "--ro-bind-fd" : "--bind-fd", ancestor);
      for (const path of [...repositories, ...readOnly, ...present, ...stand.paths]) bindChecked("--ro-bind-fd", path);
      // Credentials in what git reads (an extraheader, a token in a remote's URL), wherever the repository's configs lie, are shown masked.
      // Only a config the command could read anyway gets a masked copy: a copy bound over a hidden
      // one (a `gitdir:` a task pointed at a folder only root may read) would show what it hides.
      const readableAnyway = (path: string) => {
        if (within(path, launch.workspace)) return true;
        if (inHiddenHome(path) && !visible.some((folder) => within(path, folder))) return false;
        if ([...hidden, ...SHARED_TEMPORARY_FOLDERS].some((folder) => within(path, folder))) return false;
        if (hiddenRootOnly.some((folder) => within(path, folder))) return false;
        const info = statSync(path, { throwIfNoEntry: false });
        return info !== undefined && (!asRoot || (info.mode & 0o004) !== 0);
      };
      const configs = [...new Set([...found.flatMap((dotGit) => repositoryConfigFiles(dotGit)), ...toolchainConfigs.current(visible.filter((path) => inHiddenHome(path)))])];
      let maskedBytes = 0;
      let copies = 0;
      for (const config of configs) {
        if (!readableAnyway(config)) {
          // A toolchain config only root may read, in a visible home folder: the search for what only
          // root may read leaves homes out, so nothing else hides it from a command of root's.
          const rootOnlyInVisible = asRoot && inHiddenHome(config) && visible.some((folder) => within(config, folder)) && ((statSync(config, { throwIfNoEntry: false })?.mode ?? 0o004) & 0o004) === 0;
          if (rootOnlyInVisible) args.push("--ro-bind", "/dev/null", config);
          continue;
        }
        const masked = maskedConfigOf(config);
        if (masked === null) continue;
        // Past the bounds on copies, a config that holds a credential is hidden whole, never shown as it is.
        if (copies >= MAX_CONFIGS_MASKED || maskedBytes + masked.length > MAX_MASKED_BYTES) {
          args.push("--ro-bind", "/dev/null", config);
          continue;
        }
        copies += 1;
        maskedBytes += masked.length;
        args.push("--ro-bind", privateCopy(masked), config);
      }
      if (commitSettings !== null) args.push("--ro-bind", privateCopy(commitSettings), join(home, ".gitconfig"));
      for (const path of absent) args.push(...(/\.[a-z]+$/.test(path) ? ["--ro-bind", "/dev/null", path] : ["--tmpfs", path]));
      for (const path of inside) hide(path);
      for (const path of SERVICE_SOCKET_DIRS) if (isDirectory(path) && realOrNull(path) === path) args.push("--tmpfs", path);
      for (const path of SERVICE_SOCKET_FILES) if (existsSync(path) && realOrNull(path) === path) args.push("--ro-bind", "/dev/null", path);
      for (const path of launch.extraReadable ?? []) args.push("--ro-bind", path, path);
      args.push("--chdir", launch.workspace, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--unshare-net", "--cap-drop", "ALL");
      // fd 3 carries the seccomp filter; fd 4, when the command is given services, DuckLM's channel.
      args.push("--seccomp", "3");
      const env: NodeJS.ProcessEnv = { ...commandEnvironment(process.env, options.environment), TMPDIR: "/tmp" };
      // The sealed home's caches are read-only: tools cache in the command's own /tmp instead.
      if (sealedHome !== null) Object.assign(env, { XDG_CACHE_HOME: "/tmp/.cache", npm_config_cache: "/tmp/.npm", PIP_CACHE_DIR: "/tmp/.cache/pip" });
      const services: Partial<Record<ChannelService, string>> = {};
      const listen: Array<[number, ChannelService]> = [];
      if (launch.network) {
        proxy ??= startNetworkProxy({
          allowPrivate: options.allowPrivateNetwork ?? false,
          ...(options.allowAddress ? { allowAddress: options.allowAddress } : {}),
          ...(options.deniedHost ? { deniedHost: options.deniedHost } : {}),
          ...(options.logger ? { logger: options.logger } : {}),
        });
        services[ChannelService.proxy] = (await proxy).socketPath;
        listen.push([SANDBOX_PROXY_PORT, ChannelService.proxy]);
        const address = `http://127.0.0.1:${SANDBOX_PROXY_PORT}`;
        for (const name of ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"]) env[name] = address;
        env.NO_PROXY = "";
        env.no_proxy = "";
      }
      if (launch.sudoRelaySocket) {
        services[ChannelService.sudo] = launch.sudoRelaySocket;
        listen.push([SANDBOX_SUDO_PORT, ChannelService.sudo]);
        env.DUCKLM_SUDO_RELAY_PORT = String(SANDBOX_SUDO_PORT);
      }
      const supervised = listen.length > 0;
      const supervisorPath = join(folder(), "supervisor.cjs");
      if (supervised) args.push("--ro-bind", supervisorPath, supervisorPath);
      // From here to the return nothing waits: what other commands run is read and this one recorded at once.
      // Other DuckLM processes of this user neither read nor record between the two.
      let recorded: { mounts: { options: string[]; registered: SandboxMounts }; forget: () => void };
      try {
        recorded = runningSandboxes.exclusive(() => {
          const checked = mountsNoOneCanRedirect(args, [launch.workspace, ...(launch.extraWritable ?? [])], (path) => path.startsWith(`${folder()}/copy-`));
          return { mounts: checked, forget: runningSandboxes.register(checked.registered) };
        });
      } catch (error) {
        for (const fd of boundFds) closeSync(fd);
        stand.release();
        throw error;
      }
      const { mounts, forget } = recorded;
      args.splice(0, args.length, ...mounts.options);
      if (supervised) {
        args.push(...withInheritedClosed(limited([process.execPath, supervisorPath, "4", JSON.stringify(listen), SHELL, "-c", command], launch.timeLimitMs), [4]));
      } else {
        args.push(...withInheritedClosed(limited([SHELL, "-c", command], launch.timeLimitMs), []));
      }
      const repositoriesBefore = new Set([...searched.gitEntries, ...searched.bareRepositories]);
      return {
        file: binary,
        args,
        afterExit: () => setAsideRepositoriesMade(launch.workspace, repositoriesBefore, git(), options.logger),
        env,
        // fd 4 is a pipe nobody uses when there is no channel: the bound descriptors start at 5 either way.
        extraStdio: ["pipe", supervised ? "pipe" : "ignore", ...boundFds] as Array<"pipe" | "ignore" | number>,
        attach(child) {
          // The child has its copies: these were only for handing over.
          for (const fd of boundFds) closeSync(fd);
          const filterStream = child.stdio[3] as Writable | null | undefined;
          filterStream?.on("error", () => undefined);
          filterStream?.end(filter);
          const channel = supervised ? (child.stdio[4] as Duplex | null | undefined) : null;
          const stopChannel = channel ? serveSandboxChannel(channel, services) : null;
          let ended = false;
          const end = () => {
            if (ended) return;
            ended = true;
            stopChannel?.();
            stand.release();
            forget();
          };
          child.once("close", end);
          child.once("error", end);
        },
      };
    },
    async dispose() {
      const started = proxy;
      proxy = null;
      if (started) await (await started).close();
      if (ownFolder) rmSync(ownFolder, { recursive: true, force: true });
      ownFolder = null;
    },
  };
}

/** Whether bubblewrap is installed and can start a confined process here (it cannot in some containers). */
export function probeBubblewrap(binary = "bwrap"): { usable: boolean; reason: string } {
  if (!seccompSupported()) return { usable: false, reason: `DuckLM has no seccomp filter for the ${process.arch} architecture, so commands could reach Unix sockets` };
  const probe = spawnSync(binary, ["--unshare-user", "--disable-userns", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--remount-ro", "/proc", "--unshare-pid", "--unshare-net", "--die-with-parent", "/bin/true"], {
    timeout: 5_000,
    stdio: ["ignore", "ignore", "pipe"],
    encoding: "utf8",
  });
  if (probe.error) return { usable: false, reason: `bubblewrap is not installed (${(probe.error as NodeJS.ErrnoException).code ?? probe.error.message})` };
  if (probe.status !== 0) return { usable: false, reason: `bubblewrap cannot run here: ${probe.stderr.trim() || `exit ${probe.status}`}` };
  return { usable: true, reason: "bubblewrap works" };
}

export interface SandboxChoice {
  sandbox: ShellSandbox;
  /** Said at start, in `doctor` and in `/health` when commands are not confined. */
  warning: string | null;
}

/**
 * The sandbox runtime.json asks for. `auto` uses bubblewrap when it works; without it nothing runs
 * unattended (every command without a safe shape is asked). `bwrap` insists. `off` is the explicit, loud opt-out.
 */
export function chooseShellSandbox(mode: "auto" | "bwrap" | "off", options: BubblewrapOptions): SandboxChoice {
  if (mode === "off") {
    return {
      sandbox: { ...unconfinedShellWith(options.environment), confinement: "off", note: "confinement is OFF (runtime.json sandbox.mode off): commands can read and write anything you can, DuckLM's own files and network included" },
      warning: "shell commands are NOT confined: runtime.json sets sandbox.mode off, so a command can read and write anything you can, including DuckLM's own files",
    };
  }
  const probe = probeBubblewrap(options.binary);
  if (probe.usable) return { sandbox: bubblewrapShell(options), warning: null };
  if (mode === "bwrap") throw new DuckError(ErrorCode.ConfigInvalid, `runtime.json sandbox.mode is bwrap, but ${probe.reason}`);
  const note = `shell commands cannot be confined: ${probe.reason}; every command without a safe shape is asked before it runs, each time`;
  return { sandbox: { ...unconfinedShellWith(options.environment), note }, warning: `${note}. Install bubblewrap (apt-get install bubblewrap) to confine commands to the workspace` };
}
