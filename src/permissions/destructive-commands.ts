import { findParts } from "./literal-output.js";
import { destructiveTargets, isCriticalDirectory, isCriticalTarget, normalisePath } from "./path-judge.js";
import type { ShellRedirect } from "./shell-script.js";
import type { ShellWord } from "./shell-words.js";

/** One command as it would finally run: wrappers removed, expansions applied as far as the text fixes them. */
export interface ResolvedCommand {
  /** The program's file name (`rm`, never `/bin/rm`). */
  program: string;
  args: ShellWord[];
  redirects: ShellRedirect[];
  /** Every directory the command may run in; null where a `cd` went somewhere only known at run time. */
  cwds: ReadonlyArray<string | null>;
  /** The user's home directory. */
  home: string;
  /** The task's workspace: removing it, or a folder that holds it, is as final as removing a home. */
  workspace?: string;
}

export interface DestructiveVerdict {
  category: "hard_stop" | "no_always";
  reason: string;
}

const WRITE_OPERATORS = new Set([">", ">>", ">|", "&>", "&>>", "<>", ">&"]);
const DESTROYING_PROGRAMS = new Set(["rm", "unlink", "shred", "rmdir", "truncate", "dd", "mv", "chmod", "chown", "chgrp", "wipefs"]);
const DISK_WRITERS = new Set(["wipefs", "blkdiscard", "mke2fs", "mkdosfs", "mkntfs", "mkexfatfs", "mkfs", "mkreiserfs", "jfs_mkfs", "mkudffs", "newfs", "mkfs_msdos"]);
const PARTITION_TOOLS = new Set(["fdisk", "sfdisk", "cfdisk", "gdisk", "parted", "sgdisk"]);
const POWER_PROGRAMS = new Set(["shutdown", "reboot", "poweroff", "halt", "killall5"]);
const POWER_VERBS = new Set(["poweroff", "reboot", "halt", "kexec", "emergency", "rescue", "soft-reboot"]);
const POWER_TARGETS = /^(poweroff|reboot|halt|kexec|rescue|emergency|shutdown|ctrl-alt-del|soft-reboot|runlevel[0156])(\.target)?$/;
// The D-Bus methods of systemd and logind that switch the machine off, called by a bus client.
const POWER_METHODS = /(^|\.)(PowerOff|Reboot|Halt|KExec|SoftReboot|Suspend|Hibernate|HybridSleep)$/;
const BUS_CLIENTS = new Set(["busctl", "dbus-send", "gdbus", "qdbus", "dbus-run-session"]);

interface Options {
  /** Option names as written: short ones one letter each (`-rf` → `r`, `f`), long ones whole (`--force`). */
  flags: Set<string>;
  operands: ShellWord[];
  /** `--name=value` and `-x value` pairs for the options asked about. */
  values: Map<string, string>;
}

/** Splits GNU-style options from operands; `valued` names the options that take the next word. */
function readOptions(args: readonly ShellWord[], valued: readonly string[] = []): Options {
  const flags = new Set<string>();
  const operands: ShellWord[] = [];
  const values = new Map<string, string>();
  let onlyOperands = false;
  for (let i = 0; i < args.length; i += 1) {
    const word = args[i]!;
    const text = word.text;
    if (onlyOperands || !word.static || !text.startsWith("-") || text === "-") {
      operands.push(word);
      continue;
    }
    if (text === "--") {
      onlyOperands = true;
      continue;
    }
    if (text.startsWith("--")) {
      const [name, value] = text.includes("=") ? [text.slice(0, text.indexOf("=")), text.slice(text.indexOf("=") + 1)] : [text, undefined];
      flags.add(name);
      if (value !== undefined) values.set(name, value);
      else if (valued.includes(name) && args[i + 1]) values.set(name, args[++i]!.text);
      continue;
    }
    for (let k = 1; k < text.length; k += 1) {
      const letter = text[k]!;
      flags.add(letter);
      if (valued.includes(`-${letter}`)) {
        const value = text.slice(k + 1) || args[++i]?.text || "";
        values.set(`-${letter}`, value);
        break;
      }
    }
  }
  return { flags, operands, values };
}

