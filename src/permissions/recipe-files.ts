import { readdirSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import type { Judgement, ScriptState } from "./judgement.js";
import { noteRanFile, scriptFileText, workspaceFilePath } from "./nested-code.js";
import type { ScriptJudge } from "./script-judge.js";
import type { ShellParser } from "./shell-script.js";
import type { ShellWord } from "./shell-words.js";

// The files a program takes what it runs from, besides those it is handed by name: an approval of the
// command is bound to them (see Judgement.ranFiles), and a package.json script it runs is judged.

const PACKAGE_RUNNERS = new Set(["npm", "pnpm", "yarn", "bun"]);
/** Options of the package runners that name the folder whose package.json is used. */
const PACKAGE_FOLDER_OPTIONS = new Set(["--prefix", "-C", "--dir", "--cwd"]);
/** Other options of theirs that take a value, which is not the subcommand. */
const PACKAGE_VALUE_OPTIONS = new Set(["--loglevel", "--registry", "--workspace", "-w", "--userconfig", "--cache", "--tag", "--filter", "--scope", "--script-shell", "--node-options"]);
/** The scripts of package.json a subcommand runs, before and after its own. */
const LIFECYCLE: Record<string, string[]> = {
  install: ["preinstall", "install", "postinstall", "prepublish", "preprepare", "prepare", "postprepare"],
  ci: ["preinstall", "install", "postinstall", "prepublish", "preprepare", "prepare", "postprepare"],
  test: ["pretest", "test", "posttest"],
  start: ["prestart", "start", "poststart"],
  stop: ["prestop", "stop", "poststop"],
  restart: ["prerestart", "restart", "postrestart"],
  pack: ["prepack", "prepare", "postpack"],
  publish: ["prepublishOnly", "prepack", "prepare", "postpack", "publish", "postpublish"],
};
const ALIASES: Record<string, string> = { i: "install", add: "install", it: "install", "install-test": "install", t: "test", tst: "test", "run-script": "run", rum: "run", urn: "run" };
/** Most files of one folder bound to a command (sibling modules of a program file). */
const MAX_SIBLINGS = 200;
/** Most nested package.json scripts judged: `npm test` running `npm run lint` running … */
const MAX_SCRIPT_DEPTH = 3;

const word = (text: string, like?: ShellWord): ShellWord => ({ text, static: like ? like.static : true, glob: false });
const inFolder = (folder: ShellWord | null, name: string): ShellWord => (folder ? word(`${folder.text.replace(/\/+$/, "")}/${name}`, folder) : word(name));

/** A short option's value inside a cluster (`-kC dir`, `-kCdir`, `-fmk`): the value, or undefined when the cluster has no such letter. */
function clusterValue(args: readonly ShellWord[], index: number, letter: string): ShellWord | undefined {
  const text = args[index]!.text;
  if (!/^-[A-Za-z]/.test(text) || text.startsWith("--")) return undefined;
  const at = text.indexOf(letter, 1);
  if (at === -1) return undefined;
  const rest = text.slice(at + 1);
  return rest ? word(rest, args[index]) : args[index + 1];
}

function optionValue(args: readonly ShellWord[], names: ReadonlySet<string>): ShellWord | null {
  for (let i = 0; i < args.length; i += 1) {
    const text = args[i]!.text;
    const long = [...names].find((name) => name.startsWith("--") && text.startsWith(`${name}=`));
    if (long) return word(text.slice(long.length + 1), args[i]);
    if (names.has(text) && args[i + 1]) return args[i + 1]!;
  }
  return null;
}

/** What a workspace file a command names is on disk, by the script judge's reading; null outside the workspace or DuckLM's own. */
function kindOf(file: ShellWord, state: ScriptState): "file" | "folder" | null {
  const path = workspaceFilePath(file, state);
  if (path === null) return null;
  try {
    const info = statSync(path);
    return info.isFile() ? "file" : info.isDirectory() ? "folder" : null;
  } catch {
    return null;
  }
}

/** Files of one folder with one of these endings, on disk and pending, named relative to the command's directory. */
function siblings(file: ShellWord, endings: RegExp, state: ScriptState): ShellWord[] {
  // Only a folder of the workspace is listed, by the reading that decides what is inside it.
  const path = workspaceFilePath(file, state);
  if (path === null) return [];
  const cwd = state.cwds[0]!;
  const folder = dirname(path);
  let names: string[] = [];
  try {
    names = readdirSync(folder).filter((name) => endings.test(name));
  } catch {
    // A folder that is not there holds nothing to bind.
  }
  for (const pending of state.context.pendingFiles?.keys() ?? []) if (dirname(pending) === folder && endings.test(pending)) names.push(relative(folder, pending));
  return [...new Set(names)].slice(0, MAX_SIBLINGS).map((name) => word(relative(cwd, join(folder, name)) || name, file));
}

/** A package runner: its package.json and .npmrc, and the package.json scripts the subcommand runs, judged as commands. */
function notePackageRunner(judge: ScriptJudge, parser: ShellParser, program: string, args: readonly ShellWord[], state: ScriptState, judgement: Judgement): void {
  const folder = optionValue(args, PACKAGE_FOLDER_OPTIONS);
  const manifest = inFolder(folder, "package.json");
  noteRanFile(manifest, state, judgement);
  noteRanFile(inFolder(folder, ".npmrc"), state, judgement);
  if (state.depth >= MAX_SCRIPT_DEPTH) return;
  const operands = args.filter((arg, index) => !arg.text.startsWith("-") && !(index > 0 && (PACKAGE_FOLDER_OPTIONS.has(args[index - 1]!.text) || PACKAGE_VALUE_OPTIONS.has(args[index - 1]!.text))));
  const first = operands[0]?.text ?? (program === "yarn" ? "install" : "");
  const subcommand = ALIASES[first] ?? first;
  // `yarn build` and `bun build` run the script "build" when there is one.
  const script = subcommand === "run" ? operands[1]?.text : LIFECYCLE[subcommand] ? null : program === "yarn" || program === "pnpm" ? first : null;
  const names = script ? [`pre${script}`, script, `post${script}`] : (LIFECYCLE[subcommand] ?? []);
  if (names.length === 0) return;
  const text = scriptFileText(manifest, state);
  if (text === null) return;
  let scripts: Record<string, unknown>;
  try {
    scripts = ((JSON.parse(text) as { scripts?: Record<string, unknown> }).scripts ?? {}) as Record<string, unknown>;
  } catch {
    judgement.raise("unknown", `${manifest.text} is not valid JSON, so the scripts it would run are not judged`);
    return;
  }
  const cwd = state.cwds[0]!;
  const packageFolder = folder ? (folder.text.startsWith("/") ? folder.text : join(cwd, folder.text)) : cwd;
  for (const name of names) {
    const body = scripts[name];
    if (typeof body !== "string") continue;
    judge.judgeScript(parser, body, { ...state, depth: state.depth + 1, cwds: [packageFolder], writes: { by: null } }, judgement);
  }
}

/**
 * What `npx NAME …`, `bunx`, `npm exec`, `pnpm exec|dlx` and `yarn exec|dlx` run: the name and its
 * arguments, or null for another command.
 */
function execOperands(program: string, args: readonly ShellWord[]): ShellWord[] | null {
  const operands = args.filter((arg, index) => !arg.text.startsWith("-") && !(index > 0 && ["-p", "--package", "-c", "--call"].includes(args[index - 1]!.text)));
  if (program === "npx" || program === "bunx") return operands;
  if (PACKAGE_RUNNERS.has(program) && ["exec", "x", "dlx"].includes(operands[0]?.text ?? "")) return operands.slice(1);
  return null;
}

/**
 * The program a package runner's exec runs: the workspace's `node_modules/.bin/NAME` (its digest is
 * the file the link leads to) with the modules beside it, and the workspace files it is handed.
 */
function noteExecRunner(operands: readonly ShellWord[], state: ScriptState, judgement: Judgement): void {
  const [name, ...rest] = operands;
  if (!name) return;
  if (!name.static) {
    judgement.raise("no_always", `runs a package only known at run time (${name.text})`);
    return;
  }
  const bin = word(`node_modules/.bin/${name.text.replace(/@[^/@]*$/, "").split("/").pop()}`, name);
  noteRanFile(bin, state, judgement);
  for (const sibling of siblings(bin, /\.(c|m)?[jt]s$/, state)) noteRanFile(sibling, state, judgement, true);
  for (const operand of rest) if (kindOf(operand, state) === "file") noteRanFile(operand, state, judgement);
}

/** Most lines of makefiles read, and how deep their includes are followed. */
const MAX_MAKEFILE_LINES = 2000;
const MAX_INCLUDE_DEPTH = 3;

/**
 * A makefile's recipes, judged as the commands they are (make's own variables standing as plain
 * words; `$(shell …)` asked every time), and the files it includes, bound and read in turn.
 */
function judgeMakefile(judge: ScriptJudge, parser: ShellParser, file: ShellWord, makeDir: string, state: ScriptState, judgement: Judgement, depth: number): void {
  const text = scriptFileText(file, state);
  if (text === null) return;
  const inDir: ScriptState = { ...state, depth: state.depth + 1, cwds: [makeDir], writes: { by: null } };
  const lines = text.replace(/\\\n/g, " ").split("\n").slice(0, MAX_MAKEFILE_LINES);
  if (/\$[({]shell\b/.test(text)) judgement.raise("no_always", `${file.text} runs $(shell …) commands, which are not judged`);
  for (const line of lines) {
    const include = /^\s*-?s?include\s+(.+)$/.exec(line);
    if (include) {
      for (const name of include[1]!.trim().split(/\s+/)) {
        if (/[$*?[]/.test(name)) {
          judgement.raise("no_always", `${file.text} includes ${name}, which is only known when make runs`);
          continue;
        }
        const included = word(name.startsWith("/") ? name : relative(state.cwds[0]!, join(makeDir, name)) || name);
        noteRanFile(included, state, judgement);
        if (depth < MAX_INCLUDE_DEPTH) judgeMakefile(judge, parser, included, makeDir, state, judgement, depth + 1);
      }
      continue;
    }
    if (!line.startsWith("\t")) continue;
    // A recipe line: make's prefixes off, its variables as plain words, `$$` the shell's own `$`.
    const command = line.slice(1).replace(/^[@+-]+/, "").split("$$").map((part) => part.replace(/\$[({][^)}]*[)}]|\$[A-Za-z@<^+?*%]/g, "MAKEVAR")).join("$");
    if (command.trim()) judge.judgeScript(parser, command, inDir, judgement);
  }
}

const PYTHON_CONFIG = ["conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "setup.py", "tox.ini"];
const MAKE_NAMES = ["GNUmakefile", "makefile", "Makefile"];

/**
 * Notes the files a program takes what it runs from — a package runner's package.json (its scripts
 * judged too), a makefile, pytest's configuration and the modules beside it, the modules beside a
 * program file — and, for programs that send files to the network, the files they send or obey.
 */
export function noteRecipes(judge: ScriptJudge, parser: ShellParser, program: string, args: readonly ShellWord[], state: ScriptState, judgement: Judgement): void {
  const exec = execOperands(program, args);
  if (exec) {
    noteExecRunner(exec, state, judgement);
    if (!PACKAGE_RUNNERS.has(program)) return;
  }
  if (PACKAGE_RUNNERS.has(program)) {
    // In each directory the command may run in (after a cd, the package there).
    if (state.cwds.some((cwd) => cwd === null)) noteRanFile(word("package.json"), state, judgement);
    else for (const cwd of new Set(state.cwds as string[])) notePackageRunner(judge, parser, program, args, { ...state, cwds: [cwd] }, judgement);
    return;
  }
  if (program === "make" || program === "gmake") {
    let folder: ShellWord | null = null;
    const named: ShellWord[] = [];
    args.forEach((arg, index) => {
      const text = arg.text;
      if (text === "-C" || text === "--directory") folder = args[index + 1] ?? null;
      else if (text.startsWith("--directory=")) folder = word(text.slice(12), arg);
      else if (text === "-f" || text === "--file" || text === "--makefile") {
        if (args[index + 1]) named.push(args[index + 1]!);
      } else if (/^--(file|makefile)=/.test(text)) named.push(word(text.slice(text.indexOf("=") + 1), arg));
      else {
        folder = clusterValue(args, index, "C") ?? folder;
        const file = clusterValue(args, index, "f");
        if (file) named.push(file);
      }
    });
    const place = folder as ShellWord | null;
    const makefiles = (named.length > 0 ? named : MAKE_NAMES.map((name) => word(name))).map((file) => (file.text.startsWith("/") || !place ? file : inFolder(place, file.text)));
    for (const file of makefiles) noteRanFile(file, state, judgement);
    if (state.depth < MAX_SCRIPT_DEPTH && !state.cwds.some((cwd) => cwd === null)) {
      for (const cwd of new Set(state.cwds as string[])) {
        const here = { ...state, cwds: [cwd] };
        const first = makefiles.find((file) => scriptFileText(file, here) !== null);
        if (first) judgeMakefile(judge, parser, first, place ? (place.text.startsWith("/") ? place.text : join(cwd, place.text)) : cwd, here, judgement, 0);
      }
    }
    return;
  }
  if (program === "pytest" || program === "py.test") {
    for (const name of PYTHON_CONFIG) noteRanFile(word(name), state, judgement, true);
    for (const module of siblings(word("conftest.py"), /\.py$/, state)) noteRanFile(module, state, judgement, true);
    return;
  }
  const sends = SENT_OR_OBEYED[program];
  if (sends) for (const file of namedBy(args, sends)) noteRanFile(file, state, judgement);
}

/** A program file's modules beside it (`python3 t.py` imports m.py; `node t.js` requires ./m.js), and `python3 -m`'s. */
export function noteProgramModules(program: string, file: ShellWord | undefined, module: ShellWord | undefined, preloads: readonly ShellWord[], state: ScriptState, judgement: Judgement): void {
  const python = program.startsWith("python");
  const endings = python ? /\.py$/ : /\.(c|m)?[jt]s$/;
  for (const preload of preloads) noteRanFile(preload, state, judgement);
  if (file && kindOf(file, state) === "folder") {
    // `node .` runs the folder's package.json "main", else its index file.
    for (const name of ["package.json", "index.js", "index.mjs", "index.cjs", "__main__.py"]) noteRanFile(inFolder(file, name), state, judgement);
    for (const sibling of siblings(inFolder(file, "index.js"), endings, state)) noteRanFile(sibling, state, judgement, true);
  } else if (file) for (const sibling of siblings(file, endings, state)) noteRanFile(sibling, state, judgement, true);
  if (python && module) {
    // `python3 -m pkg` runs pkg/__main__.py or pkg.py, from the directory it starts in; pytest reads its configuration there.
    const path = module.text.replace(/\./g, "/");
    for (const name of [`${path}.py`, `${path}/__init__.py`, `${path}/__main__.py`]) noteRanFile(word(name, module), state, judgement);
    for (const name of PYTHON_CONFIG) noteRanFile(word(name), state, judgement, true);
    for (const sibling of siblings(word("conftest.py"), /\.py$/, state)) noteRanFile(sibling, state, judgement, true);
  }
}

/** For programs that may send files out or take their orders from one: the options whose value is such a file. */
const SENT_OR_OBEYED: Record<string, { options: string[]; atValue?: string[] }> = {
  curl: { options: ["-K", "--config", "-T", "--upload-file"], atValue: ["-d", "--data", "--data-binary", "--data-raw", "--data-urlencode", "-F", "--form", "--json"] },
  wget: { options: ["-i", "--input-file", "--post-file", "--body-file", "-e", "--execute", "--config"] },
  pip: { options: ["-r", "--requirement", "-c", "--constraint", "-e", "--editable"] },
  pip3: { options: ["-r", "--requirement", "-c", "--constraint", "-e", "--editable"] },
  sed: { options: ["-f", "--file"] },
};

function namedBy(args: readonly ShellWord[], spec: { options: string[]; atValue?: string[] }): ShellWord[] {
  const files: ShellWord[] = [];
  args.forEach((arg, index) => {
    const text = arg.text;
    const value = (names: string[]) => {
      const long = names.find((name) => name.startsWith("--") && text.startsWith(`${name}=`));
      if (long) return word(text.slice(long.length + 1), arg);
      return names.includes(text) ? args[index + 1] : undefined;
    };
    const given = value(spec.options);
    if (given) {
      // `pip install -e .` builds the folder: its build files say what runs.
      if (given.text === "." || given.text.endsWith("/")) for (const name of ["pyproject.toml", "setup.py", "setup.cfg"]) files.push(inFolder(given.text === "." ? null : given, name));
      else files.push(given);
    }
    const data = spec.atValue ? value(spec.atValue) : undefined;
    const at = data?.text.match(/^(?:[^=@]*=)?[@<](.+)$/);
    if (data && at) files.push(word(at[1]!, data));
  });
  return files;
}
