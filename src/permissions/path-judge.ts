import { existsSync, lstatSync, readdirSync, readlinkSync, realpathSync } from "node:fs";
import { posix } from "node:path";
import type { ShellWord } from "./shell-words.js";

/** What the permission layer knows about where a task may work. */
export interface PathContext {
  /** The task's workspace, as an absolute path without links. */
  workspace: string;
  /** The user's home directory (for `~` and `$HOME`). */
  home: string;
  /** Directories and files no task may touch: DuckLM's home, config and plugin folders. */
  protectedPaths: readonly string[];
  /** Resolves links of the deepest existing ancestor; lexical only when absent. */
  realpath?: (path: string) => string;
  /**
   * Resolves a path (relative to a directory) the way the kernel does — each link followed before a
   * `..` after it applies — and tells whether a directory holds links a glob in it could match.
   */
  physical?: { resolve(path: string, cwd: string): string; linksIn(directory: string): string[] };
  /**
   * Files about to be written before the command runs (a coder step's), by absolute path: a script
   * the command runs is judged by what it will hold, not by what is on disk now.
   */
  pendingFiles?: ReadonlyMap<string, string>;
}

/** The kernel's reading of a path: a link is followed where it stands, so `link/..` is the link target's parent. */
export function physicalPath(path: string, cwd: string): string {
  let current = path.startsWith("/") ? "/" : (existsSync(cwd) ? realpathSync(cwd) : cwd);
  const parts = path.split("/").filter((part) => part !== "" && part !== ".");
  for (let links = 0; parts.length > 0; ) {
    const part = parts.shift()!;
    if (part === "..") {
      current = posix.dirname(current);
      continue;
    }
    const next = posix.join(current, part);
    let isLink: boolean;
    try {
      isLink = lstatSync(next).isSymbolicLink();
    } catch {
      // Nothing there: the rest cannot be a link either.
      return posix.resolve(next, ...parts);
    }
    if (!isLink) {
      current = next;
      continue;
    }
    links += 1;
    if (links > 40) return next;
    const target = readlinkSync(next);
    parts.unshift(...target.split("/").filter((piece) => piece !== "" && piece !== "."));
    if (target.startsWith("/")) current = "/";
  }
  return current;
}

/** The links directly in a directory, resolved (a glob there could expand to any of them). */
export function linksIn(directory: string): string[] {
  try {
    return readdirSync(directory, { withFileTypes: true })
      .slice(0, 5000)
      .filter((entry) => entry.isSymbolicLink())
      .map((entry) => physicalPath(entry.name, directory));
  } catch {
    return [];
  }
}

/** The real file system behind the path judgement of a running DuckLM. */
export const REAL_FILE_SYSTEM = { resolve: physicalPath, linksIn };

export type PathVerdict = "inside" | "outside" | "protected" | "dynamic";

/**
 * `/a/./b/../c//` → `/a/c`; relative paths are resolved against `cwd` first; `/proc/self/root/…`
 * (a way to name `/` through proc) is `/…`. Purely textual.
 */
export function normalisePath(path: string, cwd = "/"): string {
  let resolved = posix.resolve(cwd, path);
  for (let round = 0; round < 8 && /^\/proc\/(self|thread-self|\d+)\/root(\/|$)/.test(resolved); round += 1) {
    resolved = posix.resolve("/", resolved.replace(/^\/proc\/(self|thread-self|\d+)\/root/, "") || "/");
  }
  return resolved;
}

function within(root: string, candidate: string): boolean {
  return candidate === root || candidate.startsWith(root.endsWith("/") ? root : `${root}/`);
}

