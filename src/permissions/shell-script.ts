import { createRequire } from "node:module";
import { Language, Parser, type Node } from "web-tree-sitter";
import { literalOutput } from "./literal-output.js";
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

// Operators of `${NAME…}` that give a default when NAME is unset (`-`, `=`) or also when it is empty (`:-`, `:=`).
const DEFAULT_OPERATORS = new Set([":-", "-", ":=", "="]);
const MAX_NESTING = 8;
const MAX_LOOP_VALUES = 16;

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

function named(node: Node): Node[] {
  return node.namedChildren.filter((child): child is Node => child !== null);
}

function children(node: Node): Node[] {
  return node.children.filter((child): child is Node => child !== null);
}

/** `while :`, `while true`, `until false`: a loop only a break or a signal ends. */
function endlessLoop(node: Node): boolean {
  const condition = node.childForFieldName("condition")?.text.trim().replace(/;$/, "") ?? "";
  return node.type === "while_statement" ? /^(:|true|\[ 1 \]|\(\( ?1 ?\)\))$/.test(condition) : /^false$/.test(condition);
}

function startsBackgroundJobs(node: Node): boolean {
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
function heredocDelimiter(start: string): { word: string; quoted: boolean } | null {
  const plain = /^[A-Za-z0-9_.+-]+$/;
  const quoted = /^'([A-Za-z0-9_.+-]+)'$|^"([A-Za-z0-9_.+-]+)"$|^\\([A-Za-z0-9_.+-]+)$/.exec(start);
  if (quoted) return { word: quoted[1] ?? quoted[2] ?? quoted[3]!, quoted: true };
  return plain.test(start) ? { word: start, quoted: false } : null;
}

/** The value of arithmetic made only of whole numbers and + - * (`-1`, `0-1`, `(2*3)`), else null. */
function constantArithmetic(expression: string): string | null {
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

class ScriptWalker {
  readonly commands: ShellCommand[] = [];
  readonly unsafe = new Set<string>();
  parseError = false;
  private readonly variables: Map<string, string>;
  private readonly byNode = new Map<number, ShellCommand>();
  private readonly functions = new Map<string, { body: Node; calls: Set<string>; forks: boolean }>();
  private extraIfs = "";
  /** A loop without end that starts a job in the background each time round. */
  private endlessForks = false;
  private depth = 0;

  constructor(private readonly env: WordEnvironment, private readonly parser: Parser) {
    this.variables = new Map(env.variables);
  }

  result(): ShellScript {
    return { commands: this.commands, unsafeConstructs: [...this.unsafe], parseError: this.parseError, forkBomb: this.forkBomb() || this.endlessForks, variables: this.variables };
  }

  /** Parses and walks text as a script of its own, its commands joining this one's. */
  walkText(source: string): void {
    if (this.depth > MAX_NESTING) {
      this.unsafe.add("scripts nested too deeply to read");
      return;
    }
    const tree = this.parser.parse(source);
    if (!tree) {
      this.parseError = true;
      return;
    }
    this.depth += 1;
    try {
      if (tree.rootNode.hasError) this.parseError = true;
      this.visit(tree.rootNode);
    } finally {
      this.depth -= 1;
      tree.delete();
    }
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
  private visitEmbedded(text: string): void {
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

  private pipeline(node: Node): void {
    let previous: ShellCommand | null = null;
    for (const child of children(node)) {
      if (!child.isNamed) continue;
      const before = this.commands.length;
      this.visit(child);
      const first = this.firstOf(child) ?? this.commands[before] ?? null;
      if (first && previous && !first.pipedFrom) first.pipedFrom = previous;
      previous = this.firstOf(child) ?? null;
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
      const operator = children(node).find((child) => !child.isNamed)?.text ?? "<<";
      const delimiter = heredocDelimiter(start?.text ?? "");
      const text = bodyNode?.text ?? "";
      // Where the grammar and bash could end the here-document at different lines, the lines after
      // it might be commands to bash: nothing in it can be trusted.
      const lines = text.split("\n").map((line) => (operator === "<<-" ? line.replace(/^\t+/, "") : line));
      if (!delimiter || lines.includes(delimiter.word)) this.unsafe.add("a here-document whose end bash may read differently");
      const expanding = !delimiter?.quoted;
      // An unquoted here-document runs `$(…)` and backticks in its text, wherever the grammar stops.
      const runs = expanding && (/[`]|\$\(|\$\[/.test(text) || (bodyNode ? named(bodyNode).some((child) => child.type !== "heredoc_content") : false));
      if (runs) {
        this.unsafe.add("a here-document that runs commands");
        if (bodyNode) this.visitNested(bodyNode);
        this.visitEmbedded(text);
      }
      return { operator, fd: null, target: null, body: { text, static: !runs && !(expanding && text.includes("$")) } };
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
      const inner = child.type === "command_name" ? (named(child)[0] ?? child) : child;
      words.push(...this.wordsOf(inner));
      this.visitNested(inner);
    }
    const command: ShellCommand = { words, assignments, redirects: [...redirects, ...outerRedirects], pipedFrom: null };
    this.byNode.set(node.id, command);
    this.commands.push(command);
    this.callFunction(words);
  }

  /** A call of a function defined in the script runs its body with the arguments as $1, $2… */
  private callFunction(words: readonly ShellWord[]): void {
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

  /** Commands inside a word (`$(…)`, backticks, process substitution, `${x:-…}` defaults) run too. */
  private visitNested(node: Node): void {
    if (node.isError) this.parseError = true;
    if (node.type === "command_substitution" && node.text.startsWith("`")) {
      // Inside backticks, `\`` and `\$` are the inner command's own: bash reads the body again.
      this.walkText(node.text.slice(1, -1).replace(/\\([`$\\])/g, "$1"));
      return;
    }
    if (node.type === "command_substitution" || node.type === "process_substitution") {
      if (node.type === "process_substitution") this.unsafe.add("process substitution");
      for (const inner of named(node)) this.visit(inner);
      return;
    }
    if (node.type === "expansion" || node.type === "arithmetic_expansion") {
      if (node.type === "arithmetic_expansion" || !(named(node).length === 1 && named(node)[0]!.type === "variable_name")) this.unsafe.add(node.type === "expansion" ? "a parameter expansion with operators" : "arithmetic expansion");
      this.visitEmbedded(node.text);
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
      case "arithmetic_expansion": {
        // `$((-1))` is as fixed as `-1` (and `kill -9 -1` signals every process).
        const constant = constantArithmetic(node.text.slice(3, -2));
        return [{ text: constant ?? node.text, quoted: false, dynamic: constant === null }];
      }
      default:
        return [{ text: node.text, quoted: false, dynamic: true }];
    }
  }

  private expansionPieces(node: Node, quoted: boolean): WordPiece[] {
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
      } else if (name !== null && parts.length === 1 && !operator) value = this.lookup(name);
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
    if (value === null) return [{ text: node.text, quoted, dynamic: true }];
    // $HOME and $PWD are as good as literals; other values came from the script itself.
    const expanded = !(node.type !== "command_substitution" && (parts[0]?.text === "HOME" || parts[0]?.text === "PWD"));
    // "$@" is each argument as a word of its own, quoted or not.
    if (node.type === "simple_expansion" && parts[0]?.text === "@") return [{ text: value, quoted: false, dynamic: false, split: true, expanded }];
    return [quoted ? { text: value, quoted: true, dynamic: false, expanded } : { text: value, quoted: false, dynamic: false, split: true, expanded }];
  }

  private lookup(name: string): string | null {
    if (name === "HOME") return this.env.home;
    // The directory the command runs in: as a path, `.` means the same.
    if (name === "PWD") return ".";
    return this.variables.get(name) ?? null;
  }

  /**
   * The output of `$(…)` when the text fixes it: `echo`, `printf` (escapes and `%s` included), the
   * decoders a literal is piped through (`base64 -d`, `xxd -r -p`, `rev`), `which rm`, `command -v rm`.
   * Anything else is only known at run time.
   */
  private substitutionValue(node: Node): string | null {
    const inner = named(node);
    if (inner.length !== 1) return null;
    const statement = inner[0]!;
    const commands: ShellCommand[] = [];
    const collect = (current: Node): boolean => {
      if (current.type === "command") {
        const before = this.commands.length;
        this.command(current, []);
        commands.push(...this.commands.splice(before));
        return true;
      }
      if (current.type === "pipeline") {
        let previous: ShellCommand | null = null;
        for (const child of named(current)) {
          if (!collect(child)) return false;
          const last = commands.at(-1)!;
          if (previous) last.pipedFrom = previous;
          previous = last;
        }
        return true;
      }
      if (current.type === "redirected_statement") {
        const body = current.childForFieldName("body");
        if (body?.type !== "command") return false;
        const redirects = named(current).filter((child) => child.id !== body.id).map((child) => this.redirect(child)).filter((redirect): redirect is ShellRedirect => redirect !== null);
        const before = this.commands.length;
        this.command(body, redirects);
        commands.push(...this.commands.splice(before));
        return true;
      }
      return false;
    };
    if (!collect(statement) || commands.length === 0) return null;
    // The substitution's commands are judged where they stand, in the walk; here only their output counts.
    const last = commands.at(-1)!;
    const words = last.words;
    if (!words.every((word) => word.static && !word.glob)) return null;
    const [program, ...args] = words.map((word) => word.text);
    if (program === "which" && args.length === 1) return args[0]!;
    if ((program === "command" || program === "type") && args.length === 2 && ["-v", "-p", "-P"].includes(args[0]!)) return args[1]!;
    const output = literalOutput(last);
    return output?.static ? output.text.replace(/\n+$/, "") : null;
  }
}
