import { WorkspaceCheckpoints } from "../undo/workspace-checkpoints.js";
import { accessSync, closeSync, constants, openSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { connectIntegrations } from "../integrations/connect-integrations.js";
import type { DuckConfig } from "../config/config-schemas.js";
import { loadConfig, resolveConfigDir, resolveHomeDir } from "../config/load-config.js";
import { modelsDirectory } from "../models/create-model-provider.js";
import { resolveRolesChecked } from "../models/model-roles.js";
import { CommandClassifier } from "../permissions/command-classifier.js";
import { pluginFolders, sandboxOptionsFor, BUILTIN_TOOL_NAMES, resolveWorkspace } from "../runtime/create-runtime.js";
import { sortEnvironment } from "../tools/command-environment.js";
import { postgresUrlOf } from "../runtime/postgres-url.js";
import { inspectPostgres } from "../storage/postgres/open-postgres.js";
import { ensurePrivateDir } from "../storage/private-files.js";
import { createLogger } from "../runtime/logger.js";
import { checkDatabaseIntegrity } from "../storage/database-check.js";
import { loadPlugins } from "../tools/plugin-loader.js";
import { chooseShellSandbox } from "../tools/shell-sandbox.js";
import type { GlobalOptions } from "./with-ducklm.js";

type Level = "ok" | "warn" | "fail";

/** `ducklm doctor`: checks what DuckLM needs on this machine and says what to do about each gap. */
export async function doctorCommand(globals: GlobalOptions): Promise<number> {
  const lines: Array<[Level, string, string]> = [];
  const check = async (name: string, run: () => Promise<[Level, string]> | [Level, string]) => {
    try {
      const [level, detail] = await run();
      lines.push([level, name, detail]);
    } catch (error) {
      lines.push(["fail", name, error instanceof Error ? error.message : String(error)]);
    }
  };
  const [major = 0, minor = 0] = process.versions.node.split(".").map(Number);
  await check("node", () => (major > 20 || (major === 20 && minor >= 19) ? ["ok", process.version] : ["fail", `${process.version}; DuckLM needs 20.19 or newer`]));
  const home = resolveHomeDir(globals.home);
  const configDir = resolveConfigDir(globals.config);
  // A config that does not load is this report's first finding, not the end of it.
  let loaded: DuckConfig | null = null;
  await check("config", () => {
    loaded = loadConfig(configDir);
    if (!(loaded as DuckConfig).permissions.extends_bundled) {
      return ["warn", `${configDir}: your permissions.json stands alone ("extends_bundled": false), so the bundled hard stops and always-asked commands are in force only where it repeats them`];
    }
    return ["ok", `${configDir} (each file laid over the bundled one of its name)`];
  });
  let homeUsable = false;
  await check("data directory", () => {
    ensurePrivateDir(home);
    try {
      accessSync(home, constants.W_OK);
    } catch {
      return ["fail", `${home} cannot be written by this user: choose another home with --home or DUCKLM_HOME`];
    }
    // Write access is not the whole story (a folder of /proc says yes and takes no file): one is made and removed.
    const probe = join(home, `.doctor-${process.pid}`);
    try {
      closeSync(openSync(probe, "wx", 0o600));
      rmSync(probe);
    } catch {
      return ["fail", `${home} takes no new files: choose another home with --home or DUCKLM_HOME`];
    }
    homeUsable = true;
    const mode = statSync(home).mode & 0o777;
    return mode & 0o077 ? ["warn", `${home} is readable by other users (mode ${mode.toString(8)}); chmod 700 it`] : ["ok", `${home} (private, mode 700)`];
  });
  const config = loaded as DuckConfig | null;
  if (config === null) {
    lines.push(["fail", "the other checks", "skipped until the config loads: fix the file named above (`ducklm config path` lists the files in force)"]);
    return report(lines);
  }
  await check("database", () => {
    if (config.runtime.storage.backend === "postgres") {
      const found = inspectPostgres(postgresUrlOf(config, process.env));
      const where = `PostgreSQL ${found.serverVersion} at ${found.location}`;
      if (found.schemaVersion === 0) return ["warn", `${where}: no DuckLM tables yet; the first \`ducklm serve\` or \`ducklm run\` creates them`];
      if (found.schemaVersion > found.newestVersion) return ["fail", `${where}: schema version ${found.schemaVersion} is newer than this DuckLM knows (${found.newestVersion}); upgrade DuckLM`];
      return [found.schemaVersion === found.newestVersion ? "ok" : "warn", `${where}, schema version ${found.schemaVersion} of ${found.newestVersion}${found.schemaVersion < found.newestVersion ? " (brought up to date at the next start)" : ""}`];
    }
    if (!homeUsable) return ["fail", "not checked: the database lives in the data directory above, which cannot be used"];
    const integrity = checkDatabaseIntegrity(join(home, "ducklm.sqlite3"), { synchronous: config.runtime.storage.synchronous });
    return integrity === "ok" ? ["ok", `integrity ok, synchronous=${config.runtime.storage.synchronous}`] : ["fail", `integrity_check: ${integrity}`];
  });
  await check("shell parser and permission examples", async () => {
    await new CommandClassifier(config.permissions).checkExamples(config.permissions.examples);
    return ["ok", `tree-sitter-bash loaded; ${config.permissions.examples.length} examples hold`];
  });
  await check("shell confinement", () => {
    const { sandbox, warning } = chooseShellSandbox(config.runtime.sandbox.mode, sandboxOptionsFor(config, home));
    return warning ? ["warn", warning] : ["ok", sandbox.note];
  });
  await check("undo (workspace checkpoints)", () => {
    const undo = config.runtime.undo;
    if (!undo.enabled) return ["warn", "off (runtime.json undo.enabled): steps cannot be undone"];
    const why = new WorkspaceCheckpoints(home, { maxFileBytes: undo.max_file_bytes }).unavailable();
    if (why) return ["warn", `steps cannot be undone: ${why}`];
    return ["ok", `a snapshot before each step that changes the workspace, in ${join(home, "checkpoints")}; files over ${undo.max_file_bytes} bytes left out; kept ${undo.keep_days} days`];
  });
  await check("command environment", () => {
    const { environment } = sandboxOptionsFor(config, home);
    const { passed, withheld } = sortEnvironment(process.env, environment);
    return ["ok", `commands get ${passed.join(", ") || "nothing"} of this environment (and git's safe.bareRepository); ${withheld.length} other variable(s) never reach them (runtime.json sandbox.environment adds names)`];
  });
  await check("models", async () => {
    const roles = [...(await resolveRolesChecked(config.models, modelsDirectory(home))).values()];
    const served = roles.filter((role) => role.role !== "embeddings" && role.servedBy);
    const broken = roles.filter((role) => role.problem).map((role) => `${role.role}: ${role.path} ${role.problem}`);
    if (served.length === 0) return ["warn", `no chat model present: IntentParser mode (\`ducklm setup\` downloads the starter models; \`ducklm models list\` says what is missing)${broken.length > 0 ? `; ${broken.join("; ")}` : ""}`];
    const missing = roles.filter((role) => role.config && !role.present && !role.problem).map((role) => role.role);
    const notes = [...(missing.length > 0 ? [`missing files for ${missing.join(", ")}`] : []), ...broken];
    return [notes.length > 0 ? "warn" : "ok", `${served.length} role(s) served${notes.length > 0 ? `; ${notes.join("; ")}` : ""}`];
  });
  await check("plugins", async () => {
    const loaded = await loadPlugins(pluginFolders(config.dir, home), createLogger(), BUILTIN_TOOL_NAMES);
    if (loaded.failures.length > 0) return ["warn", loaded.failures.map((failure) => `${failure.file}: ${failure.reason}`).join("; ")];
    return ["ok", `${loaded.tools.length} plugin tool(s)`];
  });
  await check("integrations (MCP, web)", async () => {
    const connected = await connectIntegrations(config.integrations, { workspace: resolveWorkspace(config, globals.workspace), home, logger: createLogger() });
    await connected.close();
    const names = connected.tools.map((tool) => tool.name);
    const summary = `${names.length} tool(s)${names.length > 0 ? `: ${names.slice(0, 8).join(", ")}${names.length > 8 ? ", …" : ""}` : ""}`;
    if (connected.failures.length > 0) return ["warn", `${summary}; ${connected.failures.map((failure) => `${failure.what}: ${failure.reason}`).join("; ")}`];
    return ["ok", summary];
  });
  return report(lines);
}

function report(lines: Array<[Level, string, string]>): number {
  for (const [level, name, detail] of lines) console.log(`${level === "ok" ? "ok  " : level === "warn" ? "warn" : "FAIL"}  ${name.padEnd(38)} ${detail}`);
  return lines.some(([level]) => level === "fail") ? 1 : 0;
}
