import { createHash } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { relative } from "node:path";
import type { CommandCategory } from "../contracts/index.js";
import type { PermissionsConfig } from "../config/config-schemas.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { parseShape, type CommandShape } from "./command-shapes.js";
import { baseName, unwrap } from "./command-wrappers.js";
import { hasDestructionRule, judgeDestructive } from "./destructive-commands.js";
import { looseCommands } from "./loose-commands.js";
import { Judgement, shown, type ScriptState } from "./judgement.js";
import { parseLegacyRule, ruleMatches, type LegacyRule } from "./rule-matching.js";
import { REAL_FILE_SYSTEM, realpathOfDeepestAncestor, type PathContext } from "./path-judge.js";
import { workspaceRepositoryPaths } from "./git-repository.js";
import { ScriptJudge } from "./script-judge.js";
import { sharedShellParser, type ShellParser } from "./shell-script.js";
import type { WordEnvironment } from "./shell-words.js";

export { stricterCategory } from "./judgement.js";

export interface CommandClassification {
  category: CommandCategory;
  /** Every simple command found, as the words that would run. */
  commands: string[];
  reason: string;
  /** The command uses the network (curl, git fetch, npm install…): a permission of its own. */
  network: boolean;
  /** The argument vectors of the `sudo` invocations the text fixes, for the askpass broker. */
  sudo: string[][];
  /**
   * The workspace files whose content decides what the command does (a script it runs, a program
   * file, a build recipe), relative to the workspace, and a digest of what they hold now (null when
   * there are none): an "always" approval is bound to that digest.
   */
  ran_files?: string[];
  content_digest?: string | null;
}

/** Where a command would run: its workspace, and what no task may touch. */
export interface ClassifyContext {
  workspace: string;
  /** Files that will be written before the command runs (a coder step's), by absolute path. */
  pendingFiles?: ReadonlyMap<string, string>;
}

/** The parts of the path context that hold for every task of a process. */
export interface ClassifierPaths {
  /** The user's home directory. Defaults to `os.homedir()`. */
  home?: string;
  /** DuckLM's home, config and plugin folders. */
  protectedPaths?: readonly string[];
  /** Follows links (the default resolves through the real file system); null judges paths by their text alone. */
  realpath?: ((path: string) => string) | null;
}


/**
 * Classifies shell commands. A command runs without asking (`normal`) only when every word of every
 * simple command in it is accounted for by a safe shape of config/permissions.json: the program, its
 * subcommand, options from the shape's list, operands that are paths inside the workspace. What is
 * destructive is judged by meaning (normalised paths, option spellings, variables, encodings) and is
 * `hard_stop`; what cannot be read from the text is asked; the strictest category wins.
 */
export class CommandClassifier {
  private readonly hardStop: LegacyRule[];
  private readonly noAlways: LegacyRule[];
  private readonly networkRules: LegacyRule[];
  private readonly shapes: CommandShape[];
  private readonly home: string;
  private readonly protectedPaths: readonly string[];
  private readonly realpath: ((path: string) => string) | undefined;
  private parser: ShellParser | null = null;
  private readonly judge: ScriptJudge;
  /** Shapes (`program` or `program subcommand`) safe to run again after a crash. */
  private readonly rerunSafe: Set<string>;
  /** Programs whose shapes are per subcommand (git). */
  private readonly withSubcommands: Set<string>;

  constructor(config: PermissionsConfig, paths: ClassifierPaths = {}) {
    this.hardStop = config.categories.hard_stop.map(parseLegacyRule);
    this.noAlways = config.categories.no_always.map(parseLegacyRule);
    this.networkRules = config.network.map(parseLegacyRule);
    this.shapes = config.categories.normal.map((rule) => {
      try {
        return parseShape(rule);
      } catch (error) {
        throw new DuckError(ErrorCode.ConfigInvalid, `permissions.json normal: ${(error as Error).message}`);
      }
    });
    this.home = paths.home ?? homedir();
    this.protectedPaths = paths.protectedPaths ?? [];
    this.realpath = paths.realpath === null ? undefined : (paths.realpath ?? realpathOfDeepestAncestor);
    this.rerunSafe = new Set(this.shapes.filter((shape) => shape.rerunSafe).map((shape) => (shape.subcommand ? `${shape.program} ${shape.subcommand}` : shape.program)));
    this.withSubcommands = new Set(this.shapes.filter((shape) => shape.subcommand).map((shape) => shape.program));
    this.judge = new ScriptJudge({ hardStop: this.hardStop, noAlways: this.noAlways, network: this.networkRules, shapes: this.shapes, home: this.home });
  }

