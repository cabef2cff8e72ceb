/**
 * Shell words as the shell would see them after quote removal, escapes, `$'…'` decoding, tilde and
 * known-variable expansion, brace expansion and word splitting — as far as the text alone decides.
 * What depends on run-time values is kept as written and marked `static: false`.
 */
export interface ShellWord {
  /** The value; parts only known at run time are kept as written (`$X`, `$(…)`). */
  text: string;
  /** Every part of the value is fixed by the text. */
  static: boolean;
  /** Contains an unquoted glob character (`*`, `?`, `[`): the shell expands it to file names. */
  glob: boolean;
  /** Part of it came from a variable or a command substitution whose value the text fixes. */
  expanded?: boolean;
  /** For a word not fixed by the text: its value should every part only known at run time be empty. */
  ifEmpty?: string;
  /** For a word not fixed by the text: its value with each unknown part at its most dangerous, where known. */
  worst?: string;
  /** Holds an unquoted part only known at run time: it may split into several words, options among them. */
  mayDivide?: boolean;
  /** Stands for each path a search finds (find's `{}`), judged as the place the search starts from. */
  eachFound?: boolean;
}

/** One stretch of a word with the same quoting. */
export interface WordPiece {
  text: string;
  /** Quoted or escaped: no globbing, no brace expansion, no tilde expansion, no splitting. */
  quoted: boolean;
  /** Only known at run time. */
  dynamic: boolean;
  /** The result of an unquoted expansion: split on whitespace like the shell does. */
  split?: boolean;
  /** Comes from a variable or command substitution the text fixes (`a=rm; $a`). */
  expanded?: boolean;
  /**
   * For a piece only known at run time: the most dangerous value it may take, for judging
   * destruction (`${PWD:0:1}` may be `/`).
   */
  worst?: string;
}

/** What the evaluation of words knows about the environment. */
export interface WordEnvironment {
  /** The user's home directory, for `~` and `$HOME`. */
  home: string;
  /** Variables given literal values earlier in the same script (`a=rm; $a …`). */
  variables: ReadonlyMap<string, string>;
  /** Extra characters the script put into IFS, used when splitting expansions. */
  ifs: string;
  /** The directory the words are read in ($PWD, `~+`), when the text fixes it; null or absent when it does not. */
  cwd?: string | null;
  /** The directory before the last `cd` ($OLDPWD, `~-`): null or absent when unknown, or unset (bash then leaves `~-` alone, but a task may not). */
  previousCwd?: string | null;
}

/** Decodes the escapes of a `$'…'` string the way bash does. */
export function decodeAnsiC(body: string): string {
  let out = "";
  for (let i = 0; i < body.length; i += 1) {
    const ch = body[i]!;
    if (ch !== "\\" || i === body.length - 1) {
      out += ch;
      continue;
    }
    const next = body[i + 1]!;
    i += 1;
    const simple: Record<string, string> = { n: "\n", t: "\t", r: "\r", a: "\x07", b: "\b", e: "\x1b", E: "\x1b", f: "\f", v: "\v", "\\": "\\", "'": "'", '"': '"', "?": "?" };
    if (simple[next] !== undefined) {
      out += simple[next];
    } else if (next === "x") {
      const hex = /^[0-9a-fA-F]{1,2}/.exec(body.slice(i + 1))?.[0] ?? "";
      out += hex ? String.fromCharCode(parseInt(hex, 16)) : "\\x";
      i += hex.length;
    } else if (next === "u" || next === "U") {
      const hex = new RegExp(`^[0-9a-fA-F]{1,${next === "u" ? 4 : 8}}`).exec(body.slice(i + 1))?.[0] ?? "";
      out += hex ? String.fromCodePoint(Math.min(parseInt(hex, 16), 0x10ffff)) : `\\${next}`;
      i += hex.length;
    } else if (/[0-7]/.test(next)) {
      const octal = /^[0-7]{1,3}/.exec(body.slice(i))![0];
      out += String.fromCharCode(parseInt(octal, 8) & 0xff);
      i += octal.length - 1;
    } else if (next === "c" && i + 1 < body.length) {
      out += String.fromCharCode(body.charCodeAt(i + 1) & 0x1f);
      i += 1;
    } else {
      out += `\\${next}`;
    }
  }
  return out;
}

