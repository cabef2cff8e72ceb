import { spawnSync } from "node:child_process";
import { closeSync, constants as fsConstants, fstatSync, lstatSync, openSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";

/**
 * What a confined command sees in place of a file that holds credentials: the user's git settings
 * without their secrets, configs with their tokens masked, and nothing of what only root may read.
 * Each is written into the sandbox's private folder and bound over the original.
 */

/** git settings that say who commits and how, and carry no credential: what `git commit` needs. */
const GIT_SETTINGS_KEPT = /^(user\.(name|email)|init\.defaultbranch|core\.(autocrlf|eol|quotepath|filemode)|pull\.(rebase|ff)|merge\.conflictstyle|diff\.algorithm|color\.ui|advice\.[a-z]+)$/;

/** What is shown instead of a credential. */
export const MASKED = "(hidden by DuckLM)";

function quoted(value: string): string {
  return `"${value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`;
}

/**
 * The user's global git settings that a command may see (who commits, line endings, the default
 * branch), as the text of a config file; null when there are none or git is not installed.
 */
export function commitSettingsOf(gitconfig: string): string | null {
  // Asked once per version of the file: it is read at every command.
  const info = lstatSync(gitconfig, { throwIfNoEntry: false });
  const key = info ? `${gitconfig}:${info.mtimeMs}:${info.size}:${info.ino}` : null;
  if (key === null) return null;
  const cached = commitSettingsCache.get(key);
  if (cached !== undefined) return cached;
  const settings = readCommitSettings(gitconfig);
  commitSettingsCache.clear();
  commitSettingsCache.set(key, settings);
  return settings;
}

const commitSettingsCache = new Map<string, string | null>();

function readCommitSettings(gitconfig: string): string | null {
  const listed = spawnSync("git", ["config", "--file", gitconfig, "--null", "--list"], { encoding: "utf8", timeout: 5_000, env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } });
  if (listed.status !== 0 || !listed.stdout) return null;
  const sections = new Map<string, string[]>();
  for (const entry of listed.stdout.split("\0")) {
    const newline = entry.indexOf("\n");
    const key = (newline === -1 ? entry : entry.slice(0, newline)).toLowerCase();
    if (!GIT_SETTINGS_KEPT.test(key)) continue;
    const dot = key.indexOf(".");
    const section = key.slice(0, dot);
    const lines = sections.get(section) ?? [];
    lines.push(`\t${key.slice(dot + 1)} = ${quoted(newline === -1 ? "true" : entry.slice(newline + 1))}`);
    sections.set(section, lines);
  }
  if (sections.size === 0) return null;
  return [...sections].map(([section, lines]) => `[${section}]\n${lines.join("\n")}\n`).join("");
}

