import type { ShellCommand } from "./shell-script.js";
import { decodeAnsiC, type ShellWord } from "./shell-words.js";

/** Text a command writes, and whether the command line alone fixes it. */
export interface LiteralText {
  text: string;
  static: boolean;
}

function baseName(program: string): string {
  return program.slice(program.lastIndexOf("/") + 1);
}

/** printf's format with its arguments: `%s`, `%b`, `%d`, `%c`, `%%` and backslash escapes; the format repeats for extra arguments. */
export function printfOutput(format: string, args: readonly string[]): string {
  let out = "";
  let index = 0;
  const once = () => {
    let used = false;
    const text = format.replace(/%(%|[-+ 0#]*\d*(?:\.\d+)?[sbdicuxXoqfeg])/g, (match: string, spec: string) => {
      if (spec === "%") return "%";
      used = true;
      const value = args[index++] ?? "";
      const conversion = spec.at(-1);
      if (conversion === "b") return decodeAnsiC(value);
      if (conversion === "c") return value.slice(0, 1);
      if ("diuxXo".includes(conversion ?? "")) return String(Number.parseInt(value, 10) || 0);
      return value;
    });
    out += decodeAnsiC(text);
    return used;
  };
  const consumes = once();
  while (consumes && index < args.length) once();
  return out;
}

/** What a command reads on its standard input: a here-document, a here-string, or a pipe. */
export function inputOf(command: ShellCommand, depth = 0): LiteralText | null {
  const fed = command.redirects.find((redirect) => redirect.body !== undefined);
  if (fed?.body) return { text: fed.operator === "<<<" ? `${fed.body.text}\n` : fed.body.text, static: fed.body.static };
  if (command.redirects.some((redirect) => redirect.operator === "<")) return { text: "", static: false };
  return command.pipedFrom ? literalOutput(command.pipedFrom, depth + 1) : null;
}

function decoded(input: LiteralText | null, decode: (text: string) => string): LiteralText {
  return input?.static ? { text: decode(input.text), static: true } : { text: "", static: false };
}

/**
 * The output of a command when its words fix it: `echo` (and `echo -e`), `printf`, and the decoders
 * a literal may be piped through (`base64 -d`, `openssl base64 -d`, `xxd -r -p`, `rev`, `cat`), so that
 * `echo cm0gLXJmIC8= | base64 -d | sh` is judged as the script it runs. Anything else: not static.
 */
export function literalOutput(command: ShellCommand, depth = 0): LiteralText | null {
  if (depth > 8) return { text: "", static: false };
  const words = command.words;
  if (words.length === 0) return null;
  if (!words.every((word) => word.static && !word.glob)) return { text: words.map((word) => word.text).join(" "), static: false };
  const program = baseName(words[0]!.text);
  const args = words.slice(1).map((word) => word.text);
  const input = () => inputOf(command, depth);
  switch (program) {
    case "echo": {
      let escapes = false;
      let newline = true;
      let start = 0;
      while (start < args.length && /^-[neE]+$/.test(args[start]!)) {
        if (args[start]!.includes("e")) escapes = true;
        if (args[start]!.includes("E")) escapes = false;
        if (args[start]!.includes("n")) newline = false;
        start += 1;
      }
      const text = args.slice(start).join(" ");
      return { text: `${escapes ? decodeAnsiC(text) : text}${newline ? "\n" : ""}`, static: true };
    }
    case "printf": {
      const rest = args[0] === "--" ? args.slice(1) : args;
      return rest.length > 0 && !rest[0]!.startsWith("-") ? { text: printfOutput(rest[0]!, rest.slice(1)), static: true } : { text: "", static: false };
    }
    case "cat":
      return args.length === 0 || (args.length === 1 && args[0] === "-") ? input() : { text: "", static: false };
    case "base64":
      return args.some((arg) => /^-[a-zA-Z]*[dD]|^--decode$/.test(arg)) ? decoded(input(), (text) => Buffer.from(text.replace(/\s+/g, ""), "base64").toString("utf8")) : { text: "", static: false };
    case "openssl":
      return args.some((arg) => arg === "base64" || arg === "-base64" || arg === "-a") && args.includes("-d") ? decoded(input(), (text) => Buffer.from(text.replace(/\s+/g, ""), "base64").toString("utf8")) : { text: "", static: false };
    case "xxd":
      return args.some((arg) => arg.startsWith("-r")) ? decoded(input(), (text) => Buffer.from(text.replace(/[^0-9a-fA-F]/g, ""), "hex").toString("utf8")) : { text: "", static: false };
    case "rev":
      return args.length === 0 ? decoded(input(), (text) => text.split("\n").map((line) => [...line].reverse().join("")).join("\n")) : { text: "", static: false };
    case "tr":
      return { text: "", static: false };
    default:
      return { text: "", static: false };
  }
}

/** The paths a producer writes one per line, for `xargs` (`echo / | xargs rm -rf`, `find / | xargs …`, `ls -d / | xargs …`). */
export function producedWords(command: ShellCommand): string[] | null {
  const program = baseName(command.words[0]?.text ?? "");
  const args = command.words.slice(1);
  if (!command.words.every((word) => word.static)) return null;
  if (program === "find") {
    const { starts } = findParts(args);
    return starts.length > 0 ? starts.map((word) => word.text) : ["."];
  }
  if (program === "ls" && args.some((word) => /^-[a-zA-Z]*d/.test(word.text))) return args.filter((word) => !word.text.startsWith("-")).map((word) => word.text);
  if ((program === "realpath" || program === "readlink") && args.length > 0) return args.filter((word) => !word.text.startsWith("-")).map((word) => word.text);
  if (program === "pwd") return ["."];
  const text = literalOutput(command);
  return text?.static ? text.text.split(/\s+/).filter(Boolean) : null;
}

/**
 * GNU find's words: its options first (`-H`, `-L`, `-P`, `-D debugopts`, `-O3`, a closing `--`), then
 * the starting points, then the expression from the first word that starts with `-`, `(` or `!`.
 */
export function findParts(args: readonly ShellWord[]): { starts: ShellWord[]; expression: ShellWord[] } {
  let index = 0;
  while (index < args.length) {
    const text = args[index]!.text;
    if (text === "-H" || text === "-L" || text === "-P" || /^-O\d*$/.test(text)) index += 1;
    else if (text === "-D") index += 2;
    else if (text === "--") {
      index += 1;
      break;
    } else break;
  }
  let end = index;
  while (end < args.length && !(args[end]!.text.startsWith("-") || args[end]!.text === "(" || args[end]!.text === "!")) end += 1;
  return { starts: args.slice(index, end), expression: args.slice(end) };
}
