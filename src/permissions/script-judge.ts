import { matchShape, type CommandShape } from "./command-shapes.js";
import { baseName, unwrap, wrapperDirectory, wrapperOutputFiles } from "./command-wrappers.js";
import { judgeDestructive, type ResolvedCommand } from "./destructive-commands.js";
import { repositoryProblem } from "./git-repository.js";
import { hardStopInWordRuns, hiddenHardStop, looseWordsOf, type HardStopProbe } from "./hidden-hard-stops.js";
import { ARGUMENT_DESTROYERS, commandText, globMatches, Judgement, mayCreateFiles, shown, xargsInput, type ScriptState } from "./judgement.js";
import { looseCommands } from "./loose-commands.js";
import { MISREAD_CONTROL_CHARACTERS, otherReadings } from "./shell-syntax.js";
import { judgeNested, judgeNestedScript, judgeScriptFile, noteRanFile, shellScriptText } from "./nested-code.js";
import { noteRecipes } from "./recipe-files.js";
import { isNetworkPseudoFile, judgeWorkspacePath, normalisePath } from "./path-judge.js";
import { ruleMatches, type LegacyRule } from "./rule-matching.js";
import type { ShellCommand, ShellParser, ShellRedirect } from "./shell-script.js";
import type { ShellWord, WordEnvironment } from "./shell-words.js";

/** The rules a script is judged by, read once from permissions.json. */
export interface JudgingRules {
  hardStop: readonly LegacyRule[];
  noAlways: readonly LegacyRule[];
  network: readonly LegacyRule[];
  shapes: readonly CommandShape[];
  home: string;
}

// Directories whose programs a shape may allow when named by path; `./sed` or `/tmp/ls` could be anything.
const TRUSTED_DIRS = new Set(["/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"]);
/** Variables that make a shell run a file before anything else, whose content is not judged. */
const STARTUP_FILE_VARIABLES = new Set(["BASH_ENV", "ENV"]);
/** A declaration (`export BASH_ENV=l.sh`) of one of them, which the grammar gives as a construct, not a command. */
const DECLARES_STARTUP_FILE = /\b(?:export|declare|typeset|readonly|local)\b[^;&|\n]*?\b(BASH_ENV|ENV)=/;

function judgeAssignment(name: string, judgement: Judgement): void {
  if (STARTUP_FILE_VARIABLES.has(name)) judgement.raise("no_always", `sets ${name}, a file a shell runs before anything else, whose content is not judged`);
  else judgement.raise("unknown", `sets ${name} in the command's environment, which can change what any program does`);
}

// Wrappers that change nothing about what the wrapped command may do.
const NEUTRAL_WRAPPERS = new Set(["timeout", "nice", "time", "command"]);
const SUDO_LIKE = new Set(["sudo", "doas"]);
const MAX_DEPTH = 6;

/**
 * Walks a parsed script command by command and raises the judgement for each: its wrappers, the
 * place it runs, its destructiveness, its redirections, the code it runs in turn, and the safe
 * shape that covers it, if one does.
 */
export class ScriptJudge {
  constructor(readonly rules: JudgingRules) {}

  judgeScript(parser: ShellParser, text: string, state: ScriptState, judgement: Judgement): void {
    if (state.depth > MAX_DEPTH) {
      judgement.raise("unknown", "commands nested too deeply to read");
      return;
    }
    // Where the script starts, as far as the text fixes it: $PWD, `~+` and the first `cd`'s $OLDPWD.
    const known = state.cwds.length === 1 && state.cwds[0] !== null ? state.cwds[0]! : null;
    const script = parser.parse(text, { ...state.env, cwd: known });
    // What the reader cannot read is asked every time: a blanket approval covers commands it could read.
    if (script.parseError) judgement.raise("no_always", "the command does not parse completely, so it is asked every time");
    if (MISREAD_CONTROL_CHARACTERS.test(text)) judgement.raise("unknown", "holds control characters, which bash reads differently from how they look");
    // What bash may read where the grammar reads otherwise is judged too, and can only make it stricter.
    for (const reading of otherReadings(text)) this.judgeScript(parser, reading, { ...state, depth: state.depth + 1, cwds: [...state.cwds] }, judgement);
    for (const construct of script.unsafeConstructs) judgement.raise("unknown", `uses ${construct}, which no safe shape covers`);
    const declared = DECLARES_STARTUP_FILE.exec(text);
    if (declared) judgeAssignment(declared[1]!, judgement);
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

  judgeLoose(words: ShellWord[], state: ScriptState, judgement: Judgement): void {
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
      const written = judgeDestructive({ program: "", args: [], redirects, cwds: state.cwds, home: this.rules.home });
      if (written?.category === "hard_stop") judgement.raise("hard_stop", written.reason);
      return;
    }
    const resolved: ResolvedCommand = { program: baseName(program.text), args: unwrapped.words.slice(1), redirects, cwds: state.cwds, home: this.rules.home, workspace: state.context.workspace };
    const verdict = judgeDestructive(resolved);
    if (verdict?.category === "hard_stop") judgement.raise("hard_stop", verdict.reason);
  }

