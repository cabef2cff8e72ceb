import { createRequire } from "node:module";
import { Language, Parser, type Node } from "web-tree-sitter";
import { barePieces, decodeAnsiC, wordsFromPieces, type ShellWord, type WordEnvironment, type WordPiece } from "./shell-words.js";

/** A redirection of one command: where it reads or writes, or the text it is fed. */
export interface ShellRedirect {
  /** `>`, `>>`, `>|`, `&>`, `&>>`, `<`, `<>`, `>&`, `<&`, `<<`, `<<-`, `<<<`. */
  operator: string;
  /** The file descriptor written before the operator (`2>`), if any. */
  fd: number | null;
  /** The file (or descriptor) named after the operator; null for here-documents. */
  target: ShellWord | null;
  /** A here-document's or here-string's text. */
  body?: { text: string; static: boolean };
}

/** One simple command that would run, as far as the text shows it. */
export interface ShellCommand {
  /** Program and arguments after expansion; empty for a bare redirection or assignment. */
  words: ShellWord[];
  /** `VAR=value` words before the program: they reach the program's environment. */
  assignments: Array<{ name: string; value: ShellWord }>;
  redirects: ShellRedirect[];
  /** The command whose output is piped into this one. */
  pipedFrom: ShellCommand | null;
}

export interface ShellScript {
  commands: ShellCommand[];
  /** Constructs that no safe shape accounts for (assignments, functions, loops, `&`…), each named once. */
  unsafeConstructs: string[];
  /** The text did not parse completely; whatever was found is still listed. */
  parseError: boolean;
  /** A function that calls itself in the background, the shape of a fork bomb. */
  forkBomb: boolean;
  /** Variables given literal values, for nested scripts (`a=rm; bash -c '$a -rf /'`). */
  variables: Map<string, string>;
}

// Node types a plain command line is made of. Anything else (loops, functions, assignments, `[[ ]]`,
// arithmetic, process substitution…) makes the line more than a sequence of commands.
const PLAIN_NODES = new Set([
  "program", "list", "pipeline", "command", "command_name", "word", "number", "string", "string_content", "raw_string",
  "ansi_c_string", "concatenation", "file_redirect", "file_descriptor", "redirected_statement", "heredoc_redirect",
  "heredoc_start", "heredoc_body", "heredoc_content", "heredoc_end", "herestring_redirect", "command_substitution",
  "simple_expansion", "expansion", "variable_name", "subshell", "comment", "test_command", "test_operator",
  "unary_expression", "binary_expression", "parenthesized_expression",
]);

const require = createRequire(import.meta.url);

/** Parses shell text with tree-sitter-bash into the commands it would run. */
export class ShellParser {
  private constructor(private readonly parser: Parser) {}

  /** Loads the bash grammar (a few ms; once per process is enough). */
  static async load(): Promise<ShellParser> {
    await Parser.init();
    const language = await Language.load(require.resolve("tree-sitter-bash/tree-sitter-bash.wasm"));
    const parser = new Parser();
    parser.setLanguage(language);
    return new ShellParser(parser);
  }

  parse(source: string, env: WordEnvironment): ShellScript {
    const walker = new ScriptWalker(env);
    const tree = this.parser.parse(source);
    if (!tree) return { commands: [], unsafeConstructs: ["unparsable text"], parseError: true, forkBomb: false, variables: new Map() };
    try {
      if (tree.rootNode.hasError) walker.parseError = true;
      walker.visit(tree.rootNode);
    } finally {
      tree.delete();
    }
    return walker.result();
  }
}

let shared: Promise<ShellParser> | null = null;

/** The process's parser, loaded on first use. */
export function sharedShellParser(): Promise<ShellParser> {
  shared ??= ShellParser.load();
  return shared;
}

function named(node: Node): Node[] {
  return node.namedChildren.filter((child): child is Node => child !== null);
}