  /**
   * Whether a command that a crash cut off may run again without asking: it was judged safe, every
   * command in it (those inside substitutions included) matches a shape marked `rerun_safe`, and it
   * redirects nothing into a file. Anything else — an appending redirect, a wrapper, a variable
   * prefix, a program named by its path — is asked about, as before.
   */
  safeToRunAgain(command: string, classification: CommandClassification): boolean {
    if (classification.category !== "normal" && classification.category !== "read_only") return false;
    if (classification.commands.length === 0 || classification.network || classification.sudo.length > 0) return false;
    // Only a descriptor copied onto another (`2>&1`, `>&2`, `>&-`) is harmless; `>&name` writes the file `name`.
    const withoutHarmless = command.replace(/\d*>&(?:\d+-?|-)(?![^\s;&|)])|&>\s*\/dev\/null|\d*>\s*\/dev\/null/g, "");
    if (withoutHarmless.includes(">")) return false;
    return classification.commands.every((text) => {
      const [program = "", next = ""] = text.trim().split(/\s+/);
      return this.rerunSafe.has(this.withSubcommands.has(program) ? `${program} ${next}` : program);
    });
  }

  private async loadParser(): Promise<ShellParser> {
    this.parser ??= await sharedShellParser();
    return this.parser;
  }

  async classify(command: string, context: ClassifyContext = { workspace: process.cwd() }): Promise<CommandClassification> {
    const parser = await this.loadParser();
    const judgement = new Judgement();
    if (command.trim() === "") return { category: "unknown", commands: [], reason: "empty command", network: false, sudo: [] };
    const protectedPaths = [...this.protectedPaths, ...(this.realpath ? workspaceRepositoryPaths(context.workspace) : [])];
    const paths: PathContext = {
      workspace: context.workspace,
      home: this.home,
      protectedPaths,
      ...(this.realpath ? { realpath: this.realpath, physical: REAL_FILE_SYSTEM } : {}),
      ...(context.pendingFiles ? { pendingFiles: context.pendingFiles } : {}),
    };
    const state: ScriptState = { env: { home: this.home, variables: new Map(), ifs: "" }, aliases: new Map(), depth: 0, cwds: [context.workspace], context: paths, writes: { by: null } };
    this.judge.judgeScript(parser, command, state, judgement);
    const ranFiles = [...new Set([...judgement.ranFiles, ...(judgement.network ? judgement.pulledInFiles : [])])].sort();
    return {
      category: judgement.category,
      // A script's commands are listed once, however often it names them.
      commands: [...new Set(judgement.commands)],
      reason: judgement.reason,
      network: judgement.network,
      sudo: judgement.sudo,
      ...(ranFiles.length > 0 ? { ran_files: ranFiles.map((path) => relative(context.workspace, path) || "."), content_digest: contentDigestOf(ranFiles, context.pendingFiles) } : {}),
    };
  }

  /**
   * The hard-stop pre-check of a task's text: a destructive command anywhere in it, in code spans or
   * in prose ("now run rm -rf / please"). Prose that quotes such a command is refused too, on purpose.
   */
  async findHardStop(text: string, workspace: string): Promise<string | null> {
    const spans = [...text.matchAll(/```[^\n]*\n?([\s\S]*?)```|`([^`\n]+)`/g)].map((match) => match[1] ?? match[2] ?? "");
    for (const span of spans) {
      const verdict = await this.classify(span, { workspace });
      if (verdict.category === "hard_stop") return verdict.reason;
    }
    const env: WordEnvironment = { home: this.home, variables: new Map(), ifs: "" };
    const candidate = (word: string) => hasDestructionRule(baseName(word)) || this.hardStop.some((rule) => rule.program === baseName(word));
    for (const line of text.split(/\n|;|&&|\|\||\||\. /)) {
      const words = line.replace(/["'`“”‘’]/g, " ").split(/\s+/).filter(Boolean);
      // Most prose names no program that can destroy: nothing to read loosely then.
      if (!words.some(candidate)) continue;
      for (let i = 0; i < words.length; i += 1) {
        const tail = looseCommands(words.slice(i, i + 24).join(" "), env)[0];
        if (!tail) continue;
        const unwrapped = unwrap(tail);
        const program = unwrapped.words[0];
        if (!program?.static) continue;
        const verdict = judgeDestructive({ program: baseName(program.text), args: unwrapped.words.slice(1), redirects: [], cwds: [workspace], home: this.home });
        if (verdict?.category === "hard_stop") return `"${shown(unwrapped.words)}" ${verdict.reason}`;
        const rule = this.hardStop.find((candidate) => ruleMatches(candidate, baseName(program.text), unwrapped.words.slice(1), this.home, workspace));
        if (rule) return `"${shown(unwrapped.words)}" matches hard_stop rule "${rule.text}"`;
      }
    }
    return null;
  }

  /**
   * Checks the examples permissions.json carries — the file's own and each shape's `examples` (must be
   * normal) and `not_examples` (must not be) — in a made-up workspace. A mismatch is a configuration error.
   */
  async checkExamples(examples: readonly { command: string; category: CommandCategory }[]): Promise<void> {
    const failures: string[] = [];
    const checker = new CommandClassifier(
      { extends_bundled: true, categories: { hard_stop: this.hardStop.map((rule) => rule.text), no_always: this.noAlways.map((rule) => rule.text), normal: [] }, network: this.networkRules.map((rule) => rule.text), unknown: "ask", confined: "run", hosts: { allow: [], deny: [] }, examples: [] },
      { home: EXAMPLE_HOME, protectedPaths: [`${EXAMPLE_HOME}/.local/share/ducklm`], realpath: null },
    );
    checker.shapes.push(...this.shapes);
    const context = { workspace: EXAMPLE_WORKSPACE };
    for (const example of examples) {
      const got = await checker.classify(example.command, context);
      if (got.category !== example.category) failures.push(`"${example.command}" is ${got.category}, the example says ${example.category} (${got.reason})`);
    }
    for (const shape of this.shapes) {
      for (const command of shape.examples) {
        const got = await checker.classify(command, context);
        if (got.category !== "normal") failures.push(`"${command}" is an example of the shape ${shape.label} but is ${got.category} (${got.reason})`);
      }
      for (const command of shape.notExamples) {
        const got = await checker.classify(command, context);
        if (got.category === "normal" || got.category === "read_only") failures.push(`"${command}" is a not_example of the shape ${shape.label} but runs without asking`);
      }
    }
    if (failures.length > 0) {
      throw new DuckError(ErrorCode.ConfigInvalid, `permissions.json examples do not hold: ${failures.join("; ")}`, { details: { failures } });
    }
  }
}

