import { createRequire } from "node:module";
import { Language, Parser, type Node } from "web-tree-sitter";

/** One command that would run, as far as the text shows it. */
export interface SimpleCommand {
  /** The words after wrappers (`sudo`, `timeout 5`, `env X=1`…) are removed, unquoted. */
  words: string[];
  /** The command name as written (after unquoting), e.g. `rm`, `/bin/rm`, `./sed`. */
  program: string;
  /** Its name depends on run-time values ($VAR, $(…)): it could be any program. */
  dynamic: boolean;
  /** Some argument depends on run-time values or is a glob. */
  dynamicArguments: boolean;
  /** The wrappers that were stripped, outermost first. */
  wrappers: string[];
  /** Output redirections to files other than /dev/null. */
  writesTo: string[];
}

export interface ShellAnalysis {
  commands: SimpleCommand[];
  /** The text did not parse completely; whatever was found is still listed. */
  parseError: boolean;
  /** A nested script could not be read (`bash -c "$X"`, `eval $X`, `source file`). */
  opaque: string[];
}

const require = createRequire(import.meta.url);
let parserPromise: Promise<Parser> | null = null;

/** The bash grammar is loaded once per process (a few ms). */
export function bashParser(): Promise<Parser> {
  parserPromise ??= (async () => {
    await Parser.init();
    const language = await Language.load(require.resolve("tree-sitter-bash/tree-sitter-bash.wasm"));
    const parser = new Parser();
    parser.setLanguage(language);
    return parser;
  })();
  return parserPromise;
}

interface WordValue {
  text: string;
  dynamic: boolean;
}

/** Removes backslash escapes the way the shell does outside quotes (`\rm` → `rm`). */
function unescapeBare(text: string): string {
  return text.replace(/\\(.)/gs, "$1").replace(/\\\n/g, "");
}