/** Pieces of an unquoted bare word: backslash-escaped characters are quoted, the rest is not. */
export function barePieces(text: string): WordPiece[] {
  const pieces: WordPiece[] = [];
  let plain = "";
  for (let i = 0; i < text.length; i += 1) {
    const ch = text[i]!;
    if (ch === "\\" && i + 1 < text.length) {
      const next = text[i + 1]!;
      i += 1;
      if (next === "\n") continue;
      if (plain) pieces.push({ text: plain, quoted: false, dynamic: false });
      plain = "";
      pieces.push({ text: next, quoted: true, dynamic: false });
      continue;
    }
    plain += ch;
  }
  if (plain) pieces.push({ text: plain, quoted: false, dynamic: false });
  return pieces;
}

interface MarkedChar {
  ch: string;
  /** Not subject to brace or tilde expansion. */
  quoted: boolean;
  dynamic: boolean;
  /** An unquoted character that the shell matches against file names when it is a glob character. */
  globbable: boolean;
  expanded?: boolean;
  /** Comes from an unquoted expansion: whitespace here separates words. */
  splits?: boolean;
  /** On the first character of a piece only known at run time: its most dangerous value. */
  worst?: string;
  /** Only known at run time and not quoted. */
  unquotedDynamic?: boolean;
}

/** The matching unquoted `}` of the `{` at `open`, and the unquoted top-level commas between them. */
function braceGroup(chars: readonly MarkedChar[], open: number): { close: number; commas: number[] } | null {
  let depth = 0;
  const commas: number[] = [];
  for (let i = open; i < chars.length; i += 1) {
    const c = chars[i]!;
    if (c.quoted) continue;
    if (c.ch === "{") depth += 1;
    else if (c.ch === "}") {
      depth -= 1;
      if (depth === 0) return { close: i, commas };
    } else if (c.ch === "," && depth === 1) commas.push(i);
  }
  return null;
}

