import { homedir } from "node:os";
import type { CommandCategory } from "../contracts/index.js";
import type { PermissionsConfig } from "../config/config-schemas.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { matchShape, parseShape, type CommandShape } from "./command-shapes.js";
import { baseName, unwrap, wrapperDirectory } from "./command-wrappers.js";
import { judgeDestructive, type ResolvedCommand } from "./destructive-commands.js";
import { isInterpreter, readInterpreter, scanCode } from "./inline-code.js";
import { repositoryProblem } from "./git-repository.js";
import { looseCommands } from "./loose-commands.js";
import { hardStopInWordRuns, hiddenHardStop, looseWordsOf, type HardStopProbe } from "./hidden-hard-stops.js";
import { isNetworkPseudoFile, judgeWorkspacePath, normalisePath, REAL_FILE_SYSTEM, realpathOfDeepestAncestor, type PathContext } from "./path-judge.js";
import { inputOf, producedWords } from "./literal-output.js";
import { sharedShellParser, type ShellCommand, type ShellParser, type ShellRedirect } from "./shell-script.js";
import { literalWord, type ShellWord, type WordEnvironment } from "./shell-words.js";

export interface CommandClassification {
  category: CommandCategory;
  /** Every simple command found, as the words that would run. */
  commands: string[];
  reason: string;
  /** The command uses the network (curl, git fetch, npm install…): a permission of its own. */
  network: boolean;
  /** The argument vectors of the `sudo` invocations the text fixes, for the askpass broker. */
  sudo: string[][];
}

/** Where a command would run: its workspace, and what no task may touch. */
export interface ClassifyContext {
  workspace: string;
}

/** The parts of the path context that hold for every task of a process. */
export interface ClassifierPaths {
  /** The user's home directory. Defaults to `os.homedir()`. */
  home?: string;
  /** DuckLM's home, config and plugin folders. */
  protectedPaths?: readonly string[];
  /** Follows links (the default resolves through the real file system); null judges paths by their text alone. */
  realpath?: ((path: string) => string) | null;
}

const CATEGORY_RANK: Record<CommandCategory, number> = { read_only: 0, normal: 1, unknown: 2, no_always: 3, hard_stop: 4 };

export function stricterCategory(a: CommandCategory, b: CommandCategory): CommandCategory {
  return CATEGORY_RANK[a] >= CATEGORY_RANK[b] ? a : b;
}

