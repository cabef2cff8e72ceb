import type { Node } from "web-tree-sitter";

export function named(node: Node): Node[] {
  return node.namedChildren.filter((child): child is Node => child !== null);
}

export function children(node: Node): Node[] {
  return node.children.filter((child): child is Node => child !== null);
}

/** `while :`, `while true`, `until false`: a loop only a break or a signal ends. */
export function endlessLoop(node: Node): boolean {
  const condition = node.childForFieldName("condition")?.text.trim().replace(/;$/, "") ?? "";
  return node.type === "while_statement" ? /^(:|true|\[ 1 \]|\(\( ?1 ?\)\))$/.test(condition) : /^false$/.test(condition);
}

export function startsBackgroundJobs(node: Node): boolean {
  const body = node.childForFieldName("body");
  const search = (current: Node): boolean => children(current).some((child) => (!child.isNamed && child.type === "&") || (child.isNamed && search(child)));
  return body ? search(body) : false;
}

/**
 * Scripts inside text the grammar leaves as plain words — `$(…)` and backticks in the default of
 * `${x:-…}`, in arithmetic, in the operands of `[[ ]]` (bash evaluates array subscripts there).
 */
export function embeddedScripts(text: string): string[] {
  const found: string[] = [];
  for (let i = 0; i < text.length; i += 1) {
    if (text[i] === "\\") {
      i += 1;
      continue;
    }
    if (text[i] === "`") {
      let j = i + 1;
      while (j < text.length && text[j] !== "`") j += text[j] === "\\" ? 2 : 1;
      found.push(text.slice(i + 1, j).replace(/\\([`$\\])/g, "$1"));
      i = j;
    } else if (text[i] === "$" && text[i + 1] === "(" && text[i + 2] !== "(") {
      let depth = 1;
      let j = i + 2;
      for (; j < text.length && depth > 0; j += 1) {
        if (text[j] === "\\") j += 1;
        else if (text[j] === "(") depth += 1;
        else if (text[j] === ")") depth -= 1;
      }
      found.push(text.slice(i + 2, j - 1));
      i = j - 1;
    }
  }
  return found;
}

/**
 * The word that ends a here-document as bash reads it (quotes removed), and whether any of it was
 * quoted (then the text is taken literally). Only plain delimiters are read: `EOF`, `'EOF'`,
 * `"EOF"`, `\EOF`; null for anything else (`EO''F`, `$'EOF'`), where the grammar and bash differ.
 */
export function heredocDelimiter(start: string): { word: string; quoted: boolean } | null {
  const plain = /^[A-Za-z0-9_.+-]+$/;
  const quoted = /^'([A-Za-z0-9_.+-]+)'$|^"([A-Za-z0-9_.+-]+)"$|^\\([A-Za-z0-9_.+-]+)$/.exec(start);
  if (quoted) return { word: quoted[1] ?? quoted[2] ?? quoted[3]!, quoted: true };
  return plain.test(start) ? { word: start, quoted: false } : null;
}

/** The value of arithmetic made only of whole numbers and + - * (`-1`, `0-1`, `(2*3)`), else null. */
export function constantArithmetic(expression: string): string | null {
  const text = expression.replace(/\s+/g, "");
  if (!/^[-+*()\d]+$/.test(text) || text.length > 40) return null;
  let position = 0;
  const factor = (): number | null => {
    if (text[position] === "-" || text[position] === "+") {
      const sign = text[position++] === "-" ? -1 : 1;
      const value = factor();
      return value === null ? null : sign * value;
    }
    if (text[position] === "(") {
      position += 1;
      const value = sum();
      if (text[position] !== ")") return null;
      position += 1;
      return value;
    }
    const digits = /^\d+/.exec(text.slice(position))?.[0];
    if (!digits) return null;
    position += digits.length;
    return Number(digits);
  };
  const product = (): number | null => {
    let value = factor();
    while (value !== null && text[position] === "*") {
      position += 1;
      const next = factor();
      value = next === null ? null : value * next;
    }
    return value;
  };
  const sum = (): number | null => {
    let value = product();
    while (value !== null && (text[position] === "+" || text[position] === "-")) {
      const minus = text[position++] === "-";
      const next = product();
      value = next === null ? null : minus ? value - next : value + next;
    }
    return value;
  };
  const value = sum();
  return value !== null && position === text.length && Number.isSafeInteger(value) ? String(value) : null;
}

/**
 * Whether bash ends a `$'…'` string where the grammar's node ends: inside it a backslash escapes the
 * next character, whatever it is, so `$'\\'` is one backslash. Where they differ, what bash runs
 * after the string is not what the grammar shows.
 */
export function ansiCStringAgrees(text: string): boolean {
  for (let i = 2; i < text.length; i += 1) {
    if (text[i] === "\\") i += 1;
    else if (text[i] === "'") return i === text.length - 1;
  }
  return false;
}

/** Characters bash reads as parts of words but the grammar as blanks (`\r#` is a word to bash, a comment to it). */
// eslint-disable-next-line no-control-regex -- these characters are what is looked for
export const MISREAD_CONTROL_CHARACTERS = /[\x00-\x08\x0b\x0c\x0d\x0e-\x1f\x7f]/;

/**
 * Other readings of a script that bash (or dash) may make where the grammar makes another: each
 * `$'…'` string cut where bash ends it, and control characters as the word characters they are to
 * bash. Judged besides the grammar's reading, so that what hides behind the difference is seen.
 */
export function otherReadings(text: string): string[] {
  const readings: string[] = [];
  if (text.includes("$'")) {
    let out = "";
    for (let i = 0; i < text.length; i += 1) {
      if (text[i] === "$" && text[i + 1] === "'") {
        let j = i + 2;
        while (j < text.length && text[j] !== "'") j += text[j] === "\\" ? 2 : 1;
        out += "ANSI_C_STRING";
        i = j;
        continue;
      }
      out += text[i];
    }
    if (out !== text) readings.push(out);
  }
  if (MISREAD_CONTROL_CHARACTERS.test(text)) readings.push(text.replace(new RegExp(MISREAD_CONTROL_CHARACTERS.source, "g"), "_"));
  return readings;
}

/** A script as dash reads it where bash differs: no `$'…'` strings, `&>` as `&` then `>`. */
export function dashReading(text: string): string {
  return text.replace(/\$'/g, "'").replace(/&>/g, "& >");
}

/** `${x@P}`, `${x@Q}`, `${x@E}`…: transformations of a value (`@P` expands it as a prompt, running `$(…)` in it). */
export function isTransformation(node: Node): boolean {
  return node.type === "expansion" && /^\$\{[^}]*@[A-Za-z]\}$/.test(node.text);
}
