import { readdirSync } from "node:fs";
import type { SafeShapeConfig } from "../config/config-schemas.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { judgeWorkspacePath, type PathContext } from "./path-judge.js";
import type { ShellWord } from "./shell-words.js";

/** What one value of an option or one operand may be. */
type ValueKind = "path" | "text" | "number";

interface OptionSpec {
  /** May be given without a value. */
  flag: boolean;
  /** The kind of value it takes. */
  value: ValueKind | null;
  /**
   * The value may be the next word (`-n 5`, `--lines 5`: written with a space in the shape). A long
   * option written `--colour=<text>` takes its value only after `=`: GNU's optional values never take
   * the next word, so the next word stays an operand and is judged as one.
   */
  separate: boolean;
}

/** A rule of config/permissions.json `normal`, ready for matching. */
export interface CommandShape {
  /** How the rule was written, for reasons shown to people. */
  label: string;
  program: string;
  subcommand: string | null;
  /** Every word fixed (a rule written as a plain string: `node --version`). */
  exact: string[] | null;
  shortOptions: Map<string, OptionSpec>;
  longOptions: Map<string, OptionSpec>;
  /** `find`-style options: whole words after one dash. */
  wordOptions: boolean;
  /** `-5` means `-n 5` (head, tail, git log). */
  numericShorthand: boolean;
  operands: { kinds: ValueKind[]; rest: ValueKind | null };
  maxOperands: number | null;
  globs: boolean;
  dynamic: boolean;
  /** Safe to run again after a crash cut it off (see permissions.json `rerun_safe`). */
  rerunSafe: boolean;
  examples: string[];
  notExamples: string[];
}

const KINDS: Record<string, ValueKind> = { "<path>": "path", "<text>": "text", "<n>": "number" };

function kindOf(token: string, label: string): ValueKind {
  const kind = KINDS[token];
  if (!kind) throw new DuckError(ErrorCode.ConfigInvalid, `${label}: unknown value kind ${token} (use <path>, <text> or <n>)`);
  return kind;
}

/** Reads one rule of `normal`: a plain string is an exact command, an object a shape. */
export function parseShape(rule: string | SafeShapeConfig): CommandShape {
  if (typeof rule === "string") {
    const words = rule.trim().split(/\s+/);
    return {
      label: rule,
      program: words[0] ?? "",
      subcommand: null,
      exact: words,
      shortOptions: new Map(),
      longOptions: new Map(),
      wordOptions: false,
      numericShorthand: false,
      operands: { kinds: [], rest: null },
      maxOperands: 0,
      globs: false,
      dynamic: false,
      rerunSafe: false,
      examples: [rule],
      notExamples: [],
    };
  }
  const label = rule.subcommand ? `${rule.program} ${rule.subcommand}` : rule.program;
  const shortOptions = new Map<string, OptionSpec>();
  const longOptions = new Map<string, OptionSpec>();
  let numericShorthand = false;
  for (const option of rule.options) {
    const [name = "", value] = option.includes("=") ? option.split("=", 2) : option.split(/\s+/, 2);
    const kind = value ? kindOf(value, `${label} option ${option}`) : null;
    const separate = kind !== null && !option.includes("=");
    const merge = (map: Map<string, OptionSpec>, key: string) => {
      const known = map.get(key);
      // Listed both as `--porcelain` and `--porcelain=<text>`: the value is optional.
      map.set(key, { flag: (known?.flag ?? false) || kind === null, value: kind ?? known?.value ?? null, separate: (known?.separate ?? false) || separate });
    };
    if (name === "-<n>") numericShorthand = true;
    else if (name.startsWith("--") || rule.word_options) merge(longOptions, name);
    else if (/^-[^-]$/.test(name)) merge(shortOptions, name.slice(1));
    else throw new DuckError(ErrorCode.ConfigInvalid, `${label}: option ${option} is neither -x nor --long`);
  }
  const kinds = (Array.isArray(rule.operands) ? rule.operands : [`${rule.operands}...`]).map((entry) => entry.trim());
  const fixed: ValueKind[] = [];
  let rest: ValueKind | null = null;
  kinds.forEach((entry, index) => {
    if (entry === "none...") return;
    const repeated = entry.endsWith("...");
    const kind = kindOf(`<${entry.replace(/\.\.\.$/, "").replace(/s$/, "").replace(/^number$/, "n")}>`, label);
    if (repeated && index !== kinds.length - 1) throw new DuckError(ErrorCode.ConfigInvalid, `${label}: only the last operand kind may repeat`);
    if (repeated) rest = kind;
    else fixed.push(kind);
  });
  return {
    label,
    program: rule.program,
    subcommand: rule.subcommand ?? null,
    exact: null,
    shortOptions,
    longOptions,
    wordOptions: rule.word_options,
    numericShorthand,
    operands: { kinds: fixed, rest },
    maxOperands: rule.max_operands ?? null,
    globs: rule.globs,
    dynamic: rule.dynamic,
    rerunSafe: rule.rerun_safe,
    examples: rule.examples,
    notExamples: rule.not_examples,
  };
}