// `key = value`, after a `[section]` on the same line or not (git's and TOML's syntax alike), or an
// npmrc's key scoped to a registry (`//registry.example/:_authToken=…`).
const SETTING = /^(\s*(?:\[[^\]]*\]\s*)?)((?:\/\/[^\s=]*:)?[A-Za-z_][\w.-]*)(\s*=\s*)(.*)$/;
// Keys whose value is a credential: an http.extraHeader (an Authorization header), passwords, tokens, keys, npm's `_auth`.
const SECRET_KEY = /(header|pass(word|wd|phrase)?$|token|secret|api_?key|private_?key|cookie|oauth|bearer|credentials?$|(^|[._-])pat$|(^|:)_?auth$)/i;
/** An ssh command that carries a password on its line (`sshpass -p …`, `-o Password…`). */
const SSH_WITH_PASSWORD = /sshpass|\s-p\s|password/i;
// The same in an XML file (Maven's settings.xml): `<password>…</password>` on one line.
const XML_SECRET = /(<((?:\w+:)?(?:password|passphrase|privateKey|token|secret)[\w-]*)>)[^<]*(<\/\2>)/gi;
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)([^/@\s"]+)@/gi;
// In a quoted value the user part may hold spaces.
const QUOTED_URL_USERINFO = /("[a-z][a-z0-9+.-]*:\/\/)([^/@"]+)@/gi;
const URL_SECRET_PARAMETER = /([?&](?:[\w-]*token|password|passwd|secret|key|auth|sig|signature)=)[^&#\s"]+/gi;

/**
 * A config's text with its credentials masked (an `extraheader`, a token in a remote's URL or its
 * query, a password or token key, an inline credential helper, a value continued over lines), or
 * null when it holds none: `git config -l`, `git remote -v` and `cat .git/config` inside the sandbox
 * then print the mask. Read as git and TOML files are written; what cannot be told apart is masked.
 */
export function maskedRepositoryConfig(text: string): string | null {
  let changed = false;
  let continuing = false;
  const masked = text.split("\n").map((line) => {
    // A value continued with a trailing backslash: its next lines are the secret's too.
    if (continuing) {
      continuing = line.endsWith("\\");
      changed = true;
      return continuing ? `${MASKED} \\` : MASKED;
    }
    const setting = SETTING.exec(line);
    if (setting) {
      const [, before, key, equals, value] = setting as unknown as [string, string, string, string, string];
      const inlineHelper = /^helper$/i.test(key) && /^["']?!/.test(value.trim());
      const sshPassword = /sshcommand$/i.test(key) && SSH_WITH_PASSWORD.test(value);
      if (SECRET_KEY.test(key) || inlineHelper || sshPassword) {
        changed = true;
        continuing = value.endsWith("\\");
        return `${before}${key}${equals}${MASKED}${continuing ? " \\" : ""}`;
      }
    }
    const cleaned = line.replace(XML_SECRET, (_match, open: string, _name: string, close: string) => `${open}${MASKED}${close}`).replace(QUOTED_URL_USERINFO, (_match, scheme: string) => `${scheme}${encodeURIComponent(MASKED)}@`).replace(URL_USERINFO, (_match, scheme: string) => `${scheme}${encodeURIComponent(MASKED)}@`).replace(URL_SECRET_PARAMETER, (_match, name: string) => `${name}${encodeURIComponent(MASKED)}`);
    if (cleaned !== line) changed = true;
    return cleaned;
  }).join("\n");
  return changed ? masked : null;
}

/**
 * A config file's text with its credentials masked, or null when it holds none (or cannot be read).
 * Read from a descriptor that leads to `configPath` itself: a folder on the way that a task swapped
 * for a link would have DuckLM read, with its own rights, what the link leads to, and show it.
 */
export function maskedConfigOf(configPath: string): string | null {
  let fd: number;
  try {
    fd = openSync(configPath, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK | fsConstants.O_NOCTTY);
  } catch {
    return null;
  }
  try {
    if (readlinkSync(`/proc/self/fd/${fd}`) !== configPath) return null;
    const info = fstatSync(fd);
    if (!info.isFile() || info.size > 1024 * 1024) return null;
    return maskedRepositoryConfig(readFileSync(fd, "utf8"));
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
}

/**
 * Top-level folders not searched for what only root may read: hidden or replaced whole, the
 * kernel's, searched apart (/run), or the package manager's tree (/usr: large, and what it holds
 * every user may read; its /usr/local, where people put their own, is searched).
 */
const NOT_SEARCHED = new Set(["proc", "sys", "dev", "tmp", "home", "root", "run", "usr"]);
/** Most entries looked at under one top-level folder; past it the folder is hidden whole. */
const MAX_ENTRIES_PER_FOLDER = 100_000;

/** The folders to search for what only root may read: every top-level one but those above. */
export function rootSearchFolders(): string[] {
  let entries: string[];
  try {
    entries = readdirSync("/");
  } catch {
    return [];
  }
  return [...entries.filter((name) => !NOT_SEARCHED.has(name)).map((name) => `/${name}`), "/usr/local"];
}

/**
 * What no ordinary user could read: files that are not readable by others and folders others
 * cannot enter, owned by root (user or group). When DuckLM runs as root, a confined command keeps
 * root's uid towards the files (the workspace's files stay root's), so these are hidden from it —
 * `/etc/shadow`, host keys, TLS private keys, root's logs — as they would be from any other user.
 * A folder too large to search within its bound is returned whole. Searched a few folders at a time,
 * without blocking the process (a whole system takes seconds).
 */
export async function rootOnlyPaths(folders: readonly string[], skip: (path: string) => boolean = () => false, limit = MAX_ENTRIES_PER_FOLDER): Promise<string[]> {
  const found: string[] = [];
  for (const top of folders) {
    const inTop: string[] = [];
    const queue: string[] = [top];
    let seen = 0;
    const visit = async (path: string): Promise<void> => {
      if (skip(path)) return;
      let info: import("node:fs").Stats;
      try {
        info = await lstat(path);
      } catch {
        return;
      }
      if (info.isSymbolicLink()) return;
      const rootOwned = info.uid === 0 || info.gid === 0;
      if (info.isDirectory()) {
        if (rootOwned && (info.mode & 0o001) === 0) {
          inTop.push(path);
          return;
        }
        try {
          for (const name of await readdir(path)) queue.push(join(path, name));
        } catch {
          // Gone, or not ours to list: nothing under it is readable either.
        }
      } else if (rootOwned && (info.mode & 0o004) === 0) {
        inTop.push(path);
      }
    };
    while (queue.length > 0 && seen <= limit) {
      const batch = queue.splice(-Math.min(queue.length, 64));
      seen += batch.length;
      await Promise.all(batch.map(visit));
    }
    found.push(...(seen > limit ? [top] : inTop));
  }
  return found;
}