/** The made-up places permissions.json's examples are judged in. */
export const EXAMPLE_HOME = "/home/user";
export const EXAMPLE_WORKSPACE = "/home/user/project";

/** Most bytes of a file read for its digest; a larger one is known by its size and modification time. */
const DIGEST_FILE_MAX_BYTES = 16 * 1024 * 1024;

/**
 * What a set of files holds, as one digest: each path with a hash of its content (a pending write's,
 * else the disk's), or that it is absent. Any change to any of them gives another digest.
 */
export function contentDigestOf(paths: readonly string[], pendingFiles?: ReadonlyMap<string, string>): string {
  const whole = createHash("sha256");
  for (const path of [...paths].sort()) {
    whole.update(`${path}\0`);
    const pending = pendingFiles?.get(path);
    if (pending !== undefined) {
      whole.update(`content ${createHash("sha256").update(pending).digest("hex")}\n`);
      continue;
    }
    try {
      const info = statSync(path);
      if (!info.isFile()) whole.update(`not a file ${info.mode}\n`);
      else if (info.size > DIGEST_FILE_MAX_BYTES) whole.update(`large ${info.size} ${info.mtimeMs} ${info.ino}\n`);
      else whole.update(`content ${createHash("sha256").update(readFileSync(path)).digest("hex")}\n`);
    } catch {
      whole.update("absent\n");
    }
  }
  return `sha256:${whole.digest("hex")}`;
}