export type ShapeMatch = { ok: true } | { ok: false; reason: string };

// Options of git itself that change nothing about what a read-only subcommand does.
const GIT_GLOBAL_FLAGS = new Set(["--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--no-replace-objects"]);

function checkValue(kind: ValueKind, word: ShellWord, cwds: readonly (string | null)[], paths: PathContext, what: string): ShapeMatch {
  if (!word.static) return { ok: false, reason: `${what} is only known at run time` };
  if (kind === "number") return /^[+-]?\d+(\.\d+)?[A-Za-z]{0,3}$/.test(word.text) ? { ok: true } : { ok: false, reason: `${what} "${word.text}" is not a number` };
  // A glob in text still expands to file names, wherever it points (`echo /root/.ssh/*`).
  if (kind === "text" && !word.glob) return { ok: true };
  const verdict = judgeWorkspacePath(word, cwds, paths);
  if (verdict === "inside") return { ok: true };
  if (verdict === "protected") return { ok: false, reason: `${what} "${word.text}" is DuckLM's own state or .git internals` };
  if (verdict === "dynamic") return { ok: false, reason: `${what} "${word.text}" depends on where an earlier cd went` };
  return { ok: false, reason: `${what} "${word.text}" is outside the workspace` };
}

const TEST_BINARY = new Set(["=", "==", "!="]);

/**
 * Where a word only known at run time may stand in a shape that allows them. Only echo takes any
 * value anywhere. Elsewhere a value could be an option or an operator that evaluates its operand as
 * code (`printf -v 'a[$(…)]'`, `[ -v 'a[$(…)]' ]`): it must be quoted (one word), never printf's
 * format, and in `[ ]` only where the fixed words make it an operand whatever it holds.
 */
function runTimeWordProblem(shape: CommandShape, operands: readonly ShellWord[]): string | null {
  if (shape.program === "echo" || operands.every((word) => word.static)) return null;
  if (operands.some((word) => !word.static && word.mayDivide)) return "a value only known at run time, unquoted, may split into several words and options";
  if (shape.program === "printf") return operands[0]!.static ? null : "printf's format is only known at run time (it could be an option)";
  if (shape.program === "[") {
    const inner = operands.at(-1)?.text === "]" ? operands.slice(0, -1) : operands;
    const fixed = (index: number) => inner[index]!.static;
    if (inner.length === 1) return null;
    if (inner.length === 2 && fixed(0) && /^-[a-zA-Z]$/.test(inner[0]!.text) && inner[0]!.text !== "-v") return null;
    if (inner.length === 3 && fixed(1) && TEST_BINARY.has(inner[1]!.text)) return null;
    return "in [ ], a value only known at run time could be read as an operator";
  }
  return null;
}

/**
 * What a shape's program reads besides the paths it is given: `diff -r` follows links below them
 * (a link a repository brought in may lead anywhere), jq's `import`/`include` load files from a
 * search path. Null when it reads nothing more.
 */
function readsBeyondOperands(shape: CommandShape, words: readonly ShellWord[], operands: readonly ShellWord[], cwds: readonly (string | null)[], paths: PathContext): string | null {
  if (shape.program === "jq") return operands[0] && /\b(import|include)\b|modulemeta|get_search_list/.test(operands[0].text) ? "jq loads modules and data files by import or include, which are not judged" : null;
  if (shape.program !== "diff" || !words.some((word) => word.text === "--recursive" || /^-[a-zA-Z]*r/.test(word.text))) return null;
  if (!paths.physical) return null;
  for (const operand of operands) {
    for (const cwd of cwds) {
      if (cwd === null) return "diff -r runs where an earlier cd went, which is only known at run time";
      const leaving = linksLeavingWorkspace(paths.physical.resolve(operand.text, cwd), paths);
      if (leaving) return `diff -r follows links below its operands, and ${leaving}`;
    }
  }
  return null;
}

/** A link under a folder that leads out of the workspace (or into what is protected), described; null when there is none. */
function linksLeavingWorkspace(folder: string, paths: PathContext): string | null {
  let budget = 2000;
  const queue = [folder];
  while (queue.length > 0) {
    const dir = queue.shift()!;
    let entries: import("node:fs").Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      continue;
    }
    for (const entry of entries) {
      if ((budget -= 1) < 0) return `${folder} holds too many files to check them all for links`;
      const path = `${dir}/${entry.name}`;
      if (entry.isSymbolicLink()) {
        const target = paths.physical!.resolve(entry.name, dir);
        if (judgeWorkspacePath({ text: target, static: true, glob: false }, [paths.workspace], paths) !== "inside") return `${path} leads to ${target}`;
      } else if (entry.isDirectory()) queue.push(path);
    }
  }
  return null;
}