const GLOB_SEGMENT = /[*?[]/;
/** Stands for whatever one glob segment matches: a name, never `.` or `..`, never hidden. */
const MATCHED = "\u0000matched";

/** The literal directory a glob expands under (`src/*.ts` → `src`). */
function globBase(text: string): string {
  const segments = text.split("/");
  const index = segments.findIndex((segment) => GLOB_SEGMENT.test(segment));
  if (index === -1) return text;
  const base = segments.slice(0, index).join("/");
  return base === "" ? (text.startsWith("/") ? "/" : ".") : base;
}

/**
 * What a glob can reach, as a path with each glob segment standing for one matched name, so that a
 * `..` or `.git` after it counts (`d* /../../etc` climbs two levels from where `d*` matched); null
 * when a segment could match a hidden name, `.` or `..` (`.*` did in older shells).
 */
function globReach(text: string): string | null {
  const segments = text.split("/");
  if (segments.some((segment) => GLOB_SEGMENT.test(segment) && segment.startsWith("."))) return null;
  return segments.map((segment) => (GLOB_SEGMENT.test(segment) ? MATCHED : segment)).join("/");
}

/** Whether a `..` follows a glob segment: the name matched may be a link, and `..` then leaves from its target. */
function climbsAfterGlob(text: string): boolean {
  const segments = text.split("/");
  const index = segments.findIndex((segment) => GLOB_SEGMENT.test(segment));
  return index !== -1 && segments.slice(index + 1).includes("..");
}

/** Follows links through the deepest ancestor that exists, so a link inside the workspace cannot lead out. */
export function realpathOfDeepestAncestor(path: string): string {
  let existing = path;
  const rest: string[] = [];
  while (!existsSync(existing)) {
    const parent = posix.dirname(existing);
    if (parent === existing) break;
    rest.unshift(posix.basename(existing));
    existing = parent;
  }
  try {
    return posix.join(realpathSync(existing), ...rest);
  } catch {
    return path;
  }
}

/** Whether an absolute path lies in something no task may read or write: DuckLM's state or `.git` internals. */
export function isProtectedPath(absolute: string, context: PathContext): boolean {
  if (context.protectedPaths.some((root) => within(root, absolute))) return true;
  if (within(context.workspace, absolute)) {
    const relative = absolute.slice(context.workspace.length).split("/").filter(Boolean);
    if (relative.includes(".git")) return true;
  }
  return false;
}

/**
 * Where a path operand of a command points, judged from every directory the command may run in:
 * inside the workspace, outside it, into protected state, or unknowable from the text.
 */
export function judgeWorkspacePath(word: ShellWord, cwds: readonly (string | null)[], context: PathContext): PathVerdict {
  if (!word.static) return "dynamic";
  const text = word.glob ? globReach(word.text) : word.text;
  if (text === null) return "outside";
  let verdict: PathVerdict = "inside";
  for (const cwd of cwds) {
    if (cwd === null && !text.startsWith("/")) return "dynamic";
    const lexical = normalisePath(text, cwd ?? "/");
    const candidates = [lexical];
    try {
      if (context.realpath) candidates.push(context.realpath(lexical));
      // `link/../x` names what the kernel finds, not what the text says.
      if (context.physical) candidates.push(context.physical.resolve(text, cwd ?? "/"));
      // A glob may expand to a link in the folder it expands in, wherever that link leads (and a `..`
      // after it then leaves from there).
      if (word.glob && context.physical) {
        const links = context.physical.linksIn(context.physical.resolve(globBase(word.text), cwd ?? "/"));
        if (links.length > 0 && climbsAfterGlob(word.text)) return "outside";
        candidates.push(...links);
      }
    } catch {
      // A path the file system will not resolve for us (`/proc/1/root` without the right): unknowable.
      return "dynamic";
    }
    for (const candidate of candidates) {
      if (isProtectedPath(candidate, context)) return "protected";
      if (!within(context.workspace, candidate)) verdict = "outside";
    }
  }
  return verdict;
}

const SYSTEM_DIRS = new Set([
  "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/proc", "/root", "/run", "/sbin",
  "/srv", "/sys", "/usr", "/var", "/snap", "/Users", "/System", "/Library", "/Applications", "/private",
  "/usr/bin", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libexec", "/usr/sbin", "/usr/share", "/usr/include", "/usr/local",
  "/var/lib", "/private/etc", "/private/var",
]);

/** A directory whose loss breaks the system or a user's whole home: `/`, system folders, home folders. */
export function isCriticalDirectory(absolute: string, home: string): boolean {
  if (absolute === "/" || SYSTEM_DIRS.has(absolute)) return true;
  if (absolute === home || absolute === "/root") return true;
  return /^\/(home|Users)\/[^/]+$/.test(absolute);
}

// Files whose damage locks every user out or stops the machine from booting.
const CRITICAL_FILES = [
  /^\/etc\/(passwd|shadow|group|gshadow|sudoers|fstab|crypttab|ld\.so\.preload)$/,
  /^\/etc\/(sudoers\.d|pam\.d)(\/|$)/,
  /^\/boot\//,
  /^\/proc\/sysrq-trigger$/,
];

const HARMLESS_DEVICES = /^\/dev\/(null|zero|full|random|urandom|stdin|stdout|stderr|tty|ptmx|fd\/\d+|pts\/\d+|shm(\/.*)?)$/;

/** Whether writing to (or removing) this path would damage the system beyond repair by a user. */
export function isCriticalTarget(absolute: string, home: string): string | null {
  if (absolute.startsWith("/dev/") && !HARMLESS_DEVICES.test(absolute) && !/^\/dev\/(tcp|udp)\//.test(absolute)) return `the device ${absolute}`;
  if (CRITICAL_FILES.some((pattern) => pattern.test(absolute))) return `the system file ${absolute}`;
  if (isCriticalDirectory(absolute, home)) return absolute === "/" ? "the root directory" : `${absolute}`;
  return null;
}

/** Bash's network pseudo-files (`> /dev/tcp/host/port`). */
export function isNetworkPseudoFile(absolute: string): boolean {
  return /^\/dev\/(tcp|udp)\//.test(absolute);
}

/**
 * What a path operand of a destructive command could name, as absolute paths: relative paths from
 * every directory the command may run in, globs by the directory they expand in (`/*` is `/` itself,
 * since it expands to everything in it).
 */
export function destructiveTargets(word: ShellWord, cwds: readonly (string | null)[]): Array<string | null> {
  // `/$(…)` and `"$HOME/$dir"` are `/` and the home should what only the run knows be empty.
  if (!word.static) {
    const fallbacks = [word.ifEmpty, word.worst].filter((text): text is string => text?.startsWith("/") === true);
    return [null, ...fallbacks.flatMap((text) => destructiveTargets({ text, static: true, glob: /[*?[]/.test(text) }, cwds))];
  }
  const targets: Array<string | null> = [];
  for (const cwd of cwds) {
    if (cwd === null && !word.text.startsWith("/")) {
      targets.push(null);
      continue;
    }
    if (word.glob) {
      // Everything under the folder the glob expands in, or, when `..` leads past the glob, where it leads.
      const reach = globReach(word.text);
      const reached = reach === null ? null : normalisePath(reach, cwd ?? "/");
      const beforeGlob = reached === null ? null : reached.split(`/${MATCHED}`)[0]!;
      targets.push(normalisePath(globBase(word.text), cwd ?? "/"));
      if (beforeGlob !== null && beforeGlob !== "") targets.push(beforeGlob);
      else if (reached !== null) targets.push("/");
    } else {
      targets.push(normalisePath(word.text, cwd ?? "/"));
    }
  }
  return targets;
}
