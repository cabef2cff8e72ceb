import { createRequire } from "node:module";
import type { Node, Parser } from "web-tree-sitter";
import { withoutHereDocuments } from "./here-documents.js";
import { ScriptCommandReader } from "./script-command-reader.js";
import { children, embeddedScripts, endlessLoop, named, startsBackgroundJobs } from "./shell-syntax.js";
import type { ShellWord, WordEnvironment } from "./shell-words.js";

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
  /** Functions that call each other (or themselves) in pipes or the background: the shape of a fork bomb. */
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
  "simple_expansion", "variable_name", "subshell", "comment", "test_command", "test_operator",
  "unary_expression", "binary_expression", "parenthesized_expression",
]);

const MAX_NESTING = 8;
const MAX_LOOP_VALUES = 16;

const require = createRequire(import.meta.url);

/** Parses shell text with tree-sitter-bash into the commands it would run. */
export class ShellParser {
  private constructor(private readonly parser: Parser) {}

  /** Loads the bash grammar (a few ms; once per process is enough). */
  static async load(): Promise<ShellParser> {
    // Imported here so that a command that judges nothing never loads the parser's runtime.
    const { Language, Parser } = await import("web-tree-sitter");
    await Parser.init();
    const language = await Language.load(require.resolve("tree-sitter-bash/tree-sitter-bash.wasm"));
    const parser = new Parser();
    parser.setLanguage(language);
    return new ShellParser(parser);
  }

  parse(source: string, env: WordEnvironment): ShellScript {
    const walker = new ScriptWalker(env, this.parser);
    walker.walkText(source);
    return walker.result();
  }
}

let shared: Promise<ShellParser> | null = null;

/** The process's parser, loaded on first use. */
export function sharedShellParser(): Promise<ShellParser> {
  shared ??= ShellParser.load();
  return shared;
}

class ScriptWalker extends ScriptCommandReader {
  private readonly functions = new Map<string, { body: Node; calls: Set<string>; forks: boolean }>();
  /** A loop without end that starts a job in the background each time round. */
  private endlessForks = false;
  private depth = 0;

  constructor(env: WordEnvironment, private readonly parser: Parser) {
    super(env);
  }

  result(): ShellScript {
    return { commands: this.commands, unsafeConstructs: [...this.unsafe], parseError: this.parseError, forkBomb: this.forkBomb() || this.endlessForks, variables: this.variables };
  }

  /** Parses and walks text as a script of its own, its commands joining this one's. */
  override walkText(source: string): void {
    if (this.depth > MAX_NESTING) {
      this.unsafe.add("scripts nested too deeply to read");
      return;
    }
    let tree = this.parser.parse(source);
    if (!tree) {
      this.parseError = true;
      return;
    }
    this.depth += 1;
    try {
      if (tree.rootNode.hasError) this.parseError = true;
      // Here-documents out of the way, the rest of each line is read as bash reads it.
      const separated = withoutHereDocuments(tree.rootNode, source);
      if (separated === null) this.parseError = true;
      else if (separated.documents.size > 0) {
        const again = this.parser.parse(separated.source);
        if (!again) {
          this.parseError = true;
        } else {
          tree.delete();
          tree = again;
          for (const [marker, document] of separated.documents) this.hereDocuments.set(marker, document);
          if (tree.rootNode.hasError) this.parseError = true;
        }
      }
      this.visit(tree.rootNode);
    } finally {
      this.depth -= 1;
      tree.delete();
    }
  }