/** A glob that cannot expand to something starting with `-` (it begins with a literal that does not). */
function anchoredGlob(text: string): boolean {
  return !/^[*?[]/.test(text) && !text.startsWith("-");
}

/**
 * Whether every word of a command is accounted for by the shape: the program, the subcommand, only
 * options the shape lists (with values of the right kind), and operands of the kinds it names —
 * paths inside the workspace. Anything left over means the shape does not cover the command.
 */
export function matchShape(shape: CommandShape, program: string, args: readonly ShellWord[], cwds: readonly (string | null)[], paths: PathContext): ShapeMatch {
  if (program !== shape.program) return { ok: false, reason: `not ${shape.program}` };
  if (shape.exact) {
    const same = args.length === shape.exact.length - 1 && args.every((word, i) => word.static && !word.glob && word.text === shape.exact![i + 1]);
    return same ? { ok: true } : { ok: false, reason: `only exactly "${shape.label}" is allowed` };
  }
  let words = [...args];
  if (shape.subcommand) {
    while (words[0] && words[0].static && GIT_GLOBAL_FLAGS.has(words[0].text)) words = words.slice(1);
    if (words[0]?.text !== shape.subcommand || !words[0].static) return { ok: false, reason: `not ${shape.label}` };
    words = words.slice(1);
  }
  const operands: ShellWord[] = [];
  let onlyOperands = false;
  for (let i = 0; i < words.length; i += 1) {
    const word = words[i]!;
    const text = word.text;
    const optionLike = word.static && !onlyOperands && text.startsWith("-") && text !== "-";
    if (!word.static && !onlyOperands && !shape.dynamic) return { ok: false, reason: `"${text}" is only known at run time and could be an option` };
    if (word.glob && !onlyOperands && !shape.globs && !anchoredGlob(text)) return { ok: false, reason: `the glob "${text}" could expand to an option of ${shape.label}` };
    if (!optionLike) {
      operands.push(word);
      continue;
    }
    if (text === "--") {
      // find's `--` only ends its own few options: the expression after the starting points still counts.
      if (!shape.wordOptions) onlyOperands = true;
      continue;
    }
    if (text.startsWith("--") || shape.wordOptions) {
      const name = text.includes("=") ? text.slice(0, text.indexOf("=")) : text;
      const spec = shape.longOptions.get(name);
      if (!spec) return { ok: false, reason: `option ${name} is not in the safe shape of ${shape.label}` };
      if (!text.includes("=") && spec.flag) continue;
      if (spec.value === null) return { ok: false, reason: `option ${name} takes no value` };
      if (!text.includes("=") && !spec.separate) return { ok: false, reason: `option ${name} takes its value as ${name}=…` };
      const valueWord = text.includes("=") ? { ...word, text: text.slice(text.indexOf("=") + 1) } : words[++i];
      if (!valueWord) return { ok: false, reason: `option ${name} needs a value` };
      const checked = checkValue(spec.value, valueWord, cwds, paths, `the value of ${name}`);
      if (!checked.ok) return checked;
      continue;
    }
    if (shape.numericShorthand && /^-\d+$/.test(text)) continue;
    for (let k = 1; k < text.length; k += 1) {
      const letter = text[k]!;
      const spec = shape.shortOptions.get(letter);
      if (!spec) return { ok: false, reason: `option -${letter} is not in the safe shape of ${shape.label}` };
      if (spec.value === null) continue;
      const attached = text.slice(k + 1);
      if (!attached && spec.flag) continue;
      const valueWord = attached ? { ...word, text: attached } : words[++i];
      if (!valueWord) return { ok: false, reason: `option -${letter} needs a value` };
      const checked = checkValue(spec.value, valueWord, cwds, paths, `the value of -${letter}`);
      if (!checked.ok) return checked;
      break;
    }
  }
  if (shape.maxOperands !== null && operands.length > shape.maxOperands) return { ok: false, reason: `${shape.label} takes at most ${shape.maxOperands} operand(s)` };
  const dynamicProblem = runTimeWordProblem(shape, operands);
  if (dynamicProblem) return { ok: false, reason: dynamicProblem };
  const readsFurther = readsBeyondOperands(shape, words, operands, cwds, paths);
  if (readsFurther) return { ok: false, reason: readsFurther };
  for (let i = 0; i < operands.length; i += 1) {
    const kind = shape.operands.kinds[i] ?? shape.operands.rest;
    if (!kind) return { ok: false, reason: `${shape.label} takes no operand "${operands[i]!.text}"` };
    const word = operands[i]!;
    if (!word.static && shape.dynamic && kind === "text") continue;
    const checked = checkValue(word.glob ? "path" : kind, word, cwds, paths, "operand");
    if (!checked.ok) return checked;
  }
  // Without a path, a command that takes paths works on the directory it runs in (`ls`, `grep -r x`):
  // that directory is judged as if named, so `cd - && ls` is no way out.
  const takesPaths = shape.operands.kinds.includes("path") || shape.operands.rest === "path";
  const namedPath = operands.some((word, i) => (shape.operands.kinds[i] ?? shape.operands.rest) === "path");
  if (takesPaths && !namedPath) {
    const here = checkValue("path", { text: ".", static: true, glob: false }, cwds, paths, "the directory it runs in");
    if (!here.ok) return here;
  }
  return { ok: true };
}
