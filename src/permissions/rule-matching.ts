import { normalisePath } from "./path-judge.js";
import type { ShellWord } from "./shell-words.js";

/** A hard_stop, no_always or network rule of permissions.json: a program and words it must have. */
export interface LegacyRule {
  text: string;
  program: string;
  words: string[];
}

export function parseLegacyRule(text: string): LegacyRule {
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
export function ruleMatches(rule: LegacyRule, program: string, args: readonly ShellWord[], home: string, cwd: string): boolean {
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
