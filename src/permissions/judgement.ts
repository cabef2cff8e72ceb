import type { CommandCategory } from "../contracts/index.js";
import { baseName, unwrap } from "./command-wrappers.js";
import { inputOf, producedWords } from "./literal-output.js";
import type { PathContext } from "./path-judge.js";
import type { ShellCommand } from "./shell-script.js";
import { literalWord, type ShellWord, type WordEnvironment } from "./shell-words.js";

export const CATEGORY_RANK: Record<CommandCategory, number> = { read_only: 0, normal: 1, unknown: 2, no_always: 3, hard_stop: 4 };

export function stricterCategory(a: CommandCategory, b: CommandCategory): CommandCategory {
  return CATEGORY_RANK[a] >= CATEGORY_RANK[b] ? a : b;
}

/** What the classifier has found so far: the strictest category wins, with its reason. */
export class Judgement {
  category: CommandCategory = "normal";
  reason = "every command matches a safe shape";
  network = false;
  readonly commands: string[] = [];
  readonly sudo: string[][] = [];
  /**
   * Files in the workspace whose content decides what the command does (a script it runs, a program
   * file, a build runner's recipe), by absolute path: an "always" approval holds only while they are
   * as they were when it was given.
   */
  readonly ranFiles = new Set<string>();
  /**
   * Files the command's code pulls in by itself (modules beside a program file, pytest's conftest):
   * bound only where the approval gives the network, since without it a changed module can do no
   * more than confinement allows, and binding them would ask again at every edit of a coder's loop.
   */
  readonly pulledInFiles = new Set<string>();

  raise(next: CommandCategory, why: string): void {
    if (CATEGORY_RANK[next] > CATEGORY_RANK[this.category]) {
      this.category = next;
      this.reason = why;
    }
  }
}

/** What holds while one script is judged: variables, remapped programs, where commands run. */
export interface ScriptState {
  env: WordEnvironment;
  /** Program names the script remapped (`hash -p /bin/rm ls`). */
  aliases: Map<string, string>;
  depth: number;
  /** Every directory the next command may run in; null where a `cd` went somewhere unknowable. */
  cwds: Array<string | null>;
  context: PathContext;
  /** The first command of the line that may create files, as shown to people (shared by nested scripts). */
  writes: { by: string | null };
}

// Programs whose safe shapes create no file: what runs before a git command in one line cannot
// have made the repository it reads.
const CREATE_NO_FILES = new Set([
  "cd", "pushd", "popd", "pwd", "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg", "echo", "printf", "true", "false",
  "test", "[", "[[", "which", "type", "command", "stat", "file", "du", "df", "date", "whoami", "id", "uname", "sort", "tree", "diff",
  "cmp", "basename", "dirname", "realpath", "readlink", "jq", "sleep", ":", "printenv", "hostname", "nproc", "git", "find",
]);

/** The command as shown, when it may create or change files (a write redirection, a program that writes); else null. */
export function mayCreateFiles(command: ShellCommand): string | null {
  const writes = command.redirects.some((redirect) => redirect.operator !== "<" && redirect.body === undefined && !(redirect.target && /^(\/dev\/(null|stdout|stderr)|\d+-?|-)$/.test(redirect.target.text)));
  const program = unwrap(command.words).words[0];
  if (!writes && (!program || (program.static && CREATE_NO_FILES.has(baseName(program.text))))) return null;
  return shown(command.words) || command.redirects.map((redirect) => `${redirect.operator} ${redirect.target?.text ?? ""}`).join(" ");
}

export function shown(words: readonly ShellWord[]): string {
  return words.map((word) => word.text).join(" ");
}

export function commandText(program: string, args: readonly ShellWord[]): string {
  return args.length > 0 ? `${program} ${shown(args)}` : program;
}

/** Words a producer pipes into `xargs`, or a here-string feeds it (`echo / | xargs rm -rf`, `xargs rm -rf <<< /`). */
export function xargsInput(command: ShellCommand): ShellWord[] | null {
  const fed = inputOf(command);
  if (command.pipedFrom) {
    const produced = producedWords(command.pipedFrom);
    if (produced) return produced.map(literalWord);
  }
  if (fed?.static) return fed.text.split(/\s+/).filter(Boolean).map(literalWord);
  return null;
}

/** How a shell is started: whether `-c` is given, the script operand, and arguments that become $0, $1… */
export function readShellArgs(args: readonly ShellWord[]): { inline: boolean; script: ShellWord | null; positional: ShellWord[]; plainOptions: boolean; file: ShellWord | null } {
  let inline = false;
  let plainOptions = true;
  let index = 0;
  for (; index < args.length; index += 1) {
    const text = args[index]!.text;
    if (text === "--") {
      index += 1;
      break;
    }
    if (!args[index]!.static || !/^[-+]/.test(text) || text === "-" || text === "+") break;
    if (/^[-+]o$/.test(text) || text === "-O" || text === "+O" || text === "--rcfile" || text === "--init-file") {
      plainOptions = false;
      index += 1;
      continue;
    }
    if (/^-[a-zA-Z]*c[a-zA-Z]*$/.test(text)) inline = true;
    if (text !== "-c") plainOptions = false;
  }
  const operand = args[index] ?? null;
  return inline ? { inline, script: operand, positional: args.slice(index + 1), plainOptions, file: null } : { inline, script: null, positional: [], plainOptions, file: operand };
}

/** A glob as a program name (`/bin/r[m]`) may name any program it matches: the destructive ones are tried. */
export const PROGRAMS_TO_TRY = ["rm", "dd", "mkfs", "mke2fs", "wipefs", "shred", "find", "chmod", "chown", "mv", "kill", "killall5", "shutdown", "reboot", "poweroff", "halt", "systemctl", "init", "telinit", "sh", "bash", "python3", "perl", "node"];

// Programs that destroy by what their arguments say: what a program only known at run time is tried as.
export const ARGUMENT_DESTROYERS = ["rm", "dd", "find", "chmod", "chown", "mv", "cp", "kill", "tee", "truncate", "shred", "systemctl"];

export function globMatches(pattern: string): string[] {
  const base = pattern.slice(pattern.lastIndexOf("/") + 1);
  let regex: RegExp;
  try {
    regex = new RegExp(`^${base.replace(/[.+^${}()|\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".").replace(/\[!/g, "[^")}$`);
  } catch {
    // A bracket the shell would take literally (`x\x1b[2K`) is no character class: only the
    // programs spelled exactly so could match, and none are.
    return PROGRAMS_TO_TRY.filter((program) => program === base);
  }
  return PROGRAMS_TO_TRY.filter((program) => regex.test(program));
}