function children(node: Node): Node[] {
  return node.children.filter((child): child is Node => child !== null);
}

class ScriptWalker {
  readonly commands: ShellCommand[] = [];
  readonly unsafe = new Set<string>();
  parseError = false;
  forkBomb = false;
  private readonly variables: Map<string, string>;
  private readonly byNode = new Map<number, ShellCommand>();
  private extraIfs = "";

  constructor(private readonly env: WordEnvironment) {
    this.variables = new Map(env.variables);
  }

  result(): ShellScript {
    return { commands: this.commands, unsafeConstructs: [...this.unsafe], parseError: this.parseError, forkBomb: this.forkBomb, variables: this.variables };
  }

  private wordEnv(): WordEnvironment {
    return { home: this.env.home, variables: this.variables, ifs: this.env.ifs + this.extraIfs };
  }

  visit(node: Node): void {
    if (node.isError || node.isMissing) this.parseError = true;
    if (node.isNamed && !PLAIN_NODES.has(node.type) && node.type !== "ERROR") this.unsafe.add(node.type.replace(/_/g, " "));
    switch (node.type) {
      case "command":
        this.command(node, []);
        return;
      case "redirected_statement":
        this.redirected(node);
        return;
      case "pipeline":
        this.pipeline(node);
        return;
      case "variable_assignment":
        this.assignment(node);
        return;
      case "function_definition":
        this.functionDefinition(node);
        return;
      case "test_command":
        this.testCommand(node);
        return;
      default:
        break;
    }
    for (const child of children(node)) {
      if (!child.isNamed) {
        if (child.type === "&") this.unsafe.add("a command in the background (&)");
        continue;
      }
      this.visit(child);
    }
  }

  private assignment(node: Node): void {
    const name = node.childForFieldName("name")?.text ?? named(node)[0]?.text ?? "";
    const valueNode = node.childForFieldName("value");
    const words = valueNode ? this.wordsOf(valueNode) : [];
    const value = words.map((word) => word.text).join(" ");
    if (words.every((word) => word.static)) this.variables.set(name, value);
    else this.variables.delete(name);
    if (name === "IFS") this.extraIfs = value;
    if (valueNode) this.visitNested(valueNode);
  }

  /** `[ -f x ]` and `[[ -f x ]]` are commands whose words are the test's operators and operands. */
  private testCommand(node: Node): void {
    const open = node.text.startsWith("[[") ? "[[" : "[";
    const words: ShellWord[] = [{ text: open, static: true, glob: false }];
    const collect = (current: Node) => {
      for (const child of children(current)) {
        if (child.type === "test_operator" || (!child.isNamed && /^(=|==|!=|<|>|!|&&|\|\||-a|-o|=~)$/.test(child.type))) words.push({ text: child.text, static: true, glob: false });
        else if (["word", "string", "raw_string", "number", "concatenation", "simple_expansion", "expansion", "command_substitution", "ansi_c_string"].includes(child.type)) {
          words.push(...this.wordsOf(child));
          this.visitNested(child);
        } else if (child.isNamed) {
          if (!/expression$/.test(child.type) && child.type !== "regex" && child.type !== "extglob_pattern") this.unsafe.add(child.type.replace(/_/g, " "));
          collect(child);
        }
      }
    };
    collect(node);
    words.push({ text: open === "[[" ? "]]" : "]", static: true, glob: false });
    const command: ShellCommand = { words, assignments: [], redirects: [], pipedFrom: null };
    this.byNode.set(node.id, command);
    this.commands.push(command);
  }

  private functionDefinition(node: Node): void {
    const name = node.childForFieldName("name")?.text ?? "";
    const body = node.childForFieldName("body");
    const before = this.commands.length;
    if (body) this.visit(body);
    const inner = this.commands.slice(before);
    const callsItself = inner.some((command) => command.words[0]?.text === name);
    if (callsItself && body && /&/.test(body.text)) this.forkBomb = true;
    // What a function runs is listed from its body; calls to it by name are unknowable.
    this.unsafe.add("function definition");
  }

