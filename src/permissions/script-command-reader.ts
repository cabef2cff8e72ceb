import { dirname as posixDirname, resolve as resolvePath } from "node:path";
import type { Node } from "web-tree-sitter";
import type { HereDocument } from "./here-documents.js";
import { literalOutput } from "./literal-output.js";
import { ScriptWordReader } from "./script-word-reader.js";
import type { ShellCommand, ShellRedirect } from "./shell-script.js";
import { children, heredocDelimiter, isTransformation, named } from "./shell-syntax.js";
import type { ShellWord } from "./shell-words.js";

/**
 * Turns a script's command nodes into the simple commands that would run: their words,
 * assignments, redirections (here-documents included) and pipes, and the scripts nested in
 * their words. The walk over control flow is ScriptWalker's (shell-script.ts).
 */
export abstract class ScriptCommandReader extends ScriptWordReader {
  readonly commands: ShellCommand[] = [];
  parseError = false;
  protected readonly byNode = new Map<number, ShellCommand>();
  /** The here-documents taken out of the text, by the marker that stands for each. */
  protected readonly hereDocuments = new Map<string, HereDocument>();

  abstract visit(node: Node): void;
  abstract walkText(source: string): void;
  protected abstract visitEmbedded(text: string): void;
  /** A call of a function defined in the script runs its body with the arguments as $1, $2… */
  protected abstract callFunction(words: readonly ShellWord[]): void;

  protected pipeline(node: Node): void {
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

  protected firstOf(node: Node): ShellCommand | undefined {
    if (node.type === "command") return this.byNode.get(node.id);
    if (node.type === "redirected_statement") {
      const body = node.childForFieldName("body");
      return body ? this.firstOf(body) : undefined;
    }
    return undefined;
  }

  protected redirected(node: Node): void {
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

  protected redirect(node: Node): ShellRedirect | null {
    if (node.type === "file_redirect") {
      const operator = children(node).filter((child) => !child.isNamed).map((child) => child.text).join("");
      // A here-document taken out of the text (see here-documents.ts) stands here as `<marker`.
      const document = operator === "<" ? this.hereDocuments.get(named(node).at(-1)?.text ?? "") : undefined;
      if (document) return this.hereDocument(document.operator, document.start, document.text);
      const fdNode = named(node).find((child) => child.type === "file_descriptor");
      const destination = node.childForFieldName("destination") ?? named(node).filter((child) => child.type !== "file_descriptor").at(-1) ?? null;
      const targetWords = destination ? this.wordsOf(destination) : [];
      if (destination) this.visitNested(destination);
      const target = targetWords.length === 1 ? targetWords[0]! : targetWords.length === 0 ? null : { text: targetWords.map((w) => w.text).join(" "), static: false, glob: true };
      return { operator: operator || ">", fd: fdNode ? Number(fdNode.text) : null, target };
    }
    if (node.type === "heredoc_redirect") {
      // Only where the here-document could not be taken out of the text (its end is not found): not trusted.
      this.unsafe.add("a here-document the reader could not separate from its line");
      const start = named(node).find((child) => child.type === "heredoc_start");
      const bodyNode = named(node).find((child) => child.type === "heredoc_body");
      for (const child of named(node)) if (!["heredoc_start", "heredoc_body", "heredoc_end"].includes(child.type)) this.visit(child);
      return this.hereDocument(children(node).find((child) => !child.isNamed)?.text ?? "<<", start?.text ?? "", bodyNode?.text ?? "");
    }
    if (node.type === "herestring_redirect") {
      const value = named(node).at(-1);
      const words = value ? this.wordsOf(value) : [];
      if (value) this.visitNested(value);
      return { operator: "<<<", fd: null, target: null, body: { text: words.map((w) => w.text).join(" "), static: words.every((w) => w.static) } };
    }
    return null;
  }

  /** A here-document's redirection: its text, and whether that text is fixed or runs commands as it expands. */
  private hereDocument(operator: string, start: string, text: string): ShellRedirect {
    const delimiter = heredocDelimiter(start);
    // Where the grammar and bash could end the here-document at different lines, the lines after
    // it might be commands to bash: nothing in it can be trusted.
    const lines = text.split("\n").map((line) => (operator === "<<-" ? line.replace(/^\t+/, "") : line));
    if (!delimiter || lines.includes(delimiter.word)) this.unsafe.add("a here-document whose end bash may read differently");
    const expanding = !delimiter?.quoted;
    // An unquoted here-document runs `$(…)` and backticks in its text, wherever the grammar stops.
    const runs = expanding && /[`]|\$\(|\$\[/.test(text);
    if (runs) {
      this.unsafe.add("a here-document that runs commands");
      this.visitEmbedded(text);
    }
    return { operator, fd: null, target: null, body: { text, static: !runs && !(expanding && text.includes("$")) } };
  }

  protected command(node: Node, outerRedirects: ShellRedirect[]): void {
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
    this.noteDirectoryChange(words);
    this.callFunction(words);
  }

  /** A `cd` moves $PWD and $OLDPWD for the words after it, read in the order they stand. */
  private noteDirectoryChange(words: readonly ShellWord[]): void {
    const program = words[0];
    if (!program?.static || !["cd", "pushd", "popd"].includes(program.text)) return;
    const target = words.slice(1).find((word) => !word.text.startsWith("-") || word.text === "-");
    const before = this.cwd;
    let after: string | null;
    if (program.text === "popd") after = null;
    else if (!target) after = this.env.home;
    else if (target.text === "-") after = this.previousCwd;
    else if (!target.static || target.glob) after = null;
    else if (target.text.startsWith("/")) after = resolvePath(target.text);
    else after = before === null ? null : resolvePath(before, target.text);
    this.previousCwd = before;
    this.cwd = after;
  }

  /** Commands inside a word (`$(…)`, backticks, process substitution, `${x:-…}` defaults) run too. */
  protected visitNested(node: Node): void {
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
      if (node.type === "arithmetic_expansion" || !(named(node).length === 1 && named(node)[0]!.type === "variable_name") || isTransformation(node)) this.unsafe.add(node.type === "expansion" ? "a parameter expansion with operators" : "arithmetic expansion");
      this.visitEmbedded(node.text);
    }
    for (const child of named(node)) this.visitNested(child);
  }

  /**
   * The output of `$(…)` when the text fixes it: `echo`, `printf` (escapes and `%s` included), the
   * decoders a literal is piped through (`base64 -d`, `xxd -r -p`, `rev`), `which rm`, `command -v rm`.
   * Anything else is only known at run time.
   */
  protected substitutionValue(node: Node): string | null {
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
    // `$(dirname "$PWD")` is the folder above: as fixed as the path it is given.
    if (program === "dirname" && args.length === 1) return posixDirname(args[0]!);
    if (program === "pwd" && args.every((arg) => arg === "-L" || arg === "-P") && this.cwd !== null) return this.cwd;
    if ((program === "command" || program === "type") && args.length === 2 && ["-v", "-p", "-P"].includes(args[0]!)) return args[1]!;
    const output = literalOutput(last);
    return output?.static ? output.text.replace(/\n+$/, "") : null;
  }
}
