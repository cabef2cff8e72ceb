import type { ShellWord } from "./shell-words.js";

/** How an interpreter is handed code on its command line. */
interface InterpreterSpec {
  /** Options whose value is code (`python3 -c CODE`, `node -e CODE`). */
  inline: readonly string[];
  /** Options that take a value which is not code (so it is not mistaken for the script). */
  withValue?: readonly string[];
  /** The first operand is the program itself (awk 'BEGIN{…}'), unless a program file is named. */
  codeOperand?: boolean;
  /** Options that name a program file instead of inline code. */
  programFile?: readonly string[];
  /** A subcommand that takes code (`deno eval CODE`). */
  evalSubcommand?: string;
}

const PYTHON: InterpreterSpec = { inline: ["-c"], withValue: ["-W", "-X", "-m", "--check-hash-based-pycs"] };
const AWK: InterpreterSpec = { inline: [], withValue: ["-v", "-F", "--assign", "--field-separator"], codeOperand: true, programFile: ["-f", "--file", "-E", "--exec"] };

const INTERPRETERS: Record<string, InterpreterSpec> = {
  python: PYTHON,
  python2: PYTHON,
  python3: PYTHON,
  pypy: PYTHON,
  pypy3: PYTHON,
  node: { inline: ["-e", "--eval", "-p", "--print"], withValue: ["-r", "--require", "--import", "--loader", "--input-type"] },
  nodejs: { inline: ["-e", "--eval", "-p", "--print"], withValue: ["-r", "--require", "--import", "--loader"] },
  bun: { inline: ["-e", "--eval", "-p", "--print"] },
  deno: { inline: [], evalSubcommand: "eval" },
  perl: { inline: ["-e", "-E"], withValue: ["-I", "-M", "-m"] },
  ruby: { inline: ["-e"], withValue: ["-I", "-r"] },
  php: { inline: ["-r", "-R", "-B", "-E"] },
  lua: { inline: ["-e"], withValue: ["-l"] },
  luajit: { inline: ["-e"], withValue: ["-l"] },
  Rscript: { inline: ["-e"] },
  R: { inline: ["-e"] },
  osascript: { inline: ["-e"] },
  tclsh: { inline: [] },
  expect: { inline: ["-c"] },
  awk: AWK,
  gawk: AWK,
  mawk: AWK,
  nawk: AWK,
};

/** node's options whose value is a file loaded before the program. */
const PRELOADS = new Set(["-r", "--require", "--import", "--loader"]);

export function isInterpreter(program: string): boolean {
  return Object.hasOwn(INTERPRETERS, program) || /^python\d(\.\d+)?$/.test(program);
}

export interface InterpreterUse {
  /** Code given on the command line. */
  inline: ShellWord[];
  /** The interpreter reads its program from standard input (`node -`, `python3` with nothing to run). */
  readsStdin: boolean;
  /** It runs a program from a file (`python3 script.py`, `node server.js`). */
  runsFile: boolean;
  /** The program file it runs, where the command line names one. */
  file?: ShellWord;
  /** The module `python3 -m` runs. */
  module?: ShellWord;
  /** Files loaded before the program (`node -r ./x.js`, `--import`, `--loader`). */
  preloads: ShellWord[];
  /** Only asks the interpreter about itself (`--version`, `-V`, `--help`). */
  query: boolean;
}

/** Where in a cluster of one-letter flags the code option stands, or -1: scanning stops at a letter that takes a value. */
function codeLetterAt(cluster: string, inline: ReadonlySet<string>, withValue: ReadonlySet<string>): number {
  for (let index = 0; index < cluster.length; index += 1) {
    const option = `-${cluster[index]}`;
    if (inline.has(option)) return index;
    if (withValue.has(option)) return -1;
  }
  return -1;
}

