import { readFileSync, statSync } from "node:fs";
import { resolve as resolvePath } from "node:path";
import { inputOf, producedWords } from "./literal-output.js";
import { isInterpreter, readInterpreter, scanCode } from "./inline-code.js";
import { Judgement, readShellArgs, shown, type ScriptState } from "./judgement.js";
import { looseCommands } from "./loose-commands.js";
import { noteProgramModules } from "./recipe-files.js";
import type { ScriptJudge } from "./script-judge.js";
import type { ShellCommand, ShellParser } from "./shell-script.js";
import { baseName } from "./command-wrappers.js";
import { workspaceOrAbove } from "./destructive-commands.js";
import { isCriticalDirectory, judgeWorkspacePath, normalisePath } from "./path-judge.js";
import { dashReading } from "./shell-syntax.js";
import { literalWord, type ShellWord } from "./shell-words.js";

/** Most bytes of a script file read to judge it; a longer one stays unjudged. */
const SCRIPT_FILE_MAX_BYTES = 256 * 1024;

/**
 * The text of a script file a shell is told to run, where it can be known: a fixed name, in the one
 * directory the command runs in, inside the workspace and not DuckLM's own state or `.git` (its text
 * would reach the permission request), on the real file system (not while checking the examples),
 * and not too long to read. A coder step's pending file is read as it will be written.
 */
export function scriptFileText(file: ShellWord, state: ScriptState): string | null {
  const read = readScriptFile(file, state);
  return "text" in read ? read.text : null;
}

/** The script's text, or why there is none: not a workspace file to read, absent, or unreadable (too large, not a file). */
function readScriptFile(file: ShellWord, state: ScriptState): { text: string } | { none: "outside" | "absent" | "unjudged" } {
  const path = workspaceFilePath(file, state);
  if (path === null) return { none: "outside" };
  const pending = state.context.pendingFiles?.get(path) ?? state.context.pendingFiles?.get(resolvePath(state.cwds[0]!, file.text));
  if (pending !== undefined) return pending.length <= SCRIPT_FILE_MAX_BYTES ? { text: pending } : { none: "unjudged" };
  try {
    const info = statSync(path);
    return info.isFile() && info.size <= SCRIPT_FILE_MAX_BYTES ? { text: readFileSync(path, "utf8") } : { none: "unjudged" };
  } catch (error) {
    return { none: (error as NodeJS.ErrnoException).code === "ENOENT" ? "absent" : "unjudged" };
  }
}

/** Where a file a command names is, when it is a fixed name inside the workspace, read from the one directory the command runs in. */
export function workspaceFilePath(file: ShellWord, state: ScriptState): string | null {
  const cwd = state.cwds.length === 1 ? state.cwds[0] : null;
  if (!file.static || file.glob || !cwd || !state.context.physical) return null;
  if (judgeWorkspacePath(file, [cwd], state.context) !== "inside") return null;
  return state.context.physical.resolve(file.text, cwd);
}

/** A path that is the command's own input or another of its descriptors: what it reads there is fed at run time. */
function readsInput(file: ShellWord): boolean {
  return /^\/dev\/(stdin|fd\/\d+)$|^\/proc\/(self|thread-self|\d+)\/fd\/\d+$/.test(file.text);
}

/** Each directory the command may run in, as a state of its own; null when one of them is only known at run time. */
function eachDirectory(state: ScriptState): ScriptState[] | null {
  if (state.cwds.some((cwd) => cwd === null)) return null;
  return [...new Set(state.cwds as string[])].map((cwd) => ({ ...state, cwds: [cwd] }));
}

/**
 * Notes a workspace file whose content decides what the command does (a script, a program file, a
 * build recipe), so that an approval of the command is bound to that content, in each directory the
 * command may run in. A relative name in a directory only known at run time cannot be bound: asked.
 */
export function noteRanFile(file: ShellWord, state: ScriptState, judgement: Judgement, pulledIn = false): void {
  const into = pulledIn ? judgement.pulledInFiles : judgement.ranFiles;
  if (!state.context.physical) return;
  const places = eachDirectory(state);
  if (places === null) {
    if (!file.text.startsWith("/")) judgement.raise("no_always", `runs ${file.text} in a directory only known at run time, so which file runs cannot be known`);
    return;
  }
  if (file.glob && judgeWorkspacePath({ ...file, glob: false }, state.cwds as string[], state.context) === "inside") {
    judgement.raise("no_always", `runs a file of the workspace named by a glob (${file.text}): which one runs depends on what is there`);
    return;
  }
  for (const here of places) {
    const path = workspaceFilePath(file, here);
    if (path === null) continue;
    into.add(path);
    // The name a coder step will write it under, where a link in the way makes the two differ.
    const lexical = resolvePath(here.cwds[0]!, file.text);
    if (lexical !== path && here.context.pendingFiles?.has(lexical)) into.add(lexical);
  }
}