  private pipeline(node: Node): void {
    let previous: ShellCommand | null = null;
    for (const child of children(node)) {
      if (!child.isNamed) continue;
      const before = this.commands.length;
      this.visit(child);
      const first = this.firstOf(child) ?? this.commands[before] ?? null;
      if (first && previous && !first.pipedFrom) first.pipedFrom = previous;
      previous = this.lastOf(child) ?? null;
    }
  }

  private firstOf(node: Node): ShellCommand | undefined {
    if (node.type === "command") return this.byNode.get(node.id);
    if (node.type === "redirected_statement") {
      const body = node.childForFieldName("body");
      return body ? this.firstOf(body) : undefined;
    }
    return undefined;
  }

  private lastOf(node: Node): ShellCommand | undefined {
    return this.firstOf(node);
  }

  private redirected(node: Node): void {
    const body = node.childForFieldName("body");
    const redirects: ShellRedirect[] = [];
    for (const child of named(node)) {
      if (child === body || child.id === body?.id) continue;
      const redirect = this.redirect(child);
      if (redirect) redirects.push(redirect);
    }
    if (body?.type === "command") {
      this.command(body, redirects);
      return;
    }
    if (body) this.visit(body);
    // A redirection of a compound statement writes too: it is kept as a command without words.
    if (redirects.length > 0) this.commands.push({ words: [], assignments: [], redirects, pipedFrom: null });
  }

