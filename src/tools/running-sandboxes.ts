import { lstatSync, mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, unlinkSync, writeFileSync, type Stats } from "node:fs";
import { userInfo } from "node:os";
import { dirname, join } from "node:path";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { isProcessAlive } from "../utils/process-alive.js";

/**
 * The mounts of one running confined command, as far as they matter to another command's setup:
 * where it may write, and which paths are mount points in its namespace (it cannot rename, remove or
 * replace those) or lie under a read-only mount (it cannot change them at all).
 */
export interface SandboxMounts {
  /** Its writable roots: the workspace and any folder it was given besides. */
  writable: readonly string[];
  /** Every path something is mounted on in its namespace, writable or not. */
  fixed: readonly string[];
  /** The mount points it cannot write below: read-only binds, tmpfs, /dev/null stand-ins. */
  sealed: readonly string[];
}

interface Entry {
  writable: Set<string>;
  fixed: Set<string>;
  sealed: Set<string>;
}

/** For short synchronous waits on another process's lock. */
const SLEEPER = new Int32Array(new SharedArrayBuffer(4));

const within = (path: string, folder: string) => path === folder || folder === "/" || path.startsWith(`${folder}/`);

function entryOf(mounts: SandboxMounts): Entry {
  return { writable: new Set(mounts.writable), fixed: new Set(mounts.fixed), sealed: new Set(mounts.sealed) };
}

/**
 * Whether a command with these mounts could make `path` lead elsewhere: some part of it below one of
 * its writable roots is neither a mount point in its namespace nor under a read-only one there, so it
 * could rename that part away and leave a link in its place.
 */
function canRedirect(entry: Entry, path: string): boolean {
  for (const root of entry.writable) {
    if (!within(path, root) || path === root) continue;
    const base = root === "/" ? "" : root;
    const parts = path.slice(base.length + 1).split("/");
    let at = base;
    for (const part of parts) {
      at = `${at}/${part}`;
      if (entry.sealed.has(at)) break;
      if (!entry.fixed.has(at)) return true;
    }
  }
  return false;
}

/**
 * Where every DuckLM process of this user records its running commands: in the home its passwd entry
 * names, never where a variable says (TMPDIR, HOME, XDG_CACHE_HOME), nor in a temporary folder that a
 * private /tmp (systemd's PrivateTmp) gives each process a copy of — two processes that looked in
 * different places would not see each other's commands. A user without a home of their own (a
 * service account whose home is /nonexistent) falls back to /tmp itself, checked as strictly.
 */
export function sandboxRegistryFolder(): string {
  let uid = -1;
  let home: string | null = null;
  try {
    const user = userInfo();
    uid = user.uid;
    home = realpathSync(user.homedir);
  } catch {
    // No passwd entry, or a home that is not there.
  }
  if (home !== null && statSync(home, { throwIfNoEntry: false })?.uid === uid) return join(home, ".cache", "ducklm", "sandboxes");
  return `/tmp/ducklm-${uid}-sandboxes`;
}

/**
 * The confined commands running now, in this process and in every other DuckLM process of this user.
 *
 * bubblewrap resolves the paths it mounts on (and the sources it takes by path) as it sets a sandbox
 * up, following links, with the privileges DuckLM has. A command already running in the same
 * workspace can swap a folder on such a path for a link to the host (`/oldroot/…` during setup) at
 * that moment, and bubblewrap would make, or empty, a file there. So a new command mounts on a path
 * only where no running command could redirect it: where, in every such command's namespace, each
 * part of the path below its writable root is a mount point or under a read-only mount. Paths that
 * fail this are left out; a command that runs meanwhile could change what they protect anyway.
 *
 * Other processes are seen through one small file per running command, in a folder only this user
 * may open (see sandboxRegistryFolder; hidden from every command). A file whose process is gone is
 * stale and removed. Where that folder cannot be trusted or used, no confined command starts: one that
 * did would not be seen by, nor see, the commands of other processes.
 */
export class RunningSandboxes {
  private readonly own = new Map<string, Entry>();
  private serial = 0;

  constructor(private readonly sharedFolderPath: string = sandboxRegistryFolder()) {}

