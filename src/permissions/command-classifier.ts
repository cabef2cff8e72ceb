import type { CommandCategory } from "../contracts/index.js";
import type { PermissionsConfig } from "../config/config-schemas.js";

export interface CommandClassification {
  category: CommandCategory;
  /** The simple commands found, as words joined by spaces. */
  commands: string[];
  reason: string;
}

// Anything that can hide a second command or change what runs. Until commands are parsed by a real
// shell parser, a command that contains one of these is never allowed without asking.
const SHELL_SYNTAX = /[;&|`$()<>{}\\\n'"*?[\]~#!]/;

const CATEGORY_RANK: Record<CommandCategory, number> = { read_only: 0, normal: 1, unknown: 2, no_always: 3, hard_stop: 4 };

export function stricterCategory(a: CommandCategory, b: CommandCategory): CommandCategory {
  return CATEGORY_RANK[a] >= CATEGORY_RANK[b] ? a : b;
}

interface Rule {
  program: string;
  args: string[];
  text: string;
}

function parseRule(text: string): Rule {
  const [program = "", ...args] = text.trim().split(/\s+/);
  return { program, args, text };
}

function programName(word: string): string {
  return word.slice(word.lastIndexOf("/") + 1);
}

/** A rule matches when the program is the same and every argument it names appears among the words. */
function ruleMatches(rule: Rule, words: readonly string[]): boolean {
  if (words.length === 0 || programName(words[0]!) !== rule.program) return false;
  return rule.args.every((arg) => words.slice(1).includes(arg));
}

/**
 * Classifies commands against config/permissions.json. Plain word sequences are matched against the
 * rules; anything with shell syntax is `unknown` (asked) unless a hard_stop rule is visible in it.
 */
export class CommandClassifier {
  private readonly hardStop: Rule[];
  private readonly noAlways: Rule[];
  private readonly normal: Rule[];

  constructor(private readonly config: PermissionsConfig) {
    this.hardStop = config.categories.hard_stop.map(parseRule);
    this.noAlways = config.categories.no_always.map(parseRule);
    this.normal = config.categories.normal.map(parseRule);
  }

  classify(command: string): CommandClassification {
    const trimmed = command.trim();
    const words = trimmed.split(/\s+/).filter(Boolean);
    const hard = this.findHardStop(trimmed);
    if (hard) return { category: "hard_stop", commands: [trimmed], reason: `matches hard_stop rule "${hard}"` };
    if (words.length === 0) return { category: "unknown", commands: [], reason: "empty command" };
    if (SHELL_SYNTAX.test(trimmed)) {
      return { category: "unknown", commands: [trimmed], reason: "contains shell syntax that is not parsed yet; asking" };
    }
    const noAlways = this.noAlways.find((rule) => ruleMatches(rule, words));
    if (noAlways) return { category: "no_always", commands: [trimmed], reason: `matches no_always rule "${noAlways.text}"` };
    const normal = this.normal.find((rule) => ruleMatches(rule, words));
    if (normal) return { category: "normal", commands: [trimmed], reason: `matches normal rule "${normal.text}"` };
    return { category: "unknown", commands: [trimmed], reason: `no rule for ${programName(words[0]!)}` };
  }

  /**
   * The hard-stop pre-check of a task's text: a hard_stop rule whose program and arguments appear,
   * in order, anywhere in it. Prose that quotes such a command is refused too, on purpose.
   */
  findHardStop(text: string): string | null {
    const words = text.split(/[\s;&|`$()<>{}"']+/).filter(Boolean);
    for (const rule of this.hardStop) {
      for (let i = 0; i < words.length; i += 1) {
        if (programName(words[i]!) !== rule.program) continue;
        const rest = words.slice(i + 1, i + 1 + Math.max(8, rule.args.length * 2));
        if (rule.args.every((arg) => rest.includes(arg))) return rule.text;
      }
    }
    return null;
  }
}
