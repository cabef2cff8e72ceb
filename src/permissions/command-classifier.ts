import type { CommandCategory } from "../contracts/index.js";
import type { PermissionsConfig } from "../config/config-schemas.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { analyzeShell, baseName, type SimpleCommand } from "./shell-analysis.js";

export interface CommandClassification {
  category: CommandCategory;
  /** Every simple command found, as the words that would run. */
  commands: string[];
  reason: string;
}

const CATEGORY_RANK: Record<CommandCategory, number> = { read_only: 0, normal: 1, unknown: 2, no_always: 3, hard_stop: 4 };

export function stricterCategory(a: CommandCategory, b: CommandCategory): CommandCategory {
  return CATEGORY_RANK[a] >= CATEGORY_RANK[b] ? a : b;
}

// Directories whose programs a `normal` rule may allow when named by path; `./sed` or `/tmp/ls`
// could be anything and is never allowed by a rule written for `sed` or `ls`.
const TRUSTED_DIRS = new Set(["/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"]);

// Long options and upper-case spellings that mean the same as a short flag, per program.
const FLAG_ALIASES: Record<string, Record<string, string>> = {
  rm: { "--recursive": "r", R: "r", "--force": "f", "--dir": "d" },
  chmod: { "--recursive": "R" },
  chown: { "--recursive": "R" },
  chgrp: { "--recursive": "R" },
  git: { "--force": "f", "--hard": "--hard" },
  cp: { "--recursive": "r", R: "r", "--force": "f" },
};

interface ParsedWords {
  flags: Set<string>;
  positionals: string[];
}

// Programs whose options are whole words after a single dash (`find -delete`, not `-d -e -l …`).
const WORD_OPTIONS = new Set(["find", "java", "gcc", "clang", "tar"]);

/** Splits words into flags (short flags one letter each, long ones whole) and positional words. */
function parseWords(program: string, words: readonly string[]): ParsedWords {
  const aliases = FLAG_ALIASES[program] ?? {};
  const wordOptions = WORD_OPTIONS.has(program);
  const flags = new Set<string>();
  const positionals: string[] = [];
  let onlyPositionals = false;
  for (const word of words) {
    if (onlyPositionals || word === "-" || !word.startsWith("-")) {
      positionals.push(word);
      continue;
    }
    if (word === "--") {
      onlyPositionals = true;
      continue;
    }
    if (word.startsWith("--") || wordOptions) {
      const name = word.split("=", 1)[0]!;
      flags.add(aliases[name] ?? name);
      continue;
    }
    for (const letter of word.slice(1)) flags.add(aliases[letter] ?? letter);
  }
  return { flags, positionals };
}

/** `/*`, `//`, `/.`, `/./` all name the root; `~/` is `~`. */
function normalisePath(word: string): string {
  if (!word.startsWith("/") && !word.startsWith("~")) return word;
  let path = word.replace(/\/+/g, "/").replace(/(\/\.)+$/, "").replace(/\/\*$/, "").replace(/\/$/, "");
  if (path === "" && word.startsWith("/")) path = "/";
  return path === "~/" ? "~" : path;
}

interface Rule {
  text: string;
  program: string;
  flags: Set<string>;
  positionals: RegExp[];
}

function globToRegExp(pattern: string): RegExp {
  const escaped = pattern.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".");
  return new RegExp(`^${escaped}$`);
}

function parseRule(text: string): Rule {
  const [program = "", ...words] = text.trim().split(/\s+/);
  const parsed = parseWords(program, words);
  // A pattern with a wildcard is taken as written; a plain path is normalised like the commands are.
  const patterns = parsed.positionals.map((word) => globToRegExp(word.includes("*") ? word : normalisePath(word)));
  return { text, program, flags: parsed.flags, positionals: patterns };
}

/** A rule matches when the program is the same and every flag and positional it names is present. */
function ruleMatches(rule: Rule, program: string, parsed: ParsedWords): boolean {
  if (rule.program !== program) return false;
  for (const flag of rule.flags) if (!parsed.flags.has(flag)) return false;
  const positionals = parsed.positionals.map(normalisePath);
  return rule.positionals.every((pattern) => positionals.some((word) => pattern.test(word)));
}

export interface PermissionExample {
  command: string;
  category: CommandCategory;
}

/**
 * Classifies shell commands against config/permissions.json. The command is parsed with a real shell
 * parser; every simple command inside it (through `&&`, `;`, pipes, `$(…)`, backticks, subshells,
 * brace groups, `bash -c`, `eval`, `find -exec`, and wrappers such as `sudo`, `env`, `timeout`, `xargs`)
 * is classified, and the strictest category wins. What cannot be read from the text is asked.
 */
