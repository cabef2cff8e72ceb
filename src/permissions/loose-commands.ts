import { decodeAnsiC, wordsFromPieces, type ShellWord, type WordEnvironment, type WordPiece } from "./shell-words.js";

const LEADING_KEYWORDS = new Set(["{", "if", "then", "do", "else", "elif", "while", "until", "!", "time"]);
const COMMAND_BREAKS = new Set([";", "&", "|", "(", ")", "\n", "`"]);

/**
 * Splits shell text into commands and words without a grammar: quotes, escapes, `$'…'`, `$HOME` and
 * brace expansion are honoured, everything else is taken as written. It backs the parser up where the
 * grammar gives up (`{rm,-rf,/}` is a parse error to tree-sitter-bash but a command to bash), so the
 * hard-stop judgement never depends on the text parsing cleanly.
 */
export function looseCommands(text: string, env: WordEnvironment): ShellWord[][] {
  const commands: ShellWord[][] = [];
  let words: ShellWord[] = [];
  let pieces: WordPiece[] = [];
  let plain = "";
  const flushPlain = () => {
    if (plain) pieces.push({ text: plain, quoted: false, dynamic: false });
    plain = "";
  };
  const endWord = () => {
    flushPlain();
    if (pieces.length > 0) words.push(...wordsFromPieces(pieces, env));
    pieces = [];
  };
  const endCommand = () => {
    endWord();
    // Keywords that open a compound statement (`if`, `then`, `{`…) come before the command they hold.
    let start = 0;
    while (start < words.length && LEADING_KEYWORDS.has(words[start]!.text)) start += 1;
    const kept = words.slice(start);
    if (kept.length > 0) commands.push(kept);
    words = [];
  };
  const variable = (name: string, quoted: boolean): WordPiece =>
    name === "HOME" ? { text: env.home, quoted, dynamic: false } : env.variables.has(name) ? { text: env.variables.get(name)!, quoted, dynamic: false, ...(quoted ? {} : { split: true }) } : { text: `$${name}`, quoted, dynamic: true };

  for (let i = 0; i < text.length; i += 1) {
    const ch = text[i]!;
    if (ch === "\\" && i + 1 < text.length) {
      flushPlain();
      if (text[i + 1] !== "\n") pieces.push({ text: text[i + 1]!, quoted: true, dynamic: false });
      i += 1;
    } else if (ch === "'") {
      flushPlain();
      const end = text.indexOf("'", i + 1);
      const body = end === -1 ? text.slice(i + 1) : text.slice(i + 1, end);
      pieces.push({ text: body, quoted: true, dynamic: false });
      i = end === -1 ? text.length : end;
    } else if (ch === "$" && text[i + 1] === "'") {
      flushPlain();
      let end = i + 2;
      while (end < text.length && text[end] !== "'") end += text[end] === "\\" ? 2 : 1;
      pieces.push({ text: decodeAnsiC(text.slice(i + 2, end)), quoted: true, dynamic: false });
      i = end;
    } else if (ch === '"') {
      flushPlain();
      let body = "";
      let j = i + 1;
      const inner: WordPiece[] = [];
      for (; j < text.length && text[j] !== '"'; j += 1) {
        if (text[j] === "\\" && j + 1 < text.length && '$`"\\\n'.includes(text[j + 1]!)) {
          body += text[j + 1];
          j += 1;
        } else if (text[j] === "$" && /[A-Za-z_{]/.test(text[j + 1] ?? "")) {
          const match = /^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))/.exec(text.slice(j));
          if (!match) {
            body += "$";
            continue;
          }
          if (body) inner.push({ text: body, quoted: true, dynamic: false });
          body = "";
          inner.push(variable(match[1] ?? match[2]!, true));
          j += match[0].length - 1;
        } else {
          body += text[j];
        }
      }
      if (body || inner.length === 0) inner.push({ text: body, quoted: true, dynamic: false });
      pieces.push(...inner);
      i = j;
    } else if (ch === "$" && /[A-Za-z_{]/.test(text[i + 1] ?? "")) {
      const match = /^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))/.exec(text.slice(i));
      if (!match) {
        plain += ch;
        continue;
      }
      flushPlain();
      pieces.push(variable(match[1] ?? match[2]!, false));
      i += match[0].length - 1;
    } else if (ch === "$" && text[i + 1] === "(") {
      // The substitution's text is a command of its own; its value is unknown here.
      endCommand();
      i += 1;
    } else if (COMMAND_BREAKS.has(ch)) {
      endCommand();
    } else if (ch === " " || ch === "\t") {
      endWord();
    } else if ((ch === ">" || ch === "<") && plain === "" && pieces.length === 0) {
      // A redirection operator ends nothing; its target is the next word.
      endWord();
      let j = i;
      while (j + 1 < text.length && (text[j + 1] === ">" || text[j + 1] === "|" || text[j + 1] === "&")) j += 1;
      words.push({ text: text.slice(i, j + 1), static: true, glob: false });
      i = j;
    } else {
      plain += ch;
    }
  }
  endCommand();
  return commands;
}
