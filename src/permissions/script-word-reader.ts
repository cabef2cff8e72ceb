import type { Node } from "web-tree-sitter";
import { barePieces, decodeAnsiC, wordsFromPieces, type ShellWord, type WordEnvironment, type WordPiece } from "./shell-words.js";
import { ansiCStringAgrees, children, constantArithmetic, isTransformation, named } from "./shell-syntax.js";

// Operators of `${NAME…}` that give a default when NAME is unset (`-`, `=`) or also when it is empty (`:-`, `:=`).
const DEFAULT_OPERATORS = new Set([":-", "-", ":=", "="]);

/**
 * Reads the words of a script's nodes as bash would expand them, as far as the text fixes them:
 * quotes, escapes, variables the script set, `${x:-default}`, `${!x}`, constant arithmetic and the
 * output of command substitutions whose output the text fixes.
 */
export abstract class ScriptWordReader {
  protected readonly variables: Map<string, string>;
  protected extraIfs = "";
  /** Constructs that no safe shape accounts for, each named once. */
  readonly unsafe = new Set<string>();

  /** The directory the walk is in ($PWD) and the one before the last `cd` ($OLDPWD), as far as the text fixes them. */
  protected cwd: string | null;
  protected previousCwd: string | null;

  constructor(protected readonly env: WordEnvironment) {
    this.variables = new Map(env.variables);
    this.cwd = env.cwd ?? null;
    this.previousCwd = env.previousCwd ?? null;
  }

  /** The output of a `$(…)` when the text fixes it, else null. */
  protected abstract substitutionValue(node: Node): string | null;

  protected wordEnv(): WordEnvironment {
    return { home: this.env.home, variables: this.variables, ifs: this.env.ifs + this.extraIfs, cwd: this.cwd, previousCwd: this.previousCwd };
  }

  protected wordsOf(node: Node): ShellWord[] {
    return wordsFromPieces(this.pieces(node), this.wordEnv());
  }

  protected pieces(node: Node): WordPiece[] {
    switch (node.type) {
      case "word":
        return barePieces(node.text);
      case "number":
        return [{ text: node.text, quoted: false, dynamic: false }];
      case "raw_string":
        return [{ text: node.text.slice(1, -1), quoted: true, dynamic: false }];
      case "ansi_c_string":
        if (!ansiCStringAgrees(node.text)) this.unsafe.add("a $'…' string bash ends elsewhere than it seems");
        return [{ text: decodeAnsiC(node.text.slice(2, -1)), quoted: true, dynamic: false }];
      case "string":
      case "translated_string": {
        const pieces: WordPiece[] = [{ text: "", quoted: true, dynamic: false }];
        for (const child of named(node)) {
          if (child.type === "string_content") pieces.push({ text: child.text.replace(/\\([$`"\\\n])/g, "$1"), quoted: true, dynamic: false });
          else pieces.push(...this.expansionPieces(child, true));
        }
        return pieces;
      }
      case "concatenation":
        return named(node).flatMap((child) => this.pieces(child));
      case "brace_expression":
        return [{ text: node.text, quoted: false, dynamic: false }];
      case "simple_expansion":
      case "expansion":
      case "command_substitution":
        return this.expansionPieces(node, false);
      case "arithmetic_expansion": {
        // `$((-1))` is as fixed as `-1` (and `kill -9 -1` signals every process).
        const constant = constantArithmetic(node.text.slice(3, -2));
        return [{ text: constant ?? node.text, quoted: false, dynamic: constant === null }];
      }
      default:
        return [{ text: node.text, quoted: false, dynamic: true }];
    }
  }

  protected expansionPieces(node: Node, quoted: boolean): WordPiece[] {
    let value: string | null = null;
    const parts = named(node);
    if (node.type === "simple_expansion" || node.type === "expansion") {
      const name = parts[0]?.type === "variable_name" || parts[0]?.type === "special_variable_name" ? parts[0].text : null;
      const operator = node.type === "expansion" ? (children(node).find((child) => !child.isNamed && DEFAULT_OPERATORS.has(child.type))?.type ?? null) : null;
      // `${!name}` is the variable that name names.
      const indirect = node.type === "expansion" && node.text.startsWith("${!");
      if (indirect) {
        const target = name !== null && parts.length === 1 ? this.lookup(name) : null;
        value = target !== null && /^[A-Za-z_]\w*$/.test(target) ? this.lookup(target) : null;
      } else if (name !== null && parts.length === 1 && !operator && !isTransformation(node)) {
        // An unquoted $PWD is split and globbed as the real path is, which a task can name as it likes.
        value = name === "PWD" && !quoted ? null : this.lookup(name);
      }
      else if (name !== null && operator) {
        const known = this.lookup(name);
        const fallback = parts.slice(1).flatMap((part) => this.wordsOf(part));
        const useDefault = known === null || (operator.startsWith(":") && known === "");
        if (!useDefault) value = known;
        else if (known !== null && fallback.every((word) => word.static)) value = fallback.map((word) => word.text).join(" ");
        // An unset variable with a default: for judging destruction, the default is what it may be.
        else if (fallback.every((word) => word.static)) return [{ text: fallback.map((word) => word.text).join(" "), quoted, dynamic: false, expanded: true, ...(quoted ? {} : { split: true }) }];
      }
    } else if (node.type === "command_substitution") {
      value = this.substitutionValue(node);
    }
    // $OLDPWD only known at run time (or unset, which a task could not rely on): it may be `/` for judging destruction.
    if (value === null && node.type === "simple_expansion" && parts[0]?.text === "OLDPWD") return [{ text: node.text, quoted, dynamic: true, worst: "/" }];
    if (value === null) {
      // `${PWD:0:1}`, `${HOME%x}`, `${x##*a}` of a known absolute path may come out as `/`.
      const name = parts[0]?.type === "variable_name" ? parts[0].text : null;
      const known = name === "PWD" || name === "OLDPWD" ? "/" : name !== null ? this.lookup(name) : null;
      const worst = node.type === "expansion" && known !== null ? (known.startsWith("/") ? "/" : known) : undefined;
      return [{ text: node.text, quoted, dynamic: true, ...(worst !== undefined ? { worst } : {}) }];
    }
    // $HOME and $PWD are as good as literals; other values came from the script itself.
    const expanded = !(node.type !== "command_substitution" && (parts[0]?.text === "HOME" || parts[0]?.text === "PWD"));
    // "$@" is each argument as a word of its own, quoted or not.
    if (node.type === "simple_expansion" && parts[0]?.text === "@") return [{ text: value, quoted: false, dynamic: false, split: true, expanded }];
    return [quoted ? { text: value, quoted: true, dynamic: false, expanded } : { text: value, quoted: false, dynamic: false, split: true, expanded }];
  }

  protected lookup(name: string): string | null {
    if (name === "HOME") return this.env.home;
    // The directory the command runs in: its path where the text fixes it; otherwise `.`, which means the same.
    if (name === "PWD") return this.cwd ?? ".";
    if (name === "OLDPWD") return this.previousCwd;
    return this.variables.get(name) ?? null;
  }
}