  /**
   * The folder shared with other processes, made private to this user and checked at each use (it
   * may be removed or changed between commands). Throws when it cannot be trusted.
   */
  folder(): string {
    const path = this.sharedFolderPath;
    const refuse: (why: string) => never = (why) => {
      throw new DuckError(ErrorCode.ToolFailed, `DuckLM records the confined commands it runs in ${path}, and ${why}; no confined command runs until it is fixed, since other DuckLM processes would not see this one's commands`);
    };
    try {
      mkdirSync(path, { recursive: true, mode: 0o700 });
    } catch (error) {
      refuse(`it cannot be made (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
    // Reached through the user's own links (a ~/.cache kept on another disk), judged where it really is.
    let real = path;
    try {
      real = realpathSync(path);
    } catch {
      refuse("it cannot be resolved");
    }
    const info = lstatSync(real, { throwIfNoEntry: false });
    if (info === undefined || !info.isDirectory()) refuse("it is not a folder");
    if (info.uid !== process.getuid?.()) refuse(`it belongs to user ${info.uid}, not to this one (remove it)`);
    if ((info.mode & 0o077) !== 0) refuse(`others may open it (chmod 700 ${real})`);
    const otherUser = changeableByOtherUsers(real, true);
    if (otherUser !== null) refuse(`another user could change it (${otherUser})`);
    return real;
  }

  /** The running commands of other processes, from their files; stale files are removed. */
  private others(): Entry[] {
    const folder = this.folder();
    const entries: Entry[] = [];
    let names: string[];
    try {
      names = readdirSync(folder);
    } catch {
      return [];
    }
    for (const name of names) {
      const match = /^(\d+)-\d+\.json$/.exec(name);
      if (!match) continue;
      const pid = Number(match[1]);
      if (pid === process.pid) continue;
      const path = join(folder, name);
      if (!isProcessAlive(pid)) {
        try {
          unlinkSync(path);
        } catch {
          // Another process removed it first.
        }
        continue;
      }
      try {
        const mounts = JSON.parse(readFileSync(path, "utf8")) as SandboxMounts;
        entries.push(entryOf(mounts));
      } catch {
        // Half written is impossible (written aside, then renamed); unreadable is someone else's problem.
      }
    }
    return entries;
  }

  /**
   * Of `paths`, those a command running now (not this one) could redirect while a sandbox is set up
   * on them. Read and registered in one synchronous stretch by the caller, so that within a process
   * two commands starting at once see each other.
   */
  redirectable(paths: readonly string[]): Set<string> {
    const running = [...this.own.values(), ...this.others()];
    return new Set(paths.filter((path) => running.some((entry) => canRedirect(entry, path))));
  }

  /**
   * Runs `work` (reading who runs and recording a command) while no other DuckLM process of this user
   * does the same: a folder made in the shared folder is the lock, with its holder's pid in it. A lock
   * whose holder is gone is taken over; one held past `waitMs` refuses the command (going on without
   * it, two processes could each miss the other's command).
   */
  exclusive<T>(work: () => T, waitMs = 5_000): T {
    const folder = this.folder();
    const lock = join(folder, "lock");
    const deadline = Date.now() + waitMs;
    for (let held = false; !held; ) {
      try {
        mkdirSync(lock, { mode: 0o700 });
        writeFileSync(join(lock, "pid"), String(process.pid));
        held = true;
      } catch {
        let holder = Number.NaN;
        try {
          holder = Number(readFileSync(join(lock, "pid"), "utf8").trim());
        } catch {
          // Being made, or just released.
        }
        // A holder that is gone, or a lock left without a pid for a second (its maker died making it).
        const orphaned = Number.isInteger(holder) ? !isProcessAlive(holder) : Date.now() - (lstatSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now()) > 1_000;
        if (orphaned) {
          rmSync(lock, { recursive: true, force: true });
          continue;
        }
        if (Date.now() > deadline) throw new DuckError(ErrorCode.ToolFailed, `${lock} has been held by DuckLM process ${holder} for over ${waitMs} ms; run the command again once it lets go (or stop that process)`);
        Atomics.wait(SLEEPER, 0, 0, 5);
      }
    }
    try {
      return work();
    } finally {
      rmSync(lock, { recursive: true, force: true });
    }
  }

  /** Records a command that is about to run with these mounts; the returned function forgets it once it has ended. */
  register(mounts: SandboxMounts): () => void {
    const key = `${process.pid}-${++this.serial}`;
    const file = join(this.folder(), `${key}.json`);
    // Unrecorded, the command would be invisible to other processes: it does not start.
    try {
      const aside = join(dirname(file), `.${key}.tmp`);
      writeFileSync(aside, JSON.stringify(mounts), { mode: 0o600 });
      renameSync(aside, file);
    } catch (error) {
      throw new DuckError(ErrorCode.ToolFailed, `could not record a running command for other DuckLM processes in ${dirname(file)}: ${(error as Error).message}`);
    }
    this.own.set(key, entryOf(mounts));
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.own.delete(key);
      try {
        unlinkSync(file);
      } catch {
        // Gone already.
      }
    };
  }
}

/** The one registry of this process: every sandbox of it, whatever runtime made it, shares it. */
export const runningSandboxes = new RunningSandboxes();

/**
 * Where a folder on the way to `path` lets another user (not root, not this one) rename or replace
 * what follows it: a folder they own, or one writable by a group (unless, for a DuckLM that is not
 * root, it is this user's own private group) or by anyone (unless it is sticky and what follows is
 * this user's or root's). An ACL that lets another user write shows as group-writable. With
 * `itself`, the folder `path` is held to the same rule, as a workspace whose contents must not change
 * under DuckLM is. `below`: a folder holding `path` already found safe, itself included. Null when no other user can. Such a user's processes are in no registry this
 * process reads.
 */
export function changeableByOtherUsers(path: string, itself = false, below = "/"): string | null {
  const me = process.getuid?.() ?? -1;
  const myGroup = process.getgid?.() ?? -1;
  const trusted = (uid: number) => uid === 0 || uid === me;
  const othersMayWrite = (info: Stats) => (info.mode & 0o002) !== 0 || ((info.mode & 0o020) !== 0 && (me === 0 || info.gid !== myGroup || myGroup === 0));
  // `below`, already found safe with what lies on its way, is where the walk starts.
  let parent = below;
  let parentInfo = lstatSync(below);
  for (const part of path.slice(below === "/" ? 0 : below.length).split("/").filter(Boolean)) {
    const child = parent === "/" ? `/${part}` : `${parent}/${part}`;
    const childInfo = lstatSync(child, { throwIfNoEntry: false });
    if (!trusted(parentInfo.uid)) return `${parent} belongs to user ${parentInfo.uid}`;
    if (childInfo?.isSymbolicLink()) return `${child} is a link`;
    const sticky = (parentInfo.mode & 0o1000) !== 0;
    if (othersMayWrite(parentInfo) && !(sticky && childInfo !== undefined && trusted(childInfo.uid))) return `other users may write ${parent}`;
    if (!childInfo?.isDirectory()) return null;
    parent = child;
    parentInfo = childInfo;
  }
  if (itself && parent === path) {
    if (!trusted(parentInfo.uid)) return `${path} belongs to user ${parentInfo.uid}`;
    if (othersMayWrite(parentInfo)) return `other users may write ${path}`;
  }
  return null;
}