/** The static value of a word node, or a note that it depends on run-time values. */
function wordValue(node: Node): WordValue {
  switch (node.type) {
    case "word":
    case "number": {
      const text = unescapeBare(node.text);
      // Unquoted glob characters expand at run time.
      return { text, dynamic: /[*?[]/.test(node.text.replace(/\\./g, "")) };
    }
    case "raw_string":
      return { text: node.text.slice(1, -1), dynamic: false };
    case "string": {
      let text = "";
      let dynamic = false;
      for (const child of node.namedChildren) {
        if (!child) continue;
        if (child.type === "string_content") text += child.text.replace(/\\([$`"\\\n])/g, "$1");
        else dynamic = true;
      }
      return { text, dynamic };
    }
    case "concatenation": {
      let text = "";
      let dynamic = false;
      for (const child of node.namedChildren) {
        if (!child) continue;
        const part = wordValue(child);
        text += part.text;
        dynamic ||= part.dynamic;
      }
      return { text, dynamic };
    }
    default:
      // $VAR, ${VAR}, $(…), `…`, $'…', arithmetic, process substitution: known only at run time.
      return { text: node.text, dynamic: true };
  }
}

// How many following words each option of a wrapper consumes.
interface WrapperSpec {
  /** Options that take a value as the next word. */
  optionsWithValue: ReadonlySet<string>;
  /** Leading positional words before the wrapped command (timeout's duration, chroot's directory). */
  positionals: number;
  /** `VAR=value` words may precede the command (env). */
  assignments?: boolean;
}

const WRAPPERS: Record<string, WrapperSpec> = {
  sudo: { optionsWithValue: new Set(["-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "--user", "--group", "--host", "--prompt"]), positionals: 0, assignments: true },
  doas: { optionsWithValue: new Set(["-u", "-C"]), positionals: 0 },
  env: { optionsWithValue: new Set(["-u", "--unset", "-C", "--chdir", "-S", "--split-string"]), positionals: 0, assignments: true },
  timeout: { optionsWithValue: new Set(["-s", "--signal", "-k", "--kill-after"]), positionals: 1 },
  nice: { optionsWithValue: new Set(["-n", "--adjustment"]), positionals: 0 },
  ionice: { optionsWithValue: new Set(["-c", "-n", "-p", "--class", "--classdata"]), positionals: 0 },
  nohup: { optionsWithValue: new Set(), positionals: 0 },
  setsid: { optionsWithValue: new Set(), positionals: 0 },
  time: { optionsWithValue: new Set(["-f", "-o", "--format", "--output"]), positionals: 0 },
  command: { optionsWithValue: new Set(), positionals: 0 },
  builtin: { optionsWithValue: new Set(), positionals: 0 },
  exec: { optionsWithValue: new Set(["-a"]), positionals: 0 },
  stdbuf: { optionsWithValue: new Set(["-i", "-o", "-e"]), positionals: 0 },
  xargs: { optionsWithValue: new Set(["-a", "-d", "-E", "-e", "-I", "-i", "-L", "-l", "-n", "-P", "-s", "--arg-file", "--delimiter", "--max-args", "--max-procs", "--replace"]), positionals: 0 },
  chroot: { optionsWithValue: new Set(["--userspec", "--groups"]), positionals: 1 },
  watch: { optionsWithValue: new Set(["-n", "--interval", "-d"]), positionals: 0 },
  flock: { optionsWithValue: new Set(["-w", "--timeout", "-E"]), positionals: 1 },
  strace: { optionsWithValue: new Set(["-e", "-o", "-p", "-s", "-u"]), positionals: 0 },
};

const SHELLS = new Set(["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"]);

export function baseName(program: string): string {
  return program.slice(program.lastIndexOf("/") + 1);
}

/** Strips wrapper words, returning the wrapped command's words and the wrappers' names. */
function stripWrappers(words: WordValue[]): { words: WordValue[]; wrappers: string[]; dynamicPrefix: boolean } {
  const wrappers: string[] = [];
  let rest = words;
  let dynamicPrefix = false;
  for (;;) {
    const head = rest[0];
    if (!head) break;
    const spec = WRAPPERS[baseName(head.text)];
    if (!spec || head.dynamic) break;
    wrappers.push(baseName(head.text));
    let index = 1;
    let positionals = spec.positionals;
    while (index < rest.length) {
      const word = rest[index]!;
      if (word.dynamic && word.text.startsWith("-")) dynamicPrefix = true;
      if (word.text === "--") {
        index += 1;
        break;
      }
      if (word.text.startsWith("-") && word.text.length > 1) {
        const [flag] = word.text.split("=", 1) as [string];
        index += spec.optionsWithValue.has(flag) && !word.text.includes("=") ? 2 : 1;
        continue;
      }
      if (spec.assignments && /^[A-Za-z_][A-Za-z0-9_]*=/.test(word.text)) {
        index += 1;
        continue;
      }
      if (positionals > 0) {
        positionals -= 1;
        index += 1;
        continue;
      }
      break;
    }
    rest = rest.slice(index);
  }
  return { words: rest, wrappers, dynamicPrefix };
}

function redirectTargets(node: Node): string[] {
  const targets: string[] = [];
  for (const child of node.namedChildren) {
    if (!child || child.type !== "file_redirect") continue;
    const operator = child.children.find((c) => c && !c.isNamed)?.text ?? "";
    if (!operator.includes(">")) continue;
    const destination = child.childForFieldName("destination") ?? child.namedChildren.at(-1);
    const target = destination ? wordValue(destination) : { text: "", dynamic: true };
    if (target.text !== "/dev/null" && !/^&?\d$/.test(target.text)) targets.push(target.dynamic ? "(dynamic)" : target.text);
  }
  return targets;
}

function plainCommand(words: string[]): SimpleCommand {
  return { words, program: words[0] ?? "", dynamic: false, dynamicArguments: false, wrappers: [], writesTo: [] };
}

class Analyzer {
  readonly commands: SimpleCommand[] = [];
  readonly opaque: string[] = [];
  parseError = false;

  constructor(private readonly parser: Parser, private readonly depth: number) {}

  analyze(source: string): void {
    const tree = this.parser.parse(source);
    if (!tree) {
      this.parseError = true;
      return;
    }
    if (tree.rootNode.hasError) this.parseError = true;
    this.visit(tree.rootNode);
    tree.delete();
  }

  private visit(node: Node): void {
    if (node.type === "command") this.command(node);
    if (node.type === "redirected_statement") {
      const writes = redirectTargets(node);
      if (writes.length > 0) {
        // A redirection on a compound statement writes too; attach it to a pseudo-command.
        const body = node.childForFieldName("body");
        if (body && body.type !== "command") this.commands.push({ ...plainCommand([]), writesTo: writes });
        else if (body) this.pendingWrites.set(body.id, writes);
      }
    }
    // A function can shadow any program name; what it runs is listed from its body, its name is unknowable.
    if (node.type === "function_definition") this.commands.push({ ...plainCommand(["function"]), dynamic: true });
    for (const child of node.namedChildren) if (child) this.visit(child);
  }

  private readonly pendingWrites = new Map<number, string[]>();

  private command(node: Node): void {
    const words: WordValue[] = [];
    const name = node.childForFieldName("name");
    if (name) {
      const inner = name.namedChildren[0] ?? name;
      words.push(wordValue(inner));
    }
    for (const argument of node.childrenForFieldName("argument")) if (argument) words.push(wordValue(argument));
    const writesTo = [...(this.pendingWrites.get(node.id) ?? []), ...redirectTargets(node)];
    if (words.length === 0) {
      // Only assignments (`X=1`): nothing runs, but the assignment may feed a later command.
      if (writesTo.length > 0) this.commands.push({ ...plainCommand([]), writesTo });
      return;
    }
    const stripped = stripWrappers(words);
    const program = stripped.words[0]?.text ?? "";
    const command: SimpleCommand = {
      words: stripped.words.map((word) => word.text),
      program,
      dynamic: stripped.dynamicPrefix || Boolean(stripped.words[0]?.dynamic) || (stripped.words.length === 0 && stripped.wrappers.length > 0),
      // xargs appends words read from its input.
      dynamicArguments: stripped.words.slice(1).some((word) => word.dynamic) || stripped.wrappers.includes("xargs"),
      wrappers: stripped.wrappers,
      writesTo,
    };
    this.commands.push(command);
    for (const wrapper of stripped.wrappers) this.commands.push(plainCommand([wrapper]));
    this.nested(stripped.words);
  }

  /** Scripts handed to shells, eval, find -exec and xargs are commands too. */
  private nested(words: WordValue[]): void {
    const program = baseName(words[0]?.text ?? "");
    if (this.depth > 4) {
      this.opaque.push(words.map((word) => word.text).join(" "));
      return;
    }
    const inner = new Analyzer(this.parser, this.depth + 1);
    let script: WordValue | null = null;
    if (SHELLS.has(program)) {
      const index = words.findIndex((word, i) => i > 0 && /^-[a-z]*c[a-z]*$/.test(word.text));
      if (index > 0) script = words[index + 1] ?? { text: "", dynamic: true };
      else if (words.length > 1 && !words[1]!.text.startsWith("-")) this.opaque.push(`${program} ${words[1]!.text}`);
      else if (words.length === 1 || words.slice(1).every((word) => word.text.startsWith("-"))) this.opaque.push(`${program} reading commands from its input`);
    } else if (program === "eval") {
      const rest = words.slice(1);
      script = { text: rest.map((word) => word.text).join(" "), dynamic: rest.some((word) => word.dynamic) };
    } else if (program === "source" || program === ".") {
      this.opaque.push(words.map((word) => word.text).join(" "));
    } else if (program === "find") {
      for (let i = 1; i < words.length; i += 1) {
        if (!["-exec", "-execdir", "-ok", "-okdir"].includes(words[i]!.text)) continue;
        const end = words.findIndex((word, j) => j > i && (word.text === ";" || word.text === "+"));
        const part = words.slice(i + 1, end === -1 ? undefined : end);
        if (part.length > 0) this.commands.push(this.simpleFrom(part));
      }
    }
    if (script) {
      if (script.dynamic) this.opaque.push(script.text);
      else inner.analyze(script.text);
    }
    this.commands.push(...inner.commands);
    this.opaque.push(...inner.opaque);
    this.parseError ||= inner.parseError;
  }

  private simpleFrom(words: WordValue[]): SimpleCommand {
    const stripped = stripWrappers(words);
    return {
      words: stripped.words.map((word) => word.text),
      program: stripped.words[0]?.text ?? "",
      dynamic: Boolean(stripped.words[0]?.dynamic),
      dynamicArguments: stripped.words.slice(1).some((word) => word.dynamic),
      wrappers: stripped.wrappers,
      writesTo: [],
    };
  }
}

/** Parses a shell command with tree-sitter-bash and lists every simple command that could run. */
export async function analyzeShell(source: string): Promise<ShellAnalysis> {
  const parser = await bashParser();
  const analyzer = new Analyzer(parser, 0);
  analyzer.analyze(source);
  return { commands: analyzer.commands, parseError: analyzer.parseError, opaque: analyzer.opaque };
}