  override visit(node: Node): void {
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
      case "for_statement":
        this.forStatement(node);
        return;
      case "while_statement":
      case "until_statement":
        if (endlessLoop(node) && startsBackgroundJobs(node)) this.endlessForks = true;
        break;
      case "command_substitution":
      case "process_substitution":
      case "expansion":
      case "arithmetic_expansion":
        this.visitNested(node);
        return;
      case "file_redirect":
      case "heredoc_redirect":
      case "herestring_redirect": {
        // A redirection on its own (`$(< file)`) reads or writes as much as one on a command.
        const redirect = this.redirect(node);
        if (redirect) this.commands.push({ words: [], assignments: [], redirects: [redirect], pipedFrom: null });
        return;
      }
      default:
        break;
    }
    if (/arithmetic|^compound_statement$|^ternary/.test(node.type) || node.text.includes("$[")) this.visitEmbedded(node.text);
    for (const child of children(node)) {
      if (!child.isNamed) {
        if (child.type === "&") this.unsafe.add("a command in the background (&)");
        continue;
      }
      this.visit(child);
    }
  }

  /** Scripts hidden in text the grammar did not parse as commands run too. */
  protected override visitEmbedded(text: string): void {
    for (const script of embeddedScripts(text)) this.walkText(script);
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
    // `[[ ]]` evaluates operands as arithmetic (-eq, -v, subscripts), which runs `$(…)` even from quotes.
    if (open === "[[") {
      this.unsafe.add("[[ ]], which evaluates its operands as arithmetic");
      this.visitEmbedded(node.text);
    }
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

  /** A loop over literal words is walked once per word, with the variable set to it. */
  private forStatement(node: Node): void {
    const variable = node.childForFieldName("variable")?.text ?? named(node).find((child) => child.type === "variable_name")?.text ?? "";
    const body = node.childForFieldName("body") ?? named(node).find((child) => child.type === "do_group");
    const valueNodes = named(node).filter((child) => child.id !== body?.id && child.type !== "variable_name" && child.type !== "do_group");
    const values = valueNodes.flatMap((child) => this.wordsOf(child));
    for (const child of valueNodes) this.visitNested(child);
    if (!body) return;
    const literal = values.length > 0 && values.length <= MAX_LOOP_VALUES && values.every((word) => word.static && !word.glob);
    for (const value of literal ? values : [null]) {
      if (value) this.variables.set(variable, value.text);
      else this.variables.delete(variable);
      this.visit(body);
    }
  }

  private functionDefinition(node: Node): void {
    const name = node.childForFieldName("name")?.text ?? named(node)[0]?.text ?? "";
    const body = node.childForFieldName("body");
    // What a function runs is listed where it is called (with its arguments), and once from its body.
    this.unsafe.add("function definition");
    if (!body) return;
    const calls = new Set<string>();
    const before = this.commands.length;
    this.visit(body);
    for (const command of this.commands.slice(before)) if (command.words[0]) calls.add(command.words[0].text);
    this.functions.set(name, { body, calls, forks: /[|&]/.test(body.text) });
  }

  /** Functions on a cycle of calls to each other, with a pipe or `&` among them, multiply without end. */
  private forkBomb(): boolean {
    for (const [name, fn] of this.functions) {
      if (!fn.forks) continue;
      const seen = new Set<string>();
      const queue = [...fn.calls];
      while (queue.length > 0) {
        const next = queue.shift()!;
        if (next === name) return true;
        if (seen.has(next)) continue;
        seen.add(next);
        queue.push(...(this.functions.get(next)?.calls ?? []));
      }
    }
    return false;
  }






  /** A call of a function defined in the script runs its body with the arguments as $1, $2… */
  protected override callFunction(words: readonly ShellWord[]): void {
    const fn = words[0] ? this.functions.get(words[0].text) : undefined;
    if (!fn || this.depth > MAX_NESTING) return;
    const saved = new Map(this.variables);
    words.slice(1).forEach((word, index) => (word.static ? this.variables.set(String(index + 1), word.text) : this.variables.delete(String(index + 1))));
    const all = words.slice(1);
    for (const name of ["@", "*"]) {
      if (all.every((word) => word.static)) this.variables.set(name, all.map((word) => word.text).join(" "));
      else this.variables.delete(name);
    }
    this.depth += 1;
    try {
      this.visit(fn.body);
    } finally {
      this.depth -= 1;
      this.variables.clear();
      for (const [key, value] of saved) this.variables.set(key, value);
    }
  }






}