  private redirect(node: Node): ShellRedirect | null {
    if (node.type === "file_redirect") {
      const operator = children(node).filter((child) => !child.isNamed).map((child) => child.text).join("");
      const fdNode = named(node).find((child) => child.type === "file_descriptor");
      const destination = node.childForFieldName("destination") ?? named(node).filter((child) => child.type !== "file_descriptor").at(-1) ?? null;
      const targetWords = destination ? this.wordsOf(destination) : [];
      if (destination) this.visitNested(destination);
      const target = targetWords.length === 1 ? targetWords[0]! : targetWords.length === 0 ? null : { text: targetWords.map((w) => w.text).join(" "), static: false, glob: true };
      return { operator: operator || ">", fd: fdNode ? Number(fdNode.text) : null, target };
    }
    if (node.type === "heredoc_redirect") {
      const start = named(node).find((child) => child.type === "heredoc_start");
      const bodyNode = named(node).find((child) => child.type === "heredoc_body");
      const quotedDelimiter = Boolean(start && /['"\\]/.test(start.text));
      const expands = bodyNode ? named(bodyNode).some((child) => child.type !== "heredoc_content") : false;
      if (bodyNode) this.visitNested(bodyNode);
      const operator = children(node).find((child) => !child.isNamed)?.text ?? "<<";
      return { operator, fd: null, target: null, body: { text: bodyNode?.text ?? "", static: quotedDelimiter || !expands } };
    }
    if (node.type === "herestring_redirect") {
      const value = named(node).at(-1);
      const words = value ? this.wordsOf(value) : [];
      if (value) this.visitNested(value);
      return { operator: "<<<", fd: null, target: null, body: { text: words.map((w) => w.text).join(" "), static: words.every((w) => w.static) } };
    }
    return null;
  }

  private command(node: Node, outerRedirects: ShellRedirect[]): void {
    const assignments: ShellCommand["assignments"] = [];
    const words: ShellWord[] = [];
    const redirects: ShellRedirect[] = [];
    for (const child of named(node)) {
      if (child.type === "variable_assignment") {
        const name = child.childForFieldName("name")?.text ?? "";
        const valueNode = child.childForFieldName("value");
        const value = valueNode ? this.wordsOf(valueNode) : [];
        assignments.push({ name, value: value.length === 1 ? value[0]! : { text: value.map((w) => w.text).join(" "), static: value.every((w) => w.static), glob: false } });
        if (valueNode) this.visitNested(valueNode);
        continue;
      }
      const redirect = this.redirect(child);
      if (redirect) {
        redirects.push(redirect);
        continue;
      }
      if (child.type === "command_name") {
        const inner = named(child)[0] ?? child;
        words.push(...this.wordsOf(inner));
        this.visitNested(inner);
        continue;
      }
      words.push(...this.wordsOf(child));
      this.visitNested(child);
    }
    const command: ShellCommand = { words, assignments, redirects: [...redirects, ...outerRedirects], pipedFrom: null };
    this.byNode.set(node.id, command);
    this.commands.push(command);
  }

  /** Commands inside a word (`$(…)`, backticks, process substitution) run too. */
  private visitNested(node: Node): void {
    if (node.isError) this.parseError = true;
    if (node.type === "command_substitution" || node.type === "process_substitution") {
      if (node.type === "process_substitution") this.unsafe.add("process substitution");
      for (const inner of named(node)) this.visit(inner);
      return;
    }
    for (const child of named(node)) this.visitNested(child);
  }

  private wordsOf(node: Node): ShellWord[] {
    return wordsFromPieces(this.pieces(node), this.wordEnv());
  }

  private pieces(node: Node): WordPiece[] {
    switch (node.type) {
      case "word":
        return barePieces(node.text);
      case "number":
        return [{ text: node.text, quoted: false, dynamic: false }];
      case "raw_string":
        return [{ text: node.text.slice(1, -1), quoted: true, dynamic: false }];
      case "ansi_c_string":
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
      default:
        return [{ text: node.text, quoted: false, dynamic: true }];
    }
  }

  private expansionPieces(node: Node, quoted: boolean): WordPiece[] {
    let value: string | null = null;
    if (node.type === "simple_expansion" || node.type === "expansion") {
      const parts = named(node);
      const only = parts.length === 1 && parts[0]!.type === "variable_name" ? parts[0]!.text : null;
      if (only !== null) value = this.lookup(only);
    } else if (node.type === "command_substitution") {
      value = this.substitutionValue(node);
    }
    if (value === null) return [{ text: node.text, quoted, dynamic: true }];
    // $HOME is as good as a literal; other values came from the script itself.
    const expanded = !(node.type !== "command_substitution" && named(node)[0]?.text === "HOME");
    return [quoted ? { text: value, quoted: true, dynamic: false, expanded } : { text: value, quoted: false, dynamic: false, split: true, expanded }];
  }

  private lookup(name: string): string | null {
    if (name === "HOME") return this.env.home;
    return this.variables.get(name) ?? null;
  }

  /**
   * The output of `$(…)` when the text fixes it: `$(echo rm)`, `$(printf rm)`, `$(which rm)`,
   * `$(command -v rm)`. Anything else is only known at run time.
   */
  private substitutionValue(node: Node): string | null {
    const inner = named(node);
    if (inner.length !== 1 || inner[0]!.type !== "command") return null;
    const parts = named(inner[0]!);
    if (parts.some((part) => part.type === "variable_assignment" || part.type.endsWith("redirect"))) return null;
    const words = parts.flatMap((part) => this.wordsOf(part.type === "command_name" ? (named(part)[0] ?? part) : part));
    if (!words.every((word) => word.static && !word.glob)) return null;
    const [program, ...args] = words.map((word) => word.text);
    if (program === "echo") return args.filter((arg, i) => !(i === 0 && /^-[neE]+$/.test(arg))).join(" ");
    if (program === "printf" && args.length === 1 && !args[0]!.includes("%") && !args[0]!.includes("\\")) return args[0]!;
    if (program === "which" && args.length === 1) return args[0]!;
    if ((program === "command" || program === "type") && args.length === 2 && ["-v", "-p", "-P"].includes(args[0]!)) return args[1]!;
    return null;
  }
}