function sequence(body: string): string[] | null {
  const numeric = /^(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?$/.exec(body);
  if (numeric) {
    const from = Number(numeric[1]);
    const to = Number(numeric[2]);
    const step = Math.abs(Number(numeric[3] ?? 1)) || 1;
    if (Math.abs(to - from) / step > 256) return null;
    const out: string[] = [];
    for (let n = from; from <= to ? n <= to : n >= to; n += from <= to ? step : -step) out.push(String(n));
    return out;
  }
  const letters = /^([A-Za-z])\.\.([A-Za-z])$/.exec(body);
  if (letters) {
    const from = letters[1]!.charCodeAt(0);
    const to = letters[2]!.charCodeAt(0);
    const out: string[] = [];
    for (let n = from; from <= to ? n <= to : n >= to; n += from <= to ? 1 : -1) out.push(String.fromCharCode(n));
    return out;
  }
  return null;
}

const MAX_BRACE_WORDS = 256;

/** Bash brace expansion (`{a,b}`, `{1..3}`) over unquoted characters, bounded. */
function expandBraces(chars: MarkedChar[], budget = { left: MAX_BRACE_WORDS }): MarkedChar[][] {
  for (let i = 0; i < chars.length; i += 1) {
    const c = chars[i]!;
    if (c.quoted || c.ch !== "{" || (i > 0 && chars[i - 1]!.ch === "$" && !chars[i - 1]!.quoted)) continue;
    const group = braceGroup(chars, i);
    if (!group) continue;
    const prefix = chars.slice(0, i);
    const suffix = chars.slice(group.close + 1);
    let alternatives: MarkedChar[][];
    if (group.commas.length > 0) {
      const bounds = [i, ...group.commas, group.close];
      alternatives = [];
      for (let k = 0; k + 1 < bounds.length; k += 1) alternatives.push(chars.slice(bounds[k]! + 1, bounds[k + 1]!));
    } else {
      const body = chars.slice(i + 1, group.close);
      if (body.some((m) => m.quoted)) continue;
      const items = sequence(body.map((m) => m.ch).join(""));
      if (!items) continue;
      alternatives = items.map((item) => [...item].map((ch) => ({ ch, quoted: false, dynamic: false, globbable: true })));
    }
    const out: MarkedChar[][] = [];
    for (const alternative of alternatives) {
      for (const expanded of expandBraces([...prefix, ...alternative, ...suffix], budget)) {
        if (budget.left <= 0) return out.length > 0 ? out : [chars];
        budget.left -= 1;
        out.push(expanded);
      }
    }
    return out;
  }
  return [chars];
}

function expandTilde(chars: MarkedChar[], env: WordEnvironment): MarkedChar[] {
  if (chars[0]?.ch !== "~" || chars[0].quoted) return chars;
  let end = 1;
  while (end < chars.length && chars[end]!.ch !== "/" && !chars[end]!.quoted) end += 1;
  const user = chars.slice(1, end).map((m) => m.ch).join("");
  let replacement: string;
  let dynamic = false;
  let worst: string | undefined;
  const directory = user === "+" ? env.cwd : user === "-" ? env.previousCwd : undefined;
  if (user === "") replacement = env.home;
  else if (user === "root") replacement = "/root";
  else if ((user === "+" || user === "-") && typeof directory === "string") replacement = directory;
  else if (user === "+" || user === "-") {
    // Where it leads is only known at run time: for judging destruction, it may be anywhere, `/` too.
    replacement = `~${user}`;
    dynamic = true;
    worst = "/";
  } else if (/^[A-Za-z_][A-Za-z0-9._-]*$/.test(user)) replacement = `/home/${user}`;
  else return chars;
  return [...[...replacement].map((ch, index) => ({ ch, quoted: true, dynamic, globbable: false, ...(index === 0 && worst !== undefined ? { worst } : {}) })), ...chars.slice(end)];
}

/** Splits the result of unquoted expansions on whitespace and the script's IFS characters. */
function splitWords(chars: MarkedChar[], ifs: string): MarkedChar[][] {
  if (!chars.some((c) => c.splits)) return [chars];
  const separators = new Set([" ", "\t", "\n", ...ifs]);
  const words: MarkedChar[][] = [];
  let current: MarkedChar[] = [];
  chars.forEach((c) => {
    if (c.splits && separators.has(c.ch)) {
      if (current.length > 0) words.push(current);
      current = [];
      return;
    }
    current.push(c);
  });
  if (current.length > 0) words.push(current);
  return words;
}

/** Turns the pieces of one shell word into the words the shell would pass to a program. */
export function wordsFromPieces(pieces: readonly WordPiece[], env: WordEnvironment): ShellWord[] {
  // Split expansions first: their characters are never subject to brace or tilde expansion.
  const chars: MarkedChar[] = [];
  for (const piece of pieces) {
    for (const [index, ch] of [...piece.text].entries()) {
      // An unquoted expansion is not brace-expanded, but its result is split and globbed (`x='*'; ls $x`).
      const first = index === 0;
      chars.push({ ch, quoted: piece.quoted || piece.dynamic || Boolean(piece.split), dynamic: piece.dynamic, globbable: !piece.quoted && !piece.dynamic, expanded: piece.expanded === true, splits: Boolean(piece.split), ...(first && piece.worst !== undefined ? { worst: piece.worst } : {}), ...(piece.dynamic && !piece.quoted ? { unquotedDynamic: true } : {}) });
    }
  }
  if (chars.length === 0) return pieces.length > 0 ? [{ text: "", static: !pieces.some((p) => p.dynamic), glob: false }] : [];
  const out: ShellWord[] = [];
  // Braces expand before variables do (`$PWD/{..,x}` is two words), so always, around expansions.
  for (const word of expandBraces(chars)) {
    for (const part of splitWords(expandTilde(word, env), env.ifs)) {
      const dynamic = part.some((m) => m.dynamic);
      out.push({
        text: part.map((m) => m.ch).join(""),
        static: !dynamic,
        glob: part.some((m) => m.globbable && (m.ch === "*" || m.ch === "?" || m.ch === "[")),
        ...(part.some((m) => m.expanded) ? { expanded: true } : {}),
        ...(dynamic ? { ifEmpty: part.filter((m) => !m.dynamic).map((m) => m.ch).join("") } : {}),
        ...(dynamic && part.some((m) => m.worst !== undefined) ? { worst: part.map((m) => (m.dynamic ? (m.worst ?? "") : m.ch)).join("") } : {}),
        ...(part.some((m) => m.unquotedDynamic) ? { mayDivide: true } : {}),
      });
    }
  }
  return out;
}

/** A literal word, as the tests and the loose tokenizer build them. */
export function literalWord(text: string): ShellWord {
  return { text, static: true, glob: false };
}