/**
 * A script file a shell runs, judged by what it holds now, in each directory it may run in: a command
 * in it counts as if written out (`bash a.sh` holding `mount …` is asked however the task was
 * pre-approved). A name only known at run time (`xargs bash`, `bash "$f"`), a glob, a file this line
 * may have written first, or a workspace file too large to judge, is asked every time.
 */
export function judgeScriptFile(judge: ScriptJudge, parser: ShellParser, file: ShellWord, state: ScriptState, judgement: Judgement, where: string): void {
  if (!file.static) {
    judgement.raise("no_always", `runs a script file${where} whose name is only known at run time (${file.text})`);
    return;
  }
  if (file.glob) {
    judgement.raise("no_always", `runs a script file${where} named by a glob (${file.text}): which one runs depends on what is there`);
    return;
  }
  if (readsInput(file)) {
    judgement.raise("no_always", `runs a script fed through its input (${file.text}), whose text is only known at run time`);
    return;
  }
  if (state.writes.by) {
    judgement.raise("no_always", `runs the script file ${file.text}${where}, which an earlier command of this line ("${state.writes.by}") may have written`);
    return;
  }
  noteRanFile(file, state, judgement);
  const places = eachDirectory(state);
  if (places === null || !state.context.physical) {
    judgement.raise("unknown", `runs the script file ${file.text}${where}, whose content is not judged`);
    return;
  }
  for (const here of places) {
    const read = readScriptFile(file, here);
    if ("none" in read && read.none === "unjudged") {
      judgement.raise("no_always", `runs the script file ${file.text}${where}, which is in the workspace but too large or not readable to be judged`);
      continue;
    }
    judgement.raise("unknown", `runs the script file ${file.text}${where}, ${"text" in read ? "judged as it is now" : read.none === "absent" ? "which is not there (yet)" : "whose content is not judged"}`);
    if ("text" in read) judgeNestedScript(judge, parser, { text: read.text, static: true, glob: false }, here, judgement, "a script file");
  }
}

/** Whether a file a command runs by its path (`./build.sh`) is a shell script: a shell's `#!` line, or none. */
export function shellScriptText(file: ShellWord, state: ScriptState): string | null {
  const text = scriptFileText(file, state);
  if (text === null || text.includes("\0")) return null;
  const first = text.split("\n", 1)[0]!;
  if (!first.startsWith("#!")) return text;
  const interpreter = first.slice(2).trim().split(/\s+/);
  const name = baseName(interpreter[0] === "/usr/bin/env" || interpreter[0] === "/bin/env" ? (interpreter[1] ?? "") : (interpreter[0] ?? ""));
  return SHELLS.has(name) ? text : null;
}

