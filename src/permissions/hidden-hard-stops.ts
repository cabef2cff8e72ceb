import { literalWord, type ShellWord } from "./shell-words.js";

/** How the classifier looks for a hard stop in a command given as words, or as shell text. */
export interface HardStopProbe {
  /** `fromStart`: the run begins right after the program, as a wrapper's command does (`setpriv rm -rf .`). */
  words(words: ShellWord[], fromStart?: boolean): string | null;
  text(text: string): string | null;
}

const MAX_WORDS = 64;
const MAX_TEXT = 4000;

/** The words of text read loosely: quotes and shell punctuation are only separators. */
export function looseWordsOf(text: string): ShellWord[] {
  return text
    .slice(0, MAX_TEXT)
    .replace(/["'`()[\]{};|&<>!]/g, " ")
    .split(/\s+/)
    .filter(Boolean)
    .map(literalWord);
}

/** A hard stop in any run of the words, from any word on (`1e tee -a /etc/passwd` holds `tee -a /etc/passwd`). */
export function hardStopInWordRuns(words: readonly ShellWord[], probe: HardStopProbe): string | null {
  const bounded = words.slice(0, MAX_WORDS);
  // Still among the program's own options (and the values they take): a command may start here.
  let amongOptions = true;
  for (let i = 0; i < bounded.length; i += 1) {
    const word = bounded[i]!;
    if (word.static) {
      const found = probe.words(bounded.slice(i), amongOptions);
      if (found) return found;
    }
    const previous = bounded[i - 1];
    const isValue = previous !== undefined && /^-/.test(previous.text) && !previous.text.includes("=") && !/^-/.test(word.text);
    amongOptions = amongOptions && (/^-/.test(word.text) || isValue);
  }
  return null;
}

/**
 * A hard stop in text, read as a script and read loosely, and in what follows each `=` (`exec=…`),
 * with a leading `!` taken off (a git alias's `!rm -rf .` is run by a shell without it).
 */
export function hardStopInText(text: string, probe: HardStopProbe): string | null {
  const candidates = [text];
  for (let i = text.indexOf("="); i !== -1 && candidates.length < 8; i = text.indexOf("=", i + 1)) candidates.push(text.slice(i + 1));
  for (const candidate of [...candidates]) if (/^\s*!/.test(candidate)) candidates.push(candidate.replace(/^\s*!/, ""));
  for (const candidate of candidates) {
    const found = probe.text(candidate) ?? hardStopInWordRuns(looseWordsOf(candidate), probe);
    if (found) return found;
  }
  return null;
}

/**
 * A program no rule knows may run any of its arguments, or the text it is fed, as a command:
 * `setpriv rm -rf /`, `coproc …`, `sg root -c "…"`, `trap '…' EXIT`, `sed '1e …'`,
 * `tar --checkpoint-action=exec=…`, `make -f /dev/stdin <<…`. A destructive command found in any of
 * them is a hard stop, whatever the program would really do with it: DuckLM does not bet on it.
 */
export function hiddenHardStop(args: readonly ShellWord[], fedTexts: readonly string[], probe: HardStopProbe): string | null {
  const inRuns = hardStopInWordRuns(args, probe);
  if (inRuns) return inRuns;
  for (const word of args.slice(0, MAX_WORDS)) {
    if (!word.static || !/[\s;|&<>`$(=]/.test(word.text)) continue;
    const found = hardStopInText(word.text, probe);
    if (found) return found;
  }
  for (const text of fedTexts) {
    const found = hardStopInText(text, probe);
    if (found) return found;
  }
  return null;
}