  judgeCommand(parser: ShellParser, command: ShellCommand, state: ScriptState, judgement: Judgement): void {
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
    for (const assignment of command.assignments) judgeAssignment(assignment.name, judgement);
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
      const written = wrapperOutputFiles(wrapper);
      if (written.length > 0) {
        const writes: ShellCommand = { ...command, redirects: written.map((target) => ({ operator: ">", fd: null, target })) };
        this.judgeDestructiveRedirects(writes, state, judgement);
        this.judgeRedirects(writes, state, judgement, wrapper.name);
      }
      this.matchLegacy(wrapper.name, wrapper.words.slice(1), state, judgement);
    }
    for (const assignment of unwrapped.assignments) judgeAssignment(assignment.name, judgement);
    for (const script of unwrapped.scripts) judgeNestedScript(this, parser, script, wrapped, judgement, "a command line handed to a shell");
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
        const destructive = judgeDestructive({ program: candidate, args: unwrapped.words.slice(1), redirects: command.redirects, cwds, home: this.rules.home });
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
      const destructive = judgeDestructive({ program: candidate, args, redirects: command.redirects, cwds, home: this.rules.home, workspace: state.context.workspace });
      if (destructive) judgement.raise(destructive.category, `"${shown(unwrapped.words)}" ${destructive.reason}`);
      this.matchLegacy(candidate, args, state, judgement);
    }
    this.judgeRedirects(command, state, judgement, program);
    const nestedHandled = judgeNested(this, parser, command, program, args, wrapped, judgement);
    // A shell script run by its path (`./build.sh`) is judged by what it holds, as `bash build.sh` is.
    if (!nestedHandled && head.text.includes("/") && shellScriptText(head, wrapped) !== null) judgeScriptFile(this, parser, head, wrapped, judgement, "");
    // A program of the workspace, or a build runner's recipe there, does what its file says today.
    if (head.text.includes("/")) noteRanFile(head, wrapped, judgement);
    noteRecipes(this, parser, program, args, wrapped, judgement);
    if (program === "hash") {
      // `hash -p /bin/rm ls` makes `ls` run rm from then on.
      const index = args.findIndex((word) => word.text === "-p");
      if (index !== -1 && args[index + 1]?.static) for (const name of args.slice(index + 2)) state.aliases.set(name.text, baseName(args[index + 1]!.text));
    }
    if (program === "cd" || program === "pushd") {
      // `cd -` goes where $OLDPWD says, which the text does not show.
      const target = args.find((word) => !word.text.startsWith("-") || word.text === "-");
      state.cwds.push(!target ? this.rules.home : target.static && !target.glob && target.text !== "-" ? normalisePath(target.text, cwds.at(-1) ?? "/") : null);
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
    const candidates = this.rules.shapes.filter((shape) => shape.program === program);
    if (candidates.length === 0) {
      judgement.raise("unknown", `no safe shape for "${program}"`);
      this.judgeHiddenHardStops(parser, command, args, state, judgement, true);
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
  private judgeHiddenHardStops(parser: ShellParser, command: ShellCommand, args: ShellWord[], state: ScriptState, judgement: Judgement, wrapperLike = false): void {
    const fed = command.redirects.flatMap((redirect) => (redirect.body?.static ? [redirect.body.text] : []));
    const found = hiddenHardStop(args, fed, this.hardStopProbe(parser, state, wrapperLike));
    if (found) judgement.raise("hard_stop", `${found}, in the arguments of "${shown(command.words).slice(0, 200)}"`);
  }

  /** `wrapperLike`: the program has no shapes at all, so its first argument may well be a command it runs. */
  private hardStopProbe(parser: ShellParser, state: ScriptState, wrapperLike = false): HardStopProbe {
    return {
      words: (words, fromStart) => {
        const unwrapped = unwrap(words);
        const program = unwrapped.words[0];
        if (!program?.static) return null;
        const name = baseName(program.text);
        const args = unwrapped.words.slice(1);
        // Words hidden in another command's arguments (`git rm -r .`, a subcommand of a program DuckLM
        // knows) are not taken for a removal of the workspace; those right after an unknown program are
        // (`setpriv rm -rf "$PWD"`).
        const workspace = wrapperLike && fromStart ? state.context.workspace : undefined;
        const verdict = judgeDestructive({ program: name, args, redirects: [], cwds: state.cwds, home: this.rules.home, workspace });
        if (verdict?.category === "hard_stop") return `"${shown(unwrapped.words)}" ${verdict.reason}`;
        const rule = this.rules.hardStop.find((candidate) => ruleMatches(candidate, name, args, this.rules.home, state.cwds.at(-1) ?? "/"));
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
    const verdict = judgeDestructive({ program: "", args: [], redirects: command.redirects, cwds: state.cwds, home: this.rules.home });
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
    const hard = this.rules.hardStop.find((rule) => ruleMatches(rule, program, args, this.rules.home, cwd));
    if (hard) judgement.raise("hard_stop", `"${commandText(program, args)}" matches hard_stop rule "${hard.text}"`);
    const noAlways = this.rules.noAlways.find((rule) => ruleMatches(rule, program, args, this.rules.home, cwd));
    if (noAlways) judgement.raise("no_always", `"${commandText(program, args)}" matches no_always rule "${noAlways.text}"`);
    const network = this.rules.network.find((rule) => ruleMatches(rule, program, args, this.rules.home, cwd));
    if (network) {
      judgement.network = true;
      judgement.raise("unknown", `"${commandText(program, args)}" uses the network`);
    }
  }
}