/** A GNU long option given by any unambiguous prefix (`--rec` is `--recursive`). */
function hasLong(flags: ReadonlySet<string>, name: string, shortest = 3): boolean {
  for (const flag of flags) {
    if (!flag.startsWith("--")) continue;
    const given = flag.slice(2);
    if (given.length >= Math.min(shortest, name.length) && name.startsWith(given)) return true;
  }
  return false;
}

function criticalAmong(words: readonly ShellWord[], command: ResolvedCommand, test: (path: string) => string | null): { found: string | null; unknown: boolean } {
  let unknown = false;
  for (const word of words) {
    for (const target of destructiveTargets(word, command.cwds)) {
      if (target === null) {
        unknown = true;
        continue;
      }
      const found = test(target);
      if (found) return { found, unknown };
    }
  }
  return { found: null, unknown };
}

const criticalDirOrFile = (home: string) => (path: string) => (isCriticalDirectory(path, home) ? (path === "/" ? "the root directory" : path) : isCriticalTarget(path, home));

function hard(reason: string): DestructiveVerdict {
  return { category: "hard_stop", reason };
}

/** Writes through redirections to devices and system files. */
function judgeRedirects(command: ResolvedCommand): DestructiveVerdict | null {
  for (const redirect of command.redirects) {
    if (!WRITE_OPERATORS.has(redirect.operator) || !redirect.target) continue;
    if (redirect.operator === ">&" && /^\d+$|^-$/.test(redirect.target.text)) continue;
    const { found } = criticalAmong([redirect.target], command, (path) => isCriticalTarget(path, command.home));
    if (found) return hard(`writes to ${found}`);
  }
  return null;
}

/** The workspace, or a folder that holds it, by a name for people; null for any other path. */
export function workspaceOrAbove(path: string, workspace: string | undefined): string | null {
  if (!workspace) return null;
  if (path === workspace) return `the workspace (${workspace})`;
  return workspace.startsWith(path === "/" ? "/" : `${path}/`) ? `${path}, which holds the workspace` : null;
}

// A glob's last part that matches every name of a folder, or every hidden one: `*`, `.*`, `.[!.]*`, `.??*`.
const MATCHES_ALL = /(^|\/)(\*+|\.\*|\.\[[!^]\.\]\*|\.\?\?*\*)\/*$/;

/**
 * The words that take in the whole workspace or a folder above it: a path to one, or a glob that
 * matches everything in one (`*`, `./.*`). `*.o` or `src/*.ts` only take some of what is there, and
 * are judged by the other rules.
 */
