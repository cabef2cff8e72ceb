import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { z } from "zod";
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

/** The config folder shipped with DuckLM, used when neither a flag, DUCKLM_CONFIG nor ./config names one. */
export const BUNDLED_CONFIG_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "../../config");

export function resolveConfigDir(explicit?: string, env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): string {
  if (explicit) return resolve(cwd, explicit);
  if (env.DUCKLM_CONFIG) return resolve(cwd, env.DUCKLM_CONFIG);
  const local = join(cwd, "config");
  if (existsSync(join(local, "runtime.json"))) return local;
  return BUNDLED_CONFIG_DIR;
}

/** The data directory: DUCKLM_HOME, else ./data. */
export function resolveHomeDir(explicit?: string, env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): string {
  if (explicit) return resolve(cwd, explicit);
  if (env.DUCKLM_HOME) return resolve(cwd, env.DUCKLM_HOME);
  return resolve(cwd, "data");
}

function describeIssuePath(path: ReadonlyArray<PropertyKey>): string {
  return path.length === 0 ? "(top level)" : path.map(String).join(".");
}

function readJsonFile<S extends z.ZodType>(file: string, schema: S): z.infer<S> {
  if (!existsSync(file)) {
    // A missing file means "all defaults"; only a present but broken file stops start-up.
    return schema.parse({});
  }
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    throw new DuckError(ErrorCode.ConfigInvalid, `${file}: not valid JSON (${(error as Error).message})`, {
      details: { file },
      cause: error,
    });
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((issue) => `${describeIssuePath(issue.path)}: ${issue.message}`);
    throw new DuckError(ErrorCode.ConfigInvalid, `${file}: ${issues.join("; ")}`, {
      details: { file, issues: parsed.error.issues.map((issue) => ({ field: describeIssuePath(issue.path), expected: issue.message })) },
    });
  }
  return parsed.data;
}

function readPrompts(dir: string): Prompts {
  const prompts = {} as Prompts;
  for (const name of PROMPT_NAMES) {
    const file = join(dir, "prompts", `${name}.md`);
    if (!existsSync(file)) {
      throw new DuckError(ErrorCode.ConfigMissing, `${file}: prompt file missing (every role needs config/prompts/${name}.md)`, {
        details: { file },
      });
    }
    prompts[name] = readFileSync(file, "utf8").trim();
  }
  return prompts;
}

/** Reads and validates config/*.json and config/prompts/*.md. Throws DuckError naming the file and field. */
export function loadConfig(dir: string): DuckConfig {
  if (!existsSync(dir)) {
    throw new DuckError(ErrorCode.ConfigMissing, `${dir}: config directory not found`, { details: { file: dir } });
  }
  return {
    dir,
    models: readJsonFile(join(dir, "models.json"), ModelsConfigSchema),
    runtime: readJsonFile(join(dir, "runtime.json"), RuntimeConfigSchema),
    permissions: readJsonFile(join(dir, "permissions.json"), PermissionsConfigSchema),
    integrations: readJsonFile(join(dir, "integrations.json"), IntegrationsConfigSchema),
    prompts: readPrompts(dir),
  };
}