export class CommandClassifier {
  private readonly hardStop: Rule[];
  private readonly noAlways: Rule[];
  private readonly normal: Rule[];
  private readonly hardStopPhrases: Array<{ text: string; words: string[] }>;

  constructor(config: PermissionsConfig) {
    this.hardStop = config.categories.hard_stop.map(parseRule);
    this.noAlways = config.categories.no_always.map(parseRule);
    this.normal = config.categories.normal.map(parseRule);
    this.hardStopPhrases = config.categories.hard_stop.map((text) => ({ text, words: text.trim().split(/\s+/) }));
  }

  async classify(command: string): Promise<CommandClassification> {
    if (command.trim() === "") return { category: "unknown", commands: [], reason: "empty command" };
    const analysis = await analyzeShell(command);
    let category: CommandCategory = "normal";
    let reason = "every command matches a normal rule";
    const raise = (next: CommandCategory, why: string) => {
      if (CATEGORY_RANK[next] > CATEGORY_RANK[category]) {
        category = next;
        reason = why;
      }
    };
    for (const simple of analysis.commands) {
      const [next, why] = this.classifySimple(simple);
      raise(next, why);
    }
    const phrase = this.findHardStop(command);
    if (phrase) raise("hard_stop", `contains hard_stop command "${phrase}"`);
    if (analysis.parseError) raise("unknown", "the command does not parse completely; asking");
    if (analysis.opaque.length > 0) raise("unknown", `runs a script that cannot be read here: ${analysis.opaque[0]}`);
    if (analysis.commands.length === 0) raise("unknown", "no command found");
    return { category, commands: analysis.commands.filter((c) => c.words.length > 0).map((c) => c.words.join(" ")), reason };
  }

  private classifySimple(command: SimpleCommand): [CommandCategory, string] {
    const shown = command.words.join(" ") || "(redirection)";
    if (command.dynamic) return ["unknown", `"${shown}": the program is only known at run time`];
    if (command.words.length === 0) {
      return command.writesTo.length > 0 ? ["unknown", `writes to ${command.writesTo.join(", ")}`] : ["normal", "nothing runs"];
    }
    const program = baseName(command.program);
    const parsed = parseWords(program, command.words.slice(1));
    const hard = this.hardStop.find((rule) => ruleMatches(rule, program, parsed));
    if (hard) return ["hard_stop", `"${shown}" matches hard_stop rule "${hard.text}"`];
    const noAlways = this.noAlways.find((rule) => ruleMatches(rule, program, parsed));
    if (noAlways) return ["no_always", `"${shown}" matches no_always rule "${noAlways.text}"`];
    const named = command.program.includes("/") ? command.program.slice(0, command.program.lastIndexOf("/")) || "/" : null;
    if (named !== null && !TRUSTED_DIRS.has(named)) return ["unknown", `"${command.program}" is not a system program`];
    const normal = this.normal.find((rule) => ruleMatches(rule, program, parsed));
    if (!normal) return ["unknown", `no rule for "${program}"`];
    if (command.writesTo.length > 0) return ["unknown", `"${shown}" writes to ${command.writesTo.join(", ")}`];
    return ["normal", `"${shown}" matches normal rule "${normal.text}"`];
  }

  /**
   * The hard-stop pre-check of a task's text: a hard_stop rule whose words appear, in order, in it.
   * Prose that quotes such a command is refused too, on purpose.
   */
  findHardStop(text: string): string | null {
    const words = text.split(/[\s;&|`$()<>{}"']+/).filter(Boolean).map((word) => word.replace(/\\/g, ""));
    for (const phrase of this.hardStopPhrases) {
      const [program, ...args] = phrase.words;
      for (let i = 0; i < words.length; i += 1) {
        if (baseName(words[i]!) !== program) continue;
        const rest = words.slice(i + 1, i + 1 + Math.max(8, args.length * 2)).map(normalisePath);
        if (args.every((arg) => rest.includes(normalisePath(arg)))) return phrase.text;
      }
    }
    return null;
  }

  /** Checks the examples permissions.json carries; a mismatch is a configuration error. */
  async checkExamples(examples: readonly PermissionExample[]): Promise<void> {
    const failures: string[] = [];
    for (const example of examples) {
      const got = await this.classify(example.command);
      if (got.category !== example.category) failures.push(`"${example.command}" is ${got.category}, the example says ${example.category} (${got.reason})`);
    }
    if (failures.length > 0) {
      throw new DuckError(ErrorCode.ConfigInvalid, `permissions.json examples do not hold: ${failures.join("; ")}`, { details: { failures } });
    }
  }
}