// Directories whose programs a shape may allow when named by path; `./sed` or `/tmp/ls` could be anything.
const TRUSTED_DIRS = new Set(["/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"]);
const SHELLS = new Set(["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "yash"]);
// Wrappers that change nothing about what the wrapped command may do.
const NEUTRAL_WRAPPERS = new Set(["timeout", "nice", "time", "command"]);
const SUDO_LIKE = new Set(["sudo", "doas"]);
const MAX_DEPTH = 6;

interface LegacyRule {
  text: string;
  program: string;
  words: string[];
}

function parseLegacyRule(text: string): LegacyRule {
  const [program = "", ...words] = text.trim().split(/\s+/);
  return { text, program, words };
}

// Long options that mean the same as a short flag, so a rule written with `-r` matches `--recursive`.
const FLAG_ALIASES: Record<string, Record<string, string>> = {
  rm: { recursive: "r", force: "f", dir: "d" },
  cp: { recursive: "r", force: "f" },
  chmod: { recursive: "r" },
  chown: { recursive: "r" },
  chgrp: { recursive: "r" },
  git: { force: "f" },
};

/**
 * Whether a command has every word of a hard_stop or no_always rule. Loose on purpose: these rules
 * only ever make a command stricter. Short flags match in any cluster and case; long options by any
 * unambiguous GNU prefix of their alias; paths after normalisation; `word*` matches a prefix.
 */
function ruleMatches(rule: LegacyRule, program: string, args: readonly ShellWord[], home: string, cwd: string): boolean {
  if (rule.program !== program) return false;
  const letters = new Set<string>();
  const words = new Set<string>();
  const aliases = FLAG_ALIASES[program] ?? {};
  for (const arg of args) {
    const text = arg.text;
    words.add(text);
    if (text.startsWith("-") && !text.startsWith("--")) for (const letter of text.slice(1)) letters.add(letter.toLowerCase());
    if (text.startsWith("--") && text.length > 2) {
      const name = text.slice(2).split("=", 1)[0]!;
      words.add(`--${name}`);
      for (const [long, letter] of Object.entries(aliases)) if (name.length >= 3 && long.startsWith(name)) letters.add(letter);
    }
    if (text.startsWith("/") || text.startsWith("~")) words.add(normalisePath(text.replace(/^~(?=\/|$)/, home), cwd));
  }
  return rule.words.every((word) => {
    if (/^-[A-Za-z]+$/.test(word)) return [...word.slice(1)].every((letter) => letters.has(letter.toLowerCase()));
    if (word.endsWith("*")) return [...words].some((candidate) => candidate.startsWith(word.slice(0, -1)));
    return words.has(word) || words.has(normalisePath(word.replace(/^~(?=\/|$)/, home), cwd));
  });
}

class Judgement {
  category: CommandCategory = "normal";
  reason = "every command matches a safe shape";
  network = false;
  readonly commands: string[] = [];
  readonly sudo: string[][] = [];

  raise(next: CommandCategory, why: string): void {
    if (CATEGORY_RANK[next] > CATEGORY_RANK[this.category]) {
      this.category = next;
      this.reason = why;
    }
  }
}

interface ScriptState {
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
function mayCreateFiles(command: ShellCommand): string | null {
  const writes = command.redirects.some((redirect) => redirect.operator !== "<" && redirect.body === undefined && !(redirect.target && /^(\/dev\/(null|stdout|stderr)|\d+-?|-)$/.test(redirect.target.text)));
  const program = unwrap(command.words).words[0];
  if (!writes && (!program || (program.static && CREATE_NO_FILES.has(baseName(program.text))))) return null;
  return shown(command.words) || command.redirects.map((redirect) => `${redirect.operator} ${redirect.target?.text ?? ""}`).join(" ");
}

function shown(words: readonly ShellWord[]): string {
  return words.map((word) => word.text).join(" ");
}

function commandText(program: string, args: readonly ShellWord[]): string {
  return args.length > 0 ? `${program} ${shown(args)}` : program;
}

/** Words a producer pipes into `xargs`, or a here-string feeds it (`echo / | xargs rm -rf`, `xargs rm -rf <<< /`). */
function xargsInput(command: ShellCommand): ShellWord[] | null {
  const fed = inputOf(command);
  if (command.pipedFrom) {
    const produced = producedWords(command.pipedFrom);
    if (produced) return produced.map(literalWord);
  }
  if (fed?.static) return fed.text.split(/\s+/).filter(Boolean).map(literalWord);
  return null;
}

/** How a shell is started: whether `-c` is given, the script operand, and arguments that become $0, $1… */
function readShellArgs(args: readonly ShellWord[]): { inline: boolean; script: ShellWord | null; positional: ShellWord[]; plainOptions: boolean; file: ShellWord | null } {
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
const PROGRAMS_TO_TRY = ["rm", "dd", "mkfs", "mke2fs", "wipefs", "shred", "find", "chmod", "chown", "mv", "kill", "killall5", "shutdown", "reboot", "poweroff", "halt", "systemctl", "init", "telinit", "sh", "bash", "python3", "perl", "node"];

// Programs that destroy by what their arguments say: what a program only known at run time is tried as.
const ARGUMENT_DESTROYERS = ["rm", "dd", "find", "chmod", "chown", "mv", "cp", "kill", "tee", "truncate", "shred", "systemctl"];

function globMatches(pattern: string): string[] {
  const base = pattern.slice(pattern.lastIndexOf("/") + 1);
  const regex = new RegExp(`^${base.replace(/[.+^${}()|\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".").replace(/\[!/g, "[^")}$`);
  return PROGRAMS_TO_TRY.filter((program) => {
    try {
      return regex.test(program);
    } catch {
      return false;
    }
  });
}

/**
 * Classifies shell commands. A command runs without asking (`normal`) only when every word of every
 * simple command in it is accounted for by a safe shape of config/permissions.json: the program, its
 * subcommand, options from the shape's list, operands that are paths inside the workspace. What is
 * destructive is judged by meaning (normalised paths, option spellings, variables, encodings) and is
 * `hard_stop`; what cannot be read from the text is asked; the strictest category wins.
 */
export class CommandClassifier {
  private readonly hardStop: LegacyRule[];
  private readonly noAlways: LegacyRule[];
  private readonly networkRules: LegacyRule[];
  private readonly shapes: CommandShape[];
  private readonly home: string;
  private readonly protectedPaths: readonly string[];
  private readonly realpath: ((path: string) => string) | undefined;
  private parser: ShellParser | null = null;

  constructor(config: PermissionsConfig, paths: ClassifierPaths = {}) {
    this.hardStop = config.categories.hard_stop.map(parseLegacyRule);
    this.noAlways = config.categories.no_always.map(parseLegacyRule);
    this.networkRules = config.network.map(parseLegacyRule);
    this.shapes = config.categories.normal.map((rule) => {
      try {
        return parseShape(rule);
      } catch (error) {
        throw new DuckError(ErrorCode.ConfigInvalid, `permissions.json normal: ${(error as Error).message}`);
      }
    });
    this.home = paths.home ?? homedir();
    this.protectedPaths = paths.protectedPaths ?? [];
    this.realpath = paths.realpath === null ? undefined : (paths.realpath ?? realpathOfDeepestAncestor);
  }

  private async loadParser(): Promise<ShellParser> {
    this.parser ??= await sharedShellParser();
    return this.parser;
  }

  async classify(command: string, context: ClassifyContext = { workspace: process.cwd() }): Promise<CommandClassification> {
    const parser = await this.loadParser();
    const judgement = new Judgement();
    if (command.trim() === "") return { category: "unknown", commands: [], reason: "empty command", network: false, sudo: [] };
    const paths: PathContext = { workspace: context.workspace, home: this.home, protectedPaths: this.protectedPaths, ...(this.realpath ? { realpath: this.realpath, physical: REAL_FILE_SYSTEM } : {}) };
    const state: ScriptState = { env: { home: this.home, variables: new Map(), ifs: "" }, aliases: new Map(), depth: 0, cwds: [context.workspace], context: paths, writes: { by: null } };
    this.judgeScript(parser, command, state, judgement);
    return { category: judgement.category, commands: judgement.commands, reason: judgement.reason, network: judgement.network, sudo: judgement.sudo };
  }

  private judgeScript(parser: ShellParser, text: string, state: ScriptState, judgement: Judgement): void {
    if (state.depth > MAX_DEPTH) {
      judgement.raise("unknown", "commands nested too deeply to read");
      return;
    }
    const script = parser.parse(text, state.env);
    if (script.parseError) judgement.raise("unknown", "the command does not parse completely; asking");
    for (const construct of script.unsafeConstructs) judgement.raise("unknown", `uses ${construct}, which no safe shape covers`);
    if (script.forkBomb) judgement.raise("hard_stop", "starts copies of itself or of a shell without end (a fork bomb)");
    if (script.commands.length === 0) judgement.raise("unknown", "no command found");
    const env: WordEnvironment = { ...state.env, variables: script.variables };
    const inner: ScriptState = { ...state, env, cwds: [...state.cwds] };
    for (const command of script.commands) this.judgeCommand(parser, command, inner, judgement);
    // A program named by a variable (`$a -rf /`, `"${a[@]}"`) runs words set anywhere in the script.
    if (script.commands.some((command) => unwrap(command.words).words[0]?.static === false)) {
      const found = hardStopInWordRuns(looseWordsOf(text), this.hardStopProbe(parser, inner));
      if (found) judgement.raise("hard_stop", `${found}: the script runs a program named by a variable, and these words are in it`);
    }
    // Where the grammar gives up, bash may not (`{rm,-rf,/}` is a command to bash): judge a loose reading too.
    if (script.parseError) for (const words of looseCommands(text, env)) this.judgeLoose(words, { ...inner, cwds: [...state.cwds, ...inner.cwds] }, judgement);
  }

  private judgeLoose(words: ShellWord[], state: ScriptState, judgement: Judgement): void {
    const redirects: ShellRedirect[] = [];
    const plain: ShellWord[] = [];
    for (let i = 0; i < words.length; i += 1) {
      const word = words[i]!;
      const attached = /^\d*(>>?|>\||&>>?|<>)(.+)$/.exec(word.text);
      if (/^\d*(>>?|>\||&>>?|<>)$/.test(word.text) && words[i + 1]) {
        redirects.push({ operator: word.text.replace(/^\d+/, ""), fd: null, target: words[i + 1]! });
        i += 1;
      } else if (attached) redirects.push({ operator: attached[1]!, fd: null, target: { ...word, text: attached[2]! } });
      else plain.push(word);
    }
    const unwrapped = unwrap(plain);
    const program = unwrapped.words[0];
    if (!program?.static) {
      const written = judgeDestructive({ program: "", args: [], redirects, cwds: state.cwds, home: this.home });
      if (written?.category === "hard_stop") judgement.raise("hard_stop", written.reason);
      return;
    }
    const resolved: ResolvedCommand = { program: baseName(program.text), args: unwrapped.words.slice(1), redirects, cwds: state.cwds, home: this.home };
    const verdict = judgeDestructive(resolved);
    if (verdict?.category === "hard_stop") judgement.raise("hard_stop", verdict.reason);
  }

  private judgeCommand(parser: ShellParser, command: ShellCommand, state: ScriptState, judgement: Judgement): void {
    this.judgeOneCommand(parser, command, state, judgement);
    state.writes.by ??= mayCreateFiles(command);
  }

  private judgeOneCommand(parser: ShellParser, command: ShellCommand, state: ScriptState, judgement: Judgement): void {
    const cwds = [...state.cwds];
    if (command.words.length === 0) {
      this.judgeDestructiveRedirects(command, state, judgement);
      this.judgeRedirects(command, state, judgement, "");
      if (command.redirects.length === 0 && command.assignments.length === 0) judgement.raise("unknown", "no command found");
      return;
    }
    for (const assignment of command.assignments) judgement.raise("unknown", `sets ${assignment.name} in the command's environment, which can change what any program does`);
    const unwrapped = unwrap(command.words);
    if (unwrapped.words.length > 0) judgement.commands.push(shown(unwrapped.words));
    // `sudo -i`, `su -`, `env -C dir`: the wrapped command runs somewhere else, and is judged there.
    let moved: string | null | undefined;
    for (const wrapper of unwrapped.wrappers) {
      const directory = wrapperDirectory(wrapper);
      if (directory !== undefined) moved = directory === null || moved === null ? null : normalisePath(directory, moved ?? cwds.at(-1) ?? "/");
    }
    if (moved !== undefined) cwds.splice(0, cwds.length, moved);
    const wrapped: ScriptState = moved === undefined ? state : { ...state, cwds: [moved] };
    for (const wrapper of unwrapped.wrappers) {
      judgement.commands.push(wrapper.name);
      if (wrapper.words[0]?.expanded) judgement.raise("no_always", `the program "${wrapper.name}" comes from a variable or a command substitution`);
      if (SUDO_LIKE.has(wrapper.name)) {
        if (wrapper.words.every((word) => word.static) && unwrapped.words.every((word) => word.static)) {
          judgement.sudo.push([...wrapper.words.slice(1), ...unwrapped.words].map((word) => word.text));
        }
      }
      if (!NEUTRAL_WRAPPERS.has(wrapper.name)) judgement.raise("unknown", `runs through ${wrapper.name}`);
      this.matchLegacy(wrapper.name, wrapper.words.slice(1), state, judgement);
    }
    for (const assignment of unwrapped.assignments) judgement.raise("unknown", `sets ${assignment.name} in the command's environment, which can change what any program does`);
    for (const script of unwrapped.scripts) this.judgeNestedScript(parser, script, wrapped, judgement, "a command line handed to a shell");
    const head = unwrapped.words[0];
    if (!head) {
      const query = unwrapped.wrappers.at(-1);
      if (!(query && query.name === "command" && unwrapped.wrappers.length === 1)) {
        if (unwrapped.scripts.length === 0) judgement.raise("unknown", `"${shown(command.words)}" runs no command of its own`);
      }
      this.judgeDestructiveRedirects(command, state, judgement);
      this.judgeRedirects(command, state, judgement, "");
      return;
    }
    if (!head.static) {
      judgement.raise("no_always", `"${shown(command.words)}": the program is only known at run time`);
      // Whatever program it turns out to be, these arguments must not be able to destroy.
      for (const candidate of ARGUMENT_DESTROYERS) {
        const destructive = judgeDestructive({ program: candidate, args: unwrapped.words.slice(1), redirects: command.redirects, cwds, home: this.home });
        if (destructive?.category === "hard_stop") judgement.raise("hard_stop", `"${shown(unwrapped.words)}" could be "${candidate}", which ${destructive.reason}`);
      }
      this.judgeRedirects(command, state, judgement, "");
      return;
    }
    if (head.glob) judgement.raise("no_always", `the program "${head.text}" is a glob: which program runs depends on the files there`);
    const program = state.aliases.get(baseName(head.text)) ?? baseName(head.text);
    if (head.expanded) judgement.raise("no_always", `the program "${head.text}" comes from a variable or a command substitution`);
    let args = unwrapped.words.slice(1);
    if (unwrapped.appended.length > 0) args = [...args, ...unwrapped.appended];
    if (unwrapped.appendsInput) {
      const piped = xargsInput(command);
      args = piped ? [...args, ...piped] : [...args, { text: "(its input)", static: false, glob: false }];
    }
    for (const candidate of head.glob ? [program, ...globMatches(head.text)] : [program]) {
      const destructive = judgeDestructive({ program: candidate, args, redirects: command.redirects, cwds, home: this.home });
      if (destructive) judgement.raise(destructive.category, `"${shown(unwrapped.words)}" ${destructive.reason}`);
      this.matchLegacy(candidate, args, state, judgement);
    }
    this.judgeRedirects(command, state, judgement, program);
    const nestedHandled = this.judgeNested(parser, command, program, args, wrapped, judgement);
    if (program === "hash") {
      // `hash -p /bin/rm ls` makes `ls` run rm from then on.
      const index = args.findIndex((word) => word.text === "-p");
      if (index !== -1 && args[index + 1]?.static) for (const name of args.slice(index + 2)) state.aliases.set(name.text, baseName(args[index + 1]!.text));
    }
    if (program === "cd" || program === "pushd") {
      // `cd -` goes where $OLDPWD says, which the text does not show.
      const target = args.find((word) => !word.text.startsWith("-") || word.text === "-");
      state.cwds.push(!target ? this.home : target.static && !target.glob && target.text !== "-" ? normalisePath(target.text, cwds.at(-1) ?? "/") : null);
    }
    if (head.text.includes("/") && !TRUSTED_DIRS.has(head.text.slice(0, head.text.lastIndexOf("/")) || "/")) {
      judgement.raise("unknown", `"${head.text}" is not a system program`);
      return;
    }
    if (nestedHandled || unwrapped.appendsInput || unwrapped.assignments.length > 0 || command.assignments.length > 0) return;
    if (unwrapped.wrappers.some((wrapper) => !NEUTRAL_WRAPPERS.has(wrapper.name))) return;
    if (program === "git") {
      const repository = state.writes.by ? `an earlier command of this line ("${state.writes.by}") may have made the repository git would obey` : repositoryProblem(cwds, state.context.workspace);
      if (repository) {
        judgement.raise("unknown", `"${shown(command.words)}": ${repository}`);
        return;
      }
    }
    this.matchShapes(parser, program, args, cwds, state, judgement, command);
  }

  private matchShapes(parser: ShellParser, program: string, args: ShellWord[], cwds: Array<string | null>, state: ScriptState, judgement: Judgement, command: ShellCommand): void {
    const candidates = this.shapes.filter((shape) => shape.program === program);
    if (candidates.length === 0) {
      judgement.raise("unknown", `no safe shape for "${program}"`);
      this.judgeHiddenHardStops(parser, command, args, state, judgement);
      return;
    }
    let reason = "";
    for (const shape of candidates) {
      const match = matchShape(shape, program, args, cwds, state.context);
      if (match.ok) return;
      // The reason of the shape with the same subcommand tells most.
      if (!reason || (shape.subcommand && args.some((word) => word.text === shape.subcommand))) reason = match.reason;
    }
    judgement.raise("unknown", `"${shown(command.words)}": ${reason}`);
    this.judgeHiddenHardStops(parser, command, args, state, judgement);
  }

  /** Arguments and fed text of a command no shape covers may hold a command it runs (see hidden-hard-stops.ts). */
  private judgeHiddenHardStops(parser: ShellParser, command: ShellCommand, args: ShellWord[], state: ScriptState, judgement: Judgement): void {
    const fed = command.redirects.flatMap((redirect) => (redirect.body?.static ? [redirect.body.text] : []));
    const found = hiddenHardStop(args, fed, this.hardStopProbe(parser, state));
    if (found) judgement.raise("hard_stop", `${found}, in the arguments of "${shown(command.words).slice(0, 200)}"`);
  }

  private hardStopProbe(parser: ShellParser, state: ScriptState): HardStopProbe {
    return {
      words: (words) => {
        const unwrapped = unwrap(words);
        const program = unwrapped.words[0];
        if (!program?.static) return null;
        const name = baseName(program.text);
        const args = unwrapped.words.slice(1);
        const verdict = judgeDestructive({ program: name, args, redirects: [], cwds: state.cwds, home: this.home });
        if (verdict?.category === "hard_stop") return `"${shown(unwrapped.words)}" ${verdict.reason}`;
        const rule = this.hardStop.find((candidate) => ruleMatches(candidate, name, args, this.home, state.cwds.at(-1) ?? "/"));
        return rule ? `"${shown(unwrapped.words)}" matches hard_stop rule "${rule.text}"` : null;
      },
      text: (text) => {
        // Text inside text inside text…: a few levels are read, which is all a command line needs.
        if (state.depth >= 2) return null;
        const probe = new Judgement();
        this.judgeScript(parser, text, { ...state, depth: state.depth + 1, cwds: [...state.cwds], writes: { by: null } }, probe);
        return probe.category === "hard_stop" ? probe.reason : null;
      },
    };
  }

  /** Writes of a redirection with no program of its own (`> /dev/sda`, `exec 3>/dev/sda`, `{ …; } > /etc/passwd`). */
  private judgeDestructiveRedirects(command: ShellCommand, state: ScriptState, judgement: Judgement): void {
    const verdict = judgeDestructive({ program: "", args: [], redirects: command.redirects, cwds: state.cwds, home: this.home });
    if (verdict) judgement.raise(verdict.category, verdict.reason);
  }

  /** Redirections: writes only into the workspace, reads only from it; `/dev/tcp` is the network. */
  private judgeRedirects(command: ShellCommand, state: ScriptState, judgement: Judgement, program: string): void {
    for (const redirect of command.redirects) {
      if (redirect.body !== undefined) {
        if (!redirect.body.static) judgement.raise("unknown", "a here-document whose text is only known at run time");
        continue;
      }
      const target = redirect.target;
      if (!target) continue;
      const text = target.text;
      if ((redirect.operator === ">&" || redirect.operator === "<&") && /^(\d+-?|-)$/.test(text)) continue;
      if (text === "/dev/null" || text === "/dev/stdout" || text === "/dev/stderr") continue;
      const absolute = target.static ? normalisePath(text, state.cwds.at(-1) ?? "/") : null;
      if (absolute && isNetworkPseudoFile(absolute)) {
        judgement.network = true;
        judgement.raise("unknown", `opens a network connection through ${absolute}`);
        continue;
      }
      const verdict = judgeWorkspacePath(target, state.cwds, state.context);
      const writes = redirect.operator !== "<";
      if (verdict === "inside") continue;
      const what = writes ? "writes to" : "reads";
      const where = verdict === "protected" ? "DuckLM's own state or .git internals" : verdict === "dynamic" ? "a file only known at run time" : "a file outside the workspace";
      judgement.raise("unknown", `${program ? `"${program}" ` : ""}${what} ${text}: ${where}`);
    }
  }

  private matchLegacy(program: string, args: ShellWord[], state: ScriptState, judgement: Judgement): void {
    const cwd = state.cwds.at(-1) ?? "/";
    const hard = this.hardStop.find((rule) => ruleMatches(rule, program, args, this.home, cwd));
    if (hard) judgement.raise("hard_stop", `"${commandText(program, args)}" matches hard_stop rule "${hard.text}"`);
    const noAlways = this.noAlways.find((rule) => ruleMatches(rule, program, args, this.home, cwd));
    if (noAlways) judgement.raise("no_always", `"${commandText(program, args)}" matches no_always rule "${noAlways.text}"`);
    const network = this.networkRules.find((rule) => ruleMatches(rule, program, args, this.home, cwd));
    if (network) {
      judgement.network = true;
      judgement.raise("unknown", `"${commandText(program, args)}" uses the network`);
    }
  }

  private judgeNestedScript(parser: ShellParser, script: ShellWord, state: ScriptState, judgement: Judgement, what: string): void {
    if (!script.static) {
      judgement.raise("no_always", `runs ${what} that is only known at run time: ${script.text}`);
      for (const words of looseCommands(script.text, state.env)) this.judgeLoose(words, state, judgement);
      return;
    }
    this.judgeScript(parser, script.text, { ...state, depth: state.depth + 1, cwds: [...state.cwds] }, judgement);
  }

  /**
   * Shells, eval, interpreters and find -exec run more code: it is judged too. Returns true when the
   * command's own words are accounted for by that (so no shape is needed).
   */
  private judgeNested(parser: ShellParser, command: ShellCommand, program: string, args: ShellWord[], state: ScriptState, judgement: Judgement): boolean {
    if (SHELLS.has(program)) {
      if (args.length > 0 && args.every((word) => ["--version", "--help"].includes(word.text))) return false;
      const shell = readShellArgs(args);
      if (shell.inline) {
        const script = shell.script ?? { text: "", static: false, glob: false };
        // Arguments after the script become $0, $1… inside it.
        const positional = new Map(state.env.variables);
        shell.positional.forEach((word, index) => (word.static ? positional.set(String(index), word.text) : positional.delete(String(index))));
        this.judgeNestedScript(parser, script, { ...state, env: { ...state.env, variables: positional } }, judgement, "a script");
        if (!shell.plainOptions || shell.positional.length > 0) judgement.raise("unknown", `"${program} ${shown(args)}" starts a shell with options or arguments`);
        return true;
      }
      if (shell.file) {
        judgement.raise("unknown", `runs the script file ${shell.file.text}, whose content is not judged`);
        return true;
      }
      this.judgeStdinScript(parser, command, state, judgement, program);
      return true;
    }
    if (program === "eval") {
      this.judgeNestedScript(parser, { text: shown(args), static: args.every((word) => word.static), glob: false }, state, judgement, "eval text");
      return true;
    }
    if (program === "source" || program === ".") {
      judgement.raise("unknown", `runs the script file ${args[0]?.text ?? "(none)"} in the shell itself`);
      return true;
    }
    if (program === "alias") {
      for (const word of args) if (word.text.includes("=")) this.judgeNestedScript(parser, { ...word, text: word.text.slice(word.text.indexOf("=") + 1) }, state, judgement, "an alias");
      judgement.raise("unknown", "defines an alias");
      return true;
    }
    if (program === "find") {
      const starts = producedWords({ words: [literalWord("find"), ...args], assignments: [], redirects: [], pipedFrom: null }) ?? ["."];
      for (let i = 0; i < args.length; i += 1) {
        if (!["-exec", "-execdir", "-ok", "-okdir"].includes(args[i]!.text)) continue;
        const end = args.findIndex((word, j) => j > i && (word.text === ";" || word.text === "+"));
        const part = args.slice(i + 1, end === -1 ? undefined : end);
        if (part.length === 0) continue;
        // `{}` is each path found: judged as each place the search starts from.
        for (const start of starts) {
          const words = part.map((word) => (word.text.includes("{}") ? { ...word, text: word.text.split("{}").join(start) } : word));
          this.judgeCommand(parser, { words, assignments: [], redirects: [], pipedFrom: null }, state, judgement);
        }
      }
      return false;
    }
    if (isInterpreter(program)) {
      const use = readInterpreter(program, args);
      if (use.query) return false;
      for (const code of use.inline) {
        if (!code.static) {
          judgement.raise("no_always", `${program} runs code only known at run time`);
          continue;
        }
        this.scanInterpreterCode(parser, code.text, state, judgement, program);
        judgement.raise("unknown", `${program} runs inline code`);
      }
      if (use.readsStdin) this.judgeStdinScript(parser, command, state, judgement, program, true);
      if (use.runsFile) judgement.raise("unknown", `${program} runs a program file, whose content is not judged`);
      return true;
    }
    return false;
  }

  private judgeStdinScript(parser: ShellParser, command: ShellCommand, state: ScriptState, judgement: Judgement, program: string, code = false): void {
    const input = inputOf(command);
    if (!input) {
      judgement.raise("unknown", `${program} reads commands from its input`);
      return;
    }
    if (!input.static) {
      judgement.raise("no_always", `${program} runs a script piped in from a command whose output is only known at run time`);
      return;
    }
    if (code) this.scanInterpreterCode(parser, input.text, state, judgement, program);
    else this.judgeScript(parser, input.text, { ...state, depth: state.depth + 1, cwds: [...state.cwds] }, judgement);
    judgement.raise("unknown", `${program} runs a script fed through its input`);
  }

  private scanInterpreterCode(parser: ShellParser, code: string, state: ScriptState, judgement: Judgement, program: string): void {
    const finding = scanCode(code, (text) => {
      const probe = new Judgement();
      this.judgeScript(parser, text, { ...state, depth: state.depth + 1, cwds: [...state.cwds] }, probe);
      return probe.category === "hard_stop" ? probe.reason : null;
    });
    if (finding) judgement.raise("hard_stop", `${program}: ${finding.reason}`);
  }

  /**
   * The hard-stop pre-check of a task's text: a destructive command anywhere in it, in code spans or
   * in prose ("now run rm -rf / please"). Prose that quotes such a command is refused too, on purpose.
   */
  async findHardStop(text: string, workspace: string): Promise<string | null> {
    const spans = [...text.matchAll(/```[^\n]*\n?([\s\S]*?)```|`([^`\n]+)`/g)].map((match) => match[1] ?? match[2] ?? "");
    for (const span of spans) {
      const verdict = await this.classify(span, { workspace });
      if (verdict.category === "hard_stop") return verdict.reason;
    }
    const env: WordEnvironment = { home: this.home, variables: new Map(), ifs: "" };
    for (const line of text.split(/\n|;|&&|\|\||\||\. /)) {
      const words = line.replace(/["'`“”‘’]/g, " ").split(/\s+/).filter(Boolean);
      for (let i = 0; i < words.length; i += 1) {
        const tail = looseCommands(words.slice(i, i + 24).join(" "), env)[0];
        if (!tail) continue;
        const unwrapped = unwrap(tail);
        const program = unwrapped.words[0];
        if (!program?.static) continue;
        const verdict = judgeDestructive({ program: baseName(program.text), args: unwrapped.words.slice(1), redirects: [], cwds: [workspace], home: this.home });
        if (verdict?.category === "hard_stop") return `"${shown(unwrapped.words)}" ${verdict.reason}`;
        const rule = this.hardStop.find((candidate) => ruleMatches(candidate, baseName(program.text), unwrapped.words.slice(1), this.home, workspace));
        if (rule) return `"${shown(unwrapped.words)}" matches hard_stop rule "${rule.text}"`;
      }
    }
    return null;
  }

  /**
   * Checks the examples permissions.json carries — the file's own and each shape's `examples` (must be
   * normal) and `not_examples` (must not be) — in a made-up workspace. A mismatch is a configuration error.
   */
  async checkExamples(examples: readonly { command: string; category: CommandCategory }[]): Promise<void> {
    const failures: string[] = [];
    const checker = new CommandClassifier(
      { categories: { hard_stop: this.hardStop.map((rule) => rule.text), no_always: this.noAlways.map((rule) => rule.text), normal: [] }, network: this.networkRules.map((rule) => rule.text), unknown: "ask", examples: [] },
      { home: EXAMPLE_HOME, protectedPaths: [`${EXAMPLE_HOME}/.local/share/ducklm`], realpath: null },
    );
    checker.shapes.push(...this.shapes);
    const context = { workspace: EXAMPLE_WORKSPACE };
    for (const example of examples) {
      const got = await checker.classify(example.command, context);
      if (got.category !== example.category) failures.push(`"${example.command}" is ${got.category}, the example says ${example.category} (${got.reason})`);
    }
    for (const shape of this.shapes) {
      for (const command of shape.examples) {
        const got = await checker.classify(command, context);
        if (got.category !== "normal") failures.push(`"${command}" is an example of the shape ${shape.label} but is ${got.category} (${got.reason})`);
      }
      for (const command of shape.notExamples) {
        const got = await checker.classify(command, context);
        if (got.category === "normal" || got.category === "read_only") failures.push(`"${command}" is a not_example of the shape ${shape.label} but runs without asking`);
      }
    }
    if (failures.length > 0) {
      throw new DuckError(ErrorCode.ConfigInvalid, `permissions.json examples do not hold: ${failures.join("; ")}`, { details: { failures } });
    }
  }
}

/** The made-up places permissions.json's examples are judged in. */
export const EXAMPLE_HOME = "/home/user";
export const EXAMPLE_WORKSPACE = "/home/user/project";