function wholeFolderWords(words: readonly ShellWord[]): ShellWord[] {
  return words.filter((word) => !word.glob || MATCHES_ALL.test(word.text) || /(^|\/)\.\.(\/|$)/.test(word.text.slice(word.text.search(/[*?[]/))));
}

/** The workspace (or a folder above it) that `words` take in whole, by a name for people. */
function takesWorkspace(words: readonly ShellWord[], command: ResolvedCommand): string | null {
  return criticalAmong(wholeFolderWords(words), command, (path) => workspaceOrAbove(path, command.workspace)).found;
}

/** Whether a destination lies outside the workspace (or may: one only the run knows). */
function outsideWorkspace(word: ShellWord, command: ResolvedCommand): boolean {
  if (!command.workspace) return false;
  return destructiveTargets(word, command.cwds).some((target) => target === null || (target !== command.workspace && !target.startsWith(`${command.workspace}/`)));
}

function judgeRemoval(command: ResolvedCommand): DestructiveVerdict | null {
  const { flags, operands } = readOptions(command.args);
  const recursive = flags.has("r") || flags.has("R") || hasLong(flags, "recursive", 1);
  if (hasLong(flags, "no-preserve-root", 2)) return hard("rm --no-preserve-root exists only to delete /");
  const { found } = criticalAmong(operands, command, recursive ? criticalDirOrFile(command.home) : (path) => isCriticalTarget(path, command.home));
  if (found) return hard(`${recursive ? "recursively deletes" : "deletes"} ${found}`);
  // Each file a search finds (`find . -name x -exec rm -rf {} ;`) is not the place it starts from.
  const named = operands.filter((word) => !word.eachFound);
  const workspace = recursive ? takesWorkspace(named, command) : null;
  if (workspace) return hard(`recursively deletes ${workspace}`);
  return null;
}

function judgeFind(command: ResolvedCommand): DestructiveVerdict | null {
  const { starts, expression } = findParts(command.args);
  const texts = expression.map((word) => word.text);
  let destroys = texts.includes("-delete");
  texts.forEach((text, i) => {
    if (["-exec", "-execdir", "-ok", "-okdir"].includes(text) && DESTROYING_PROGRAMS.has((texts[i + 1] ?? "").slice((texts[i + 1] ?? "").lastIndexOf("/") + 1))) destroys = true;
  });
  if (!destroys) return null;
  const { found } = criticalAmong(starts.length > 0 ? starts : [{ text: ".", static: true, glob: false }], command, criticalDirOrFile(command.home));
  return found ? hard(`deletes everything under ${found}`) : null;
}

function judgePermissions(command: ResolvedCommand): DestructiveVerdict | null {
  const { flags, operands } = readOptions(command.args);
  const recursive = flags.has("R") || hasLong(flags, "recursive", 3);
  // The mode or owner operand (`755`, `u+x`, `me:me`) is judged like a path too: it never names a system folder.
  const { found } = criticalAmong(operands, command, (path) => (path === "/" ? "the root directory" : recursive && isCriticalDirectory(path, command.home) ? path : !isCriticalDirectory(path, command.home) ? isCriticalTarget(path, command.home) : null));
  return found ? hard(`changes the ownership or mode of ${found}${recursive ? " recursively" : ""}`) : null;
}

function judgeCopyOrMove(command: ResolvedCommand): DestructiveVerdict | null {
  const { operands, values } = readOptions(command.args, ["-t", "--target-directory", "-S", "--suffix", "-m", "--mode", "-o", "--owner", "-g", "--group"]);
  const target = values.get("-t") ?? values.get("--target-directory");
  const sources = target !== undefined ? operands : operands.slice(0, -1);
  const destination = target !== undefined ? { text: target, static: true, glob: false } : operands.at(-1);
  if (command.program === "mv") {
    const { found } = criticalAmong(sources, command, criticalDirOrFile(command.home));
    if (found) return hard(`moves ${found} away`);
    // Everything in the workspace moved out of it (`mv -- * /tmp/`) is gone as surely as removed.
    const workspace = destination && outsideWorkspace(destination, command) ? takesWorkspace(sources.filter((word) => !word.eachFound), command) : null;
    if (workspace) return hard(`moves everything in ${workspace} out of it`);
  }
  if (command.program === "rsync" && command.args.some((word) => word.text.startsWith("--del") || word.text === "--remove-source-files")) {
    const mirrored = criticalAmong(destination ? [destination] : [], command, (path) => criticalDirOrFile(command.home)(path) ?? workspaceOrAbove(path, command.workspace)).found;
    if (mirrored && command.args.some((word) => word.text.startsWith("--del"))) return hard(`makes ${mirrored} a mirror, deleting what is not in the source`);
    const emptied = command.args.some((word) => word.text === "--remove-source-files") && destination && outsideWorkspace(destination, command) ? takesWorkspace(sources, command) : null;
    if (emptied) return hard(`moves every file of ${emptied} out of it`);
  }
  if (destination) {
    const { found } = criticalAmong([destination], command, (path) => (isCriticalDirectory(path, command.home) ? null : isCriticalTarget(path, command.home)));
    if (found) return hard(`overwrites ${found}`);
  }
  return null;
}

// tar's, zip's and 7-Zip's options that delete each file once it is in the archive.
const ARCHIVE_VALUED = ["-f", "--file", "-C", "--directory", "-T", "--files-from", "-X", "--exclude-from", "-b", "--blocking-factor", "-g", "--listed-incremental", "-N", "--newer", "-V", "--label", "-I", "--use-compress-program", "-H", "--format", "--exclude", "--transform", "--owner", "--group", "--mode", "--mtime"];

/** `tar --remove-files`, `zip -m` and `7z -sdel` on the workspace, a home or `/` delete it as rm -r would. */
function judgeArchiveRemoval(command: ResolvedCommand): DestructiveVerdict | null {
  const { flags, operands, values } = readOptions(command.args, command.program === "tar" ? ARCHIVE_VALUED : ["-b", "-t", "-tt", "-x", "-i", "-O"]);
  const removes =
    command.program === "tar" ? hasLong(flags, "remove-files", 3) : command.program === "zip" ? flags.has("m") || hasLong(flags, "move", 3) : operands.some((word) => word.text === "-sdel") || command.args.some((word) => word.text === "-sdel");
  if (!removes) return null;
  // What tar reads lies under -C's folder; the archive's own name (`-f x.tar`, zip's first operand) is not read.
  const under = values.get("-C") ?? values.get("--directory");
  const cwds = under !== undefined ? command.cwds.map((cwd) => (cwd === null ? null : normalisePath(under, cwd))) : command.cwds;
  const read = (command.program === "zip" || command.program === "7z" || command.program === "7za") ? operands.slice(command.program === "zip" ? 1 : 2).filter((word) => word.text !== "-sdel") : operands;
  const located = { ...command, cwds };
  const { found } = criticalAmong(wholeFolderWords(read), located, (path) => criticalDirOrFile(command.home)(path) ?? workspaceOrAbove(path, command.workspace));
  return found ? hard(`${command.program} deletes ${found} as it archives it`) : null;
}

function judgeKill(command: ResolvedCommand): DestructiveVerdict | null {
  const pids: string[] = [];
  let signalSeen = false;
  for (let i = 0; i < command.args.length; i += 1) {
    const text = command.args[i]!.text;
    if (text === "--") {
      pids.push(...command.args.slice(i + 1).map((word) => word.text));
      break;
    }
    if (text === "-s" || text === "-n") {
      signalSeen = true;
      i += 1;
      continue;
    }
    // `-l` lists signals only as the first word; later it is ignored and the signal is sent.
    if ((text === "-l" || text === "-L") && i === 0) return null;
    if (text.startsWith("-") && !signalSeen && i === 0) {
      signalSeen = true;
      continue;
    }
    pids.push(text);
  }
  // A pid only known at run time counts as what it is should its unknown parts be empty (`-${x:0:0}1`).
  const fallbacks = command.args.filter((word) => !word.static && word.ifEmpty !== undefined).map((word) => word.ifEmpty!);
  const numbers = [...pids, ...fallbacks].map((pid) => (/^\s*[+-]?\d+\s*$/.test(pid) ? Number(pid.trim()) : Number.NaN));
  if (numbers.includes(-1)) return hard("signals every process the user may signal (pid -1)");
  if (numbers.includes(1)) return hard("signals init (pid 1)");
  return null;
}

function judgeDisks(command: ResolvedCommand): DestructiveVerdict | null {
  const program = command.program;
  const texts = command.args.map((word) => word.text);
  const devices = command.args.filter((word) => destructiveTargets(word, command.cwds).some((target) => target !== null && target.startsWith("/dev/")));
  if (/^mkfs(\..+)?$/.test(program) || DISK_WRITERS.has(program)) return hard(`${program} erases a file system`);
  if (program === "mkswap" && devices.length > 0) return hard("mkswap erases a device");
  // Punching holes in, zeroing, collapsing or allocating over a block device destroys what it holds.
  if (program === "fallocate") {
    const { found } = criticalAmong(readOptions(command.args, ["-o", "--offset", "-l", "--length"]).operands, command, (path) => (path.startsWith("/dev/") ? isCriticalTarget(path, command.home) : null));
    if (found) return hard(`fallocate rewrites ${found}`);
  }
  if (program === "shred") {
    const { found } = criticalAmong(readOptions(command.args, ["-n", "--iterations", "-s", "--size", "--random-source"]).operands, command, criticalDirOrFile(command.home));
    if (found || devices.length > 0) return hard(`shred destroys ${found ?? "a device"}`);
    return { category: "no_always", reason: "shred destroys files beyond recovery" };
  }
  if (PARTITION_TOOLS.has(program)) {
    const listing = texts.some((text) => ["-l", "--list", "-p", "--print", "print", "-v", "--verify", "-i", "--info", "-L", "--list-types", "-V", "--version", "-h", "--help"].includes(text));
    const writes = program === "sgdisk" ? texts.some((text) => /^-[ZzodntcgmaeGrsxR]|^--(zap|clear|delete|new|typecode|change-name|mbrtogpt|gpttombr|align-end|randomize|sort|transpose|replicate|move-second-header)/.test(text)) : !listing;
    if (writes && (devices.length > 0 || program === "sgdisk")) return hard(`${program} rewrites a partition table`);
    return null;
  }
  if (program === "dd") {
    const output = command.args.find((word) => word.text.startsWith("of="));
    if (output) {
      const { found } = criticalAmong([{ ...output, text: output.text.slice(3) }], command, (path) => isCriticalTarget(path, command.home));
      if (found) return hard(`dd overwrites ${found}`);
    }
    return null;
  }
  if (program === "badblocks" && texts.some((text) => /^-[a-zA-Z]*[wn]/.test(text))) return hard("badblocks in write mode erases a device");
  if (program === "hdparm" && texts.some((text) => /^--(security-erase|trim-sector-ranges|write-sector|fwdownload|make-bad-sector|dco-restore)/.test(text))) return hard("hdparm erases or rewrites a disk");
  if (program === "nvme" && ["format", "sanitize"].includes(texts[0] ?? "")) return hard(`nvme ${texts[0]} erases a disk`);
  if (program === "cryptsetup" && texts.some((text) => ["luksFormat", "erase", "luksErase", "reencrypt"].includes(text))) return hard("cryptsetup erases a device's keys");
  if (program === "zpool" && ["destroy", "labelclear"].includes(texts[0] ?? "")) return hard(`zpool ${texts[0]} destroys a pool`);
  if (program === "mdadm" && texts.includes("--zero-superblock")) return hard("mdadm --zero-superblock erases a RAID member");
  if (["lvremove", "vgremove", "pvremove"].includes(program)) return hard(`${program} deletes LVM volumes`);
  if (program === "dmsetup" && texts.includes("remove_all")) return hard("dmsetup remove_all removes every mapped device");
  if (program === "flashrom" && texts.some((text) => /^(-w|--write|-E|--erase)/.test(text))) return hard("flashrom rewrites firmware");
  return null;
}

function judgePower(command: ResolvedCommand): DestructiveVerdict | null {
  const program = command.program;
  const texts = command.args.map((word) => word.text);
  if (POWER_PROGRAMS.has(program)) {
    if (program === "shutdown" && texts.includes("-c")) return null;
    if (texts.some((text) => text === "--help" || text === "--version")) return null;
    return hard(program === "killall5" ? "killall5 signals every process" : `${program} stops the machine`);
  }
  if (program === "systemctl" || program === "loginctl") {
    // Option values may stand before the verb (`-p Id reboot`): any word that is a power verb, or a
    // unit that switches the machine off (`start poweroff.target`), counts.
    const verb = texts.find((text) => POWER_VERBS.has(text));
    if (verb) return hard(`${program} ${verb} stops the machine`);
    if (program === "systemctl" && texts.some((text) => /\.target$/.test(text) && POWER_TARGETS.test(text))) return hard("systemctl switches the machine off or to rescue mode");
  }
  if (BUS_CLIENTS.has(program) && texts.some((text) => POWER_METHODS.test(text))) return hard(`${program} asks systemd to stop the machine`);
  if ((program === "init" || program === "telinit") && texts.some((text) => /^[016sS]$/.test(text))) return hard(`${program} changes the run level to stop or reboot the machine`);
  return null;
}

// Every program judgeDestructive has a rule for (keep in step with it and judgeDisks/judgePower):
// a word that is none of these cannot start a destructive command, whatever follows.
const NAMED_DESTROYERS = new Set([
  ...DESTROYING_PROGRAMS, ...DISK_WRITERS, ...PARTITION_TOOLS, ...POWER_PROGRAMS, ...BUS_CLIENTS,
  "find", "chattr", "setfacl", "cp", "install", "ln", "rsync", "tee", "sed", "perl", "kill", "sort", "shuf", "tree", "uniq", "userdel",
  "deluser", "mkswap", "badblocks", "hdparm", "nvme", "cryptsetup", "zpool", "mdadm", "lvremove", "vgremove", "pvremove", "dmsetup",
  "flashrom", "systemctl", "loginctl", "init", "telinit", "fallocate", "tar", "zip", "7z", "7za",
]);

/** Whether judgeDestructive has a rule for the program at all (only these can be destructive by themselves). */
export function hasDestructionRule(program: string): boolean {
  return NAMED_DESTROYERS.has(program) || /^mkfs(\..+)?$/.test(program);
}

/**
 * Whether a command destroys something no one can give back — the system, a disk, a home — judged
 * on what it means after normalisation (paths, option spellings, globs at `/` or `$HOME`, the
 * directories a `cd` led to), never on how it is spelt. Returns null when it does not.
 */
export function judgeDestructive(command: ResolvedCommand): DestructiveVerdict | null {
  const byRedirect = judgeRedirects(command);
  if (byRedirect) return byRedirect;
  switch (command.program) {
    case "rm":
    case "unlink":
    case "rmdir":
      return judgeRemoval(command);
    case "find":
      return judgeFind(command);
    case "chmod":
    case "chown":
    case "chgrp":
    case "chattr":
    case "setfacl":
      return judgePermissions(command);
    case "mv":
    case "cp":
    case "install":
    case "ln":
    case "rsync":
      return judgeCopyOrMove(command);
    case "tee":
    case "truncate": {
      const { operands } = readOptions(command.args, ["-s", "--size", "-r", "--reference", "-o"]);
      const { found } = criticalAmong(operands, command, (path) => (isCriticalDirectory(path, command.home) ? null : isCriticalTarget(path, command.home)));
      return found ? hard(`${command.program} overwrites ${found}`) : null;
    }
    case "sed":
    case "perl": {
      if (!command.args.some((word) => /^-[a-zA-Z]*i/.test(word.text) || word.text.startsWith("--in-place"))) return null;
      const { found } = criticalAmong(command.args.filter((word) => !word.text.startsWith("-")), command, (path) => (isCriticalDirectory(path, command.home) ? null : isCriticalTarget(path, command.home)));
      return found ? hard(`${command.program} -i rewrites ${found}`) : null;
    }
    case "kill":
      return judgeKill(command);
    case "tar":
    case "zip":
    case "7z":
    case "7za":
      return judgeArchiveRemoval(command);
    case "sort":
    case "shuf":
    case "tree": {
      const { values } = readOptions(command.args, ["-o", "--output", "-k", "-t", "-S", "-T", "-L", "-I", "-P"]);
      const output = values.get("-o") ?? values.get("--output");
      const { found } = output ? criticalAmong([{ text: output, static: true, glob: false }], command, (path) => (isCriticalDirectory(path, command.home) ? null : isCriticalTarget(path, command.home))) : { found: null };
      return found ? hard(`${command.program} -o overwrites ${found}`) : null;
    }
    case "uniq": {
      const output = readOptions(command.args, ["-f", "-s", "-w"]).operands[1];
      const { found } = output ? criticalAmong([output], command, (path) => (isCriticalDirectory(path, command.home) ? null : isCriticalTarget(path, command.home))) : { found: null };
      return found ? hard(`uniq overwrites ${found}`) : null;
    }
    case "userdel":
    case "deluser":
      return command.args.some((word) => word.text === "root") ? hard("deletes the root account") : null;
    default:
      return judgeDisks(command) ?? judgePower(command);
  }
}
