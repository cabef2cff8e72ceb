import { existsSync, readFileSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { z } from "zod";
import { overlayConfig, protoKeyIn } from "./config-overlay.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import {
  IntegrationsConfigSchema,
  ModelsConfigSchema,
  PermissionsConfigSchema,
  PROMPT_NAMES,
  RuntimeConfigSchema,
  type DuckConfig,
  type Prompts,
} from "./config-schemas.js";

/** The config folder shipped with DuckLM: the defaults under every user's own config. */
export const BUNDLED_CONFIG_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "../../config");

function xdgDir(env: NodeJS.ProcessEnv, variable: "XDG_DATA_HOME" | "XDG_CONFIG_HOME", fallback: string[]): string {
  const given = env[variable];
  // The XDG spec ignores relative values.
  return given && isAbsolute(given) ? given : join(env.HOME || homedir(), ...fallback);
}

/**
 * The user's config folder: `--config`, else DUCKLM_CONFIG, else `$XDG_CONFIG_HOME/ducklm`
 * (`~/.config/ducklm`). Files missing there come from the bundled config; nothing is read from the
 * directory DuckLM happens to start in.
 */
export function resolveConfigDir(explicit?: string, env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): string {
  if (explicit === "") throw new DuckError(ErrorCode.InvalidInput, "--config is empty: give your config folder, or leave --config out");
  if (explicit) return namedConfigDir(resolve(cwd, explicit), "--config", env);
  if (env.DUCKLM_CONFIG) return namedConfigDir(resolve(cwd, env.DUCKLM_CONFIG), "DUCKLM_CONFIG", env);
  return join(xdgDir(env, "XDG_CONFIG_HOME", [".config"]), "ducklm");
}

/**
 * A config folder someone named must be there: a mistyped one would otherwise run on the bundled
 * defaults, silently without the user's permissions and models. (The default folder may be missing.)
 */
function namedConfigDir(dir: string, namedBy: string, env: NodeJS.ProcessEnv): string {
  const found = statSync(dir, { throwIfNoEntry: false });
  if (found?.isDirectory()) return dir;
  throw new DuckError(
    ErrorCode.InvalidInput,
    `${namedBy} names ${dir}, which ${found ? "is not a folder" : "does not exist"}: give the folder your config files are in (create it first for a new one), or leave ${namedBy} out to use ${join(xdgDir(env, "XDG_CONFIG_HOME", [".config"]), "ducklm")}`,
    { details: { config_dir: dir } },
  );
}

/**
 * The data directory (database, token, logs, models): `--home`, else DUCKLM_HOME, else
 * `$XDG_DATA_HOME/ducklm` (`~/.local/share/ducklm`) — never inside a workspace by default.
 */
export function resolveHomeDir(explicit?: string, env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): string {
  if (explicit === "") throw new DuckError(ErrorCode.InvalidInput, "--home is empty: give the folder DuckLM keeps its data in, or leave --home out");
  if (explicit) return resolve(cwd, explicit);
  if (env.DUCKLM_HOME) return resolve(cwd, env.DUCKLM_HOME);
  return join(xdgDir(env, "XDG_DATA_HOME", [".local", "share"]), "ducklm");
}

function describeIssuePath(path: ReadonlyArray<PropertyKey>): string {
  return path.length === 0 ? "(top level)" : path.map(String).join(".");
}

/** A config file's text, or an error that names the file and what is wrong with it (a folder, unreadable). */
function readConfigText(file: string): string {
  try {
    // A byte-order mark (some editors save one) is not part of the text.
    return readFileSync(file, "utf8").replace(/^\uFEFF/, "");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === "EISDIR" ? "is a folder, not a file" : code === "EACCES" ? "cannot be read (permission denied)" : `cannot be read (${(error as Error).message})`;
    throw new DuckError(ErrorCode.ConfigInvalid, `${file} ${why}`, { details: { file }, cause: error });
  }
}

/** Where a JSON.parse error is, as a line and column of the text (its message gives a character position). */
function jsonErrorPlace(text: string, message: string): string {
  const position = /at position (\d+)/.exec(message);
  if (!position) return "";
  const before = text.slice(0, Number(position[1]));
  const line = before.split("\n").length;
  return `, line ${line} column ${before.length - before.lastIndexOf("\n")}`;
}