const SHELLS = new Set(["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "yash"]);

export function judgeNestedScript(judge: ScriptJudge, parser: ShellParser, script: ShellWord, state: ScriptState, judgement: Judgement, what: string): void {
  if (!script.static) {
    judgement.raise("no_always", `runs ${what} that is only known at run time: ${script.text}`);
    for (const words of looseCommands(script.text, state.env)) judge.judgeLoose(words, state, judgement);
    return;
  }
  judge.judgeScript(parser, script.text, { ...state, depth: state.depth + 1, cwds: [...state.cwds] }, judgement);
}

/**
 * Shells, eval, interpreters and find -exec run more code: it is judged too. Returns true when the
 * command's own words are accounted for by that (so no shape is needed).
 */
export function judgeNested(judge: ScriptJudge, parser: ShellParser, command: ShellCommand, program: string, args: ShellWord[], state: ScriptState, judgement: Judgement): boolean {
  if (SHELLS.has(program)) {
    if (args.length > 0 && args.every((word) => ["--version", "--help"].includes(word.text))) return false;
    const shell = readShellArgs(args);
    if (shell.inline) {
      const script = shell.script ?? { text: "", static: false, glob: false };
      // Arguments after the script become $0, $1… inside it.
      const positional = new Map(state.env.variables);
      shell.positional.forEach((word, index) => (word.static ? positional.set(String(index), word.text) : positional.delete(String(index))));
      const inner = { ...state, env: { ...state.env, variables: positional } };
      judgeNestedScript(judge, parser, script, inner, judgement, "a script");
      if (!shell.plainOptions || shell.positional.length > 0) judgement.raise("unknown", `"${program} ${shown(args)}" starts a shell with options or arguments`);
      // The grammar is bash's: another shell may read the same text as other commands.
      if (program !== "bash") {
        judgement.raise("unknown", `${program} reads its script differently from bash, whose reading is all that is judged`);
        if (script.static) judgeNestedScript(judge, parser, { ...script, text: dashReading(script.text) }, inner, judgement, "a script");
      }
      return true;
    }
    if (shell.file) {
      judgeScriptFile(judge, parser, shell.file, state, judgement, "");
      return true;
    }
    judgeStdinScript(judge, parser, command, state, judgement, program);
    return true;
  }
  if (program === "eval") {
    judgeNestedScript(judge, parser, { text: shown(args), static: args.every((word) => word.static), glob: false }, state, judgement, "eval text");
    return true;
  }
  if (program === "source" || program === ".") {
    if (args[0]) judgeScriptFile(judge, parser, args[0], state, judgement, " in the shell itself");
    else judgement.raise("unknown", "runs no script file in the shell itself");
    return true;
  }
  if (program === "alias") {
    for (const word of args) if (word.text.includes("=")) judgeNestedScript(judge, parser, { ...word, text: word.text.slice(word.text.indexOf("=") + 1) }, state, judgement, "an alias");
    judgement.raise("unknown", "defines an alias");
    return true;
  }
  if (program === "find") {
    const starts = producedWords({ words: [literalWord("find"), ...args], assignments: [], redirects: [], pipedFrom: null }) ?? ["."];
    for (let i = 0; i < args.length; i += 1) {
      if (!["-exec", "-execdir", "-ok", "-okdir"].includes(args[i]!.text)) continue;
      // `;` ends the command; `+` only right after `{}` (elsewhere it is an argument like any other).
      const end = args.findIndex((word, j) => j > i && (word.text === ";" || (word.text === "+" && args[j - 1]?.text === "{}")));
      const part = args.slice(i + 1, end === -1 ? undefined : end);
      if (part.length === 0) continue;
      const runner = baseName(part[0]!.text);
      if ((SHELLS.has(runner) || runner === "source" || runner === ".") && part.some((word) => word.text.includes("{}"))) {
        judgement.raise("no_always", `runs ${runner} on each file find finds, whose content is not judged`);
      }
      // `{}` is each path found: judged as each place the search starts from.
      for (const start of starts) {
        const words = part.map((word) => (word.text.includes("{}") ? { ...word, text: word.text.split("{}").join(start), eachFound: true } : word));
        judge.judgeCommand(parser, { words, assignments: [], redirects: [], pipedFrom: null }, state, judgement);
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
      scanInterpreterCode(judge, parser, code.text, state, judgement, program);
      judgement.raise("unknown", `${program} runs inline code`);
    }
    if (use.readsStdin) judgeStdinScript(judge, parser, command, state, judgement, program, true);
    if (use.runsFile) judgement.raise("unknown", `${program} runs a program file, whose content is not judged`);
    if (use.file && readsInput(use.file)) judgement.raise("no_always", `${program} runs a program fed through its input (${use.file.text}), only known at run time`);
    if (use.file) noteRanFile(use.file, state, judgement);
    noteProgramModules(program, use.file, use.module, use.preloads, state, judgement);
    return true;
  }
  return false;
}

function judgeStdinScript(judge: ScriptJudge, parser: ShellParser, command: ShellCommand, state: ScriptState, judgement: Judgement, program: string, code = false): void {
  const input = inputOf(command);
  if (!input) {
    judgement.raise("unknown", `${program} reads commands from its input`);
    return;
  }
  if (!input.static) {
    judgement.raise("no_always", `${program} runs a script piped in from a command whose output is only known at run time`);
    return;
  }
  if (code) scanInterpreterCode(judge, parser, input.text, state, judgement, program);
  else judge.judgeScript(parser, input.text, { ...state, depth: state.depth + 1, cwds: [...state.cwds] }, judgement);
  judgement.raise("unknown", `${program} runs a script fed through its input`);
}

function scanInterpreterCode(judge: ScriptJudge, parser: ShellParser, code: string, state: ScriptState, judgement: Judgement, program: string): void {
  const finding = scanCode(
    code,
    (text) => {
      const probe = new Judgement();
      judge.judgeScript(parser, text, { ...state, depth: state.depth + 1, cwds: [...state.cwds] }, probe);
      return probe.category === "hard_stop" ? probe.reason : null;
    },
    0,
    (path) => {
      // Where the code runs: each folder the command line may be in; an unknown one could be any.
      for (const cwd of state.cwds) {
        if (cwd === null && !path.startsWith("/")) continue;
        const target = normalisePath(path, cwd ?? "/");
        const found = workspaceOrAbove(target, state.context.workspace) ?? (isCriticalDirectory(target, judge.rules.home) ? target : null);
        if (found) return found;
      }
      return null;
    },
  );
  if (finding) judgement.raise("hard_stop", `${program}: ${finding.reason}`);
}
