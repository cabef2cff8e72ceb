import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Command } from "commander";
import { DuckError, ErrorCode } from "../../errors/duck-error.js";
import { urlForDisplay } from "../../utils/url-for-display.js";
import { runPlain, type GlobalOptions } from "../with-ducklm.js";

const FILES = ["models", "runtime", "permissions", "integrations"] as const;
type ConfigFile = (typeof FILES)[number];

// Values under these keys may be credentials a person typed into a file (a header's bearer token).
const SECRET_KEY = /authorization|token|secret|pass|api[-_]?key|_key$|-key$|^key$|cookie|session|credential/i;
// `${NAME}` is a reference to an environment variable, safe to show.
const ENV_REFERENCE = /^\$\{[A-Za-z_][A-Za-z0-9_]*\}$/;

/** A config value as it may be printed: credentials a file holds are masked, names of variables are not. */
export function masked(value: unknown, key = "", parent = ""): unknown {
  if (Array.isArray(value)) return value.map((item) => masked(item, key, parent));
  if (value && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([inner, item]) => [inner, masked(item, inner, key)]));
  // `api_key_env` and `token_env` name a variable; their values are not secrets. A server's
  // environment is where keys usually go, whatever they are called: only references show.
  const secret = SECRET_KEY.test(key) || parent === "env";
  if (typeof value === "string" && secret && !key.endsWith("_env") && !ENV_REFERENCE.test(value)) return "(hidden)";
  // A URL can carry a password or a key in its query.
  if (typeof value === "string" && /^https?:\/\//.test(value)) return urlForDisplay(value);
  return value;
}

/** `ducklm config path` and `ducklm config show`: which files are in force, and what they say. */
export function registerConfig(program: Command): void {
  const globals = () => program.opts<GlobalOptions>();
  const config = program.command("config").description("where DuckLM's config and data live, and the settings in force");
  config
    .command("path")
    .description("print the config folder, the data folder, and which file each setting comes from")
    .action(async () =>
      runPlain(async () => {
        const { BUNDLED_CONFIG_DIR, loadConfig, resolveConfigDir, resolveHomeDir } = await import("../../config/load-config.js");
        const { PROMPT_NAMES } = await import("../../config/config-schemas.js");
        const dir = resolveConfigDir(globals().config);
        console.log(`config   ${dir}  (your files, each laid over the bundled file of its name)`);
        console.log(`defaults ${BUNDLED_CONFIG_DIR}`);
        console.log(`data     ${resolveHomeDir(globals().home)}  (database, logs, models, login token)`);
        // The folders and files are worth knowing most when a file in them is broken: listed first, then checked.
        const names = [...FILES.map((name) => `${name}.json`), ...PROMPT_NAMES.map((name) => `prompts/${name}.md`)];
        const width = Math.max(...names.map((name) => name.length));
        const ownDir = resolve(dir) === BUNDLED_CONFIG_DIR ? null : dir;
        console.log("in force:");
        for (const name of names) {
          const own = ownDir !== null && existsSync(join(ownDir, name));
          const bundled = existsSync(join(BUNDLED_CONFIG_DIR, name));
          const where = own ? `${join(ownDir, name)}${bundled && name.endsWith(".json") ? "  (over the default)" : ""}` : bundled ? `${join(BUNDLED_CONFIG_DIR, name)}  (default)` : "(no file: built-in defaults)";
          console.log(`  ${name.padEnd(width)}  ${where}`);
        }
        loadConfig(dir);
        return 0;
      }),
    );
  config
    .command("show")
    .description("print the settings in force (after defaults are filled in), as JSON")
    .argument("[file]", `one of ${FILES.join(", ")}; all of them when left out`)
    .action(async (file: string | undefined) =>
      runPlain(async () => {
        if (file !== undefined && !FILES.includes(file.replace(/\.json$/, "") as ConfigFile)) {
          throw new DuckError(ErrorCode.InvalidInput, `no config file "${file}": choose one of ${FILES.join(", ")}`);
        }
        const { loadConfig, resolveConfigDir } = await import("../../config/load-config.js");
        const loaded = loadConfig(resolveConfigDir(globals().config));
        const chosen = file === undefined ? FILES : [file.replace(/\.json$/, "") as ConfigFile];
        const shown = Object.fromEntries(chosen.map((name) => [name, masked(loaded[name])]));
        console.log(JSON.stringify(chosen.length === 1 ? shown[chosen[0]!] : shown, null, 2));
        return 0;
      }),
    );
}