function readJsonText(file: string): unknown {
  const text = readConfigText(file);
  try {
    return JSON.parse(text);
  } catch (error) {
    const message = (error as Error).message;
    throw new DuckError(ErrorCode.ConfigInvalid, `${file}: not valid JSON (${message}${jsonErrorPlace(text, message)})`, {
      details: { file },
      cause: error,
    });
  }
}

/**
 * The settings of `name`: the user's file laid over the bundled one (see config-overlay.ts), either
 * alone where the other is missing, or the schema's defaults where both are. Errors name the user's
 * file, which is where a setting that does not validate comes from.
 */
function readJsonFile<S extends z.ZodType>(name: string, own: string, bundled: string | null, schema: S): z.infer<S> {
  const ownRaw = existsSync(own) ? readJsonText(own) : undefined;
  const proto = protoKeyIn(ownRaw);
  if (proto) throw new DuckError(ErrorCode.ConfigInvalid, `${own}: ${proto}: "__proto__" is not a setting`, { details: { file: own } });
  const bundledRaw = bundled !== null && existsSync(bundled) ? readJsonText(bundled) : undefined;
  // A missing file means "all defaults"; only a present but broken file stops start-up.
  const raw = ownRaw === undefined ? (bundledRaw ?? {}) : bundledRaw === undefined ? ownRaw : overlayConfig(name, bundledRaw, ownRaw);
  const file = ownRaw !== undefined ? own : (bundled ?? own);
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((issue) => `${describeIssuePath(issue.path)}: ${issue.message}`);
    throw new DuckError(ErrorCode.ConfigInvalid, `${file}: ${issues.join("; ")}`, {
      details: { file, issues: parsed.error.issues.map((issue) => ({ field: describeIssuePath(issue.path), expected: issue.message })) },
    });
  }
  return parsed.data;
}

/** The file to read: the user's own if it exists, else the bundled default. */
function layered(dir: string, fallback: string | null, name: string): string {
  const own = join(dir, name);
  if (existsSync(own) || !fallback) return own;
  return join(fallback, name);
}

function readPrompts(dir: string, fallback: string | null, sources: Record<string, string>): Prompts {
  const prompts = {} as Prompts;
  for (const name of PROMPT_NAMES) {
    const file = layered(dir, fallback, join("prompts", `${name}.md`));
    if (!existsSync(file)) {
      throw new DuckError(ErrorCode.ConfigMissing, `${file}: prompt file missing (every role needs prompts/${name}.md)`, {
        details: { file },
      });
    }
    sources[`prompts/${name}.md`] = file;
    prompts[name] = readConfigText(file).trim();
  }
  return prompts;
}

export interface LoadConfigOptions {
  /** Where files the folder lacks come from. Defaults to the bundled config; null requires every file. */
  fallback?: string | null;
}

/**
 * Reads and validates config/*.json and prompts/*.md from the user's folder, each file that is not
 * there from the bundled defaults. Throws DuckError naming the file and field.
 */
export function loadConfig(dir: string, options: LoadConfigOptions = {}): DuckConfig {
  const fallback = options.fallback === undefined ? (resolve(dir) === BUNDLED_CONFIG_DIR ? null : BUNDLED_CONFIG_DIR) : options.fallback;
  if (!fallback && !existsSync(dir)) {
    throw new DuckError(ErrorCode.ConfigMissing, `${dir}: config directory not found`, { details: { file: dir } });
  }
  const sources: Record<string, string> = {};
  const json = <S extends z.ZodType>(name: string, schema: S): z.infer<S> => {
    const own = join(dir, name);
    const bundled = fallback === null ? null : join(fallback, name);
    const file = layered(dir, fallback, name);
    if (existsSync(file)) sources[name] = file;
    return readJsonFile(name, own, bundled, schema);
  };
  return {
    dir,
    sources,
    models: json("models.json", ModelsConfigSchema),
    runtime: json("runtime.json", RuntimeConfigSchema),
    permissions: json("permissions.json", PermissionsConfigSchema),
    integrations: json("integrations.json", IntegrationsConfigSchema),
    prompts: readPrompts(dir, fallback, sources),
  };
}