/** Reads an interpreter's command line: inline code, a program from standard input, or a file. */
export function readInterpreter(program: string, args: readonly ShellWord[]): InterpreterUse {
  const spec = INTERPRETERS[program] ?? PYTHON;
  const use: InterpreterUse = { inline: [], readsStdin: false, runsFile: false, query: false, preloads: [] };
  const inline = new Set(spec.inline);
  const withValue = new Set(spec.withValue ?? []);
  const programFile = new Set(spec.programFile ?? []);
  let fromFile = false;
  for (let i = 0; i < args.length; i += 1) {
    const word = args[i]!;
    const text = word.text;
    if (spec.evalSubcommand && i === 0 && text === spec.evalSubcommand) {
      use.inline.push(...args.slice(1));
      return use;
    }
    if (text === "-") {
      use.readsStdin = true;
      return use;
    }
    if (text === "--") {
      if (args[i + 1]) use.runsFile = true;
      if (args[i + 1] && !spec.codeOperand) use.file ??= args[i + 1]!;
      else if (!args[i + 1]) use.readsStdin = !spec.codeOperand;
      if (spec.codeOperand && args[i + 1] && !fromFile) use.inline.push(args[i + 1]!);
      return use;
    }
    if (word.static && text.startsWith("-") && text.length > 1) {
      if (["--version", "-V", "--help", "-h", "-v"].includes(text) && args.length === 1) use.query = true;
      const name = text.startsWith("--") ? text.split("=", 1)[0]! : text.slice(0, 2);
      if (text.startsWith("--") && inline.has(name)) {
        if (text.includes("=")) use.inline.push({ ...word, text: text.slice(text.indexOf("=") + 1) });
        else if (args[i + 1]) use.inline.push(args[i + 1]!);
        return use;
      }
      // `perl -ne CODE`, `python3 -c'CODE'`: the code option may sit anywhere in a cluster of flags.
      // A letter that takes a value (`-MFile::Path`, `-Ilib`) ends the cluster: the rest is its value, not flags.
      const at = text.startsWith("--") ? -1 : codeLetterAt(text.slice(1), inline, withValue);
      if (at !== -1) {
        const attached = text.slice(at + 2);
        if (attached) use.inline.push({ ...word, text: attached });
        if (args[i + 1]) use.inline.push(args[i + 1]!);
        return use;
      }
      if (programFile.has(name)) {
        fromFile = true;
        use.runsFile = true;
        const named = text.length === 2 || (text.startsWith("--") && !text.includes("=")) ? args[i + 1] : { ...word, text: text.startsWith("--") ? text.slice(text.indexOf("=") + 1) : text.slice(2) };
        if (named) use.file ??= named;
        if (text.length === 2 || (text.startsWith("--") && !text.includes("="))) i += 1;
        continue;
      }
      const separate = text.length === 2 || (text.startsWith("--") && !text.includes("="));
      const value = separate ? args[i + 1] : { ...word, text: text.startsWith("--") ? text.slice(text.indexOf("=") + 1) : text.slice(2) };
      if (withValue.has(name) && separate) i += 1;
      if (PRELOADS.has(name) && (program === "node" || program === "nodejs") && value) use.preloads.push(value);
      if (program.startsWith("python") && name === "-m") {
        use.runsFile = true;
        if (value) use.module = value;
        return use;
      }
      continue;
    }
    if (spec.codeOperand && !fromFile) {
      use.inline.push(word);
      return use;
    }
    use.runsFile = true;
    use.file ??= word;
    return use;
  }
  if (!use.query && !use.runsFile && use.inline.length === 0 && !spec.codeOperand) use.readsStdin = true;
  return use;
}

/** The string literals in a piece of code, with simple escapes undone. */
export function stringLiterals(code: string): string[] {
  const found: string[] = [];
  const pattern = /"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|`((?:[^`\\]|\\.)*)`/gs;
  for (const match of code.matchAll(pattern)) {
    const body = match[1] ?? match[2] ?? match[3] ?? "";
    found.push(body.replace(/\\(["'`\\])/g, "$1").replace(/\\n/g, "\n").replace(/\\t/g, "\t"));
  }
  return found;
}

/** `["rm", "-rf", "/"]` or `system "rm","-rf","/"` (an argument vector written as a list) → `rm -rf /`. */
export function argumentVectors(code: string): string[] {
  const vectors: string[] = [];
  for (const match of code.matchAll(/((?:(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\s*,\s*)+(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'))/g)) {
    vectors.push(stringLiterals(match[1]!).map((word) => (/[\s'"]/.test(word) ? `'${word.replace(/'/g, "")}'` : word)).join(" "));
  }
  return vectors;
}

/** `'r' + 'm -rf /'`, `"r" . "m"`, `"r" .. "m"`: string literals joined by an operator become one. */
export function joinConcatenations(code: string): string {
  const pair = /(["'])((?:(?!\1)[^\\]|\\.)*)\1\s*(?:\+|\.\.?)\s*(["'])((?:(?!\3)[^\\]|\\.)*)\3/;
  let joined = code;
  for (let round = 0; round < 32 && pair.test(joined); round += 1) joined = joined.replace(pair, (_match, _q1, a: string, _q2, b: string) => `"${(a + b).replace(/"/g, '\\"')}"`);
  return joined;
}

/** Text that decodes as base64 to mostly printable text (`exec(b64decode("…"))`). */
export function decodedBase64(text: string): string | null {
  const compact = text.replace(/\s+/g, "");
  if (compact.length < 8 || !/^[A-Za-z0-9+/_-]+={0,2}$/.test(compact)) return null;
  const decoded = Buffer.from(compact, compact.includes("-") || compact.includes("_") ? "base64url" : "base64").toString("utf8");
  const printable = [...decoded].filter((ch) => ch >= " " || ch === "\n" || ch === "\t").length;
  return decoded.length > 0 && printable / decoded.length > 0.95 ? decoded : null;
}

// Library calls that delete whole trees, in the languages agents reach for.
const TREE_DELETION = /\b(rmtree|rmSync|rmdirSync|rmdir|rm_rf|rm_r|remove_dir_all|remove_tree|removedirs|rimraf|deleteRecursively|FileUtils\.rm|fs\.rm|fs\.promises\.rm|fsPromises\.rm|promises\.rm|Deno\.remove|Deno\.removeSync|Bun\.\$)\b|\.rm\s*\(/;
// Ways code names the root or a home directory.
// Python's, Node's (and Deno's and Bun's), Ruby's, Perl's and PHP's ways alike.
const ROOT_OR_HOME = new RegExp(
  [
    String.raw`\bhomedir\s*\(\s*\)`, String.raw`\buserInfo\s*\(\s*\)\s*\.\s*homedir\b`, String.raw`\bPath\.home\(\)`, String.raw`expanduser\(\s*["']~["']\s*\)`,
    String.raw`\benv\s*(\.\s*HOME\b|\[\s*["']HOME["']\s*\])`, String.raw`\benviron\s*(\[\s*["']HOME["']\s*\]|\.get\(\s*["']HOME["'])`, String.raw`\bgetenv\(\s*["']HOME["']`,
    String.raw`\bENV\s*\[\s*["']HOME["']\s*\]`, String.raw`\$ENV\s*\{\s*["']?HOME["']?\s*\}`, String.raw`\bDir\.home\b`, String.raw`\bDeno\.env\.get\(\s*["']HOME["']`,
    String.raw`\bglob\(\s*["']~\/?["']\s*\)`, String.raw`\bgetpwuid\b`, String.raw`\bFile::HomeDir\b`, String.raw`\$_SERVER\s*\[\s*["']HOME["']\s*\]`,
  ].join("|"),
);

export interface CodeFinding {
  reason: string;
}

/**
 * Looks for destruction inside interpreter code: shell commands in its strings and argument lists,
 * base64 payloads, and tree-deleting library calls aimed at `/` or a home directory. `judgeShell`
 * applies the shell judgement to each candidate command line.
 */
// Ways code writes or removes a file, and the files whose damage locks everyone out.
const FILE_WRITE = /\b(open\s*\([^)]*["'][wax+]|writeFileSync|writeFile|write_text|write_bytes|truncate|unlink|remove|rmSync|File\.write|IO\.write)|open\s*\(?\s*\w*\s*,?\s*["']?\s*[>+]/;
const CRITICAL_FILE = /["'](\/etc\/(passwd|shadow|group|gshadow|sudoers|fstab)|\/boot\/[^"']*|\/dev\/(sd|nvme|vd|hd|xvd|mmcblk)[^"']*)["']/;
const KILL_ALL = /\bkill\s*\(?\s*(-\s*1\b|['"]?\w+['"]?\s*,\s*-\s*1\b)|\bkillpg\s*\(\s*0\b/;
const FORK_LOOP = /\bfork\b\s*(\(\s*\))?\s*(while|until)\b|\b(while|until|loop)\b[^\n]{0,40}\bfork\s*\(|for\s*\(\s*;\s*;\s*\)[^\n]{0,40}\bfork\b/;

// A tree-deleting call whose first argument is a path in quotes, or the process's own folder.
const TREE_DELETION_OF = /\b(?:rmtree|rmSync|rmdirSync|rm_rf|rm_r|remove_dir_all|remove_tree|RemoveAll|rimraf(?:\.sync|Sync)?|deleteRecursively|FileUtils\.rm_rf|FileUtils\.rm_r|FileUtils\.remove_dir|FileUtils\.remove_entry|Deno\.removeSync|Deno\.remove|fs\.rm|fs\.promises\.rm|fsPromises\.rm|promises\.rm|rm)\s*\(\s*(?:(["'])([^"'\n]*)\1|(os\.getcwd\(\s*\)|process\.cwd\(\s*\)|Dir\.pwd|Path\.cwd\(\s*\)|pathlib\.Path\.cwd\(\s*\)|Deno\.cwd\(\s*\)|getcwd\(\s*\)|(?:pathlib\.)?Path\(\s*["']\.\/?["']\s*\)|os\.curdir|os\.pardir))\s*[,)]/g;

/** The paths tree-deleting calls in code are given directly (`rmtree('.')`, `rmSync(process.cwd(), …)`), relative ones as written. */
export function treeDeletionPaths(code: string): string[] {
  const paths: string[] = [];
  for (const match of code.matchAll(TREE_DELETION_OF)) {
    const named = match[2] ?? match[3] ?? "";
    paths.push(match[2] !== undefined ? named : named === "os.pardir" ? ".." : ".");
  }
  return paths;
}

/**
 * `judgePath` says whether deleting the tree at a path the code names (relative to where it runs)
 * destroys something no one gives back: the workspace, a folder above it.
 */
export function scanCode(code: string, judgeShell: (text: string) => string | null, depth = 0, judgePath?: (path: string) => string | null): CodeFinding | null {
  if (depth > 3) return null;
  code = joinConcatenations(code);
  if (KILL_ALL.test(code)) return { reason: "signals every process (pid -1)" };
  if (FORK_LOOP.test(code)) return { reason: "forks in an endless loop (a fork bomb)" };
  if (CRITICAL_FILE.test(code) && FILE_WRITE.test(code)) return { reason: `writes or removes ${CRITICAL_FILE.exec(code)![1]}` };
  const literals = stringLiterals(code);
  for (const candidate of [...argumentVectors(code), ...literals, code]) {
    const reason = judgeShell(candidate);
    if (reason) return { reason: `its code runs a command that ${reason}` };
  }
  for (const literal of [...literals, ...code.split(/[^A-Za-z0-9+/=_-]+/)]) {
    const decoded = decodedBase64(literal);
    if (decoded) {
      const inner = scanCode(decoded, judgeShell, depth + 1, judgePath);
      if (inner) return { reason: `a base64 payload in it: ${inner.reason}` };
    }
  }
  if (TREE_DELETION.test(code)) {
    const critical = literals.find((literal) => /^(\/+\.?|~\/?|\/(bin|boot|etc|home|lib|lib64|opt|root|sbin|srv|usr|var)\/?)$/.test(literal.trim()));
    if (critical !== undefined || ROOT_OR_HOME.test(code)) return { reason: `deletes ${critical ? `"${critical}"` : "the home directory"} recursively` };
    for (const path of judgePath ? treeDeletionPaths(code) : []) {
      const found = judgePath!(path);
      if (found) return { reason: `deletes ${found} recursively` };
    }
  }
  return null;
}
