import { statSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";
import { loadConfig, resolveConfigDir, resolveHomeDir } from "../config/load-config.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { ensurePrivateDir } from "../storage/private-files.js";
import type { ModelProvider } from "../models/model-provider.js";
import { loadPlugins } from "../tools/plugin-loader.js";
import type { AnyToolDefinition } from "../tools/tool-definition.js";
import { BUILTIN_TOOL_NAMES, createRuntime, pluginFolders, programPaths, protectedPathsFor, resolveWorkspace } from "./create-runtime.js";
import { workspaceRefusal } from "./workspace-refusal.js";
import { ducklmOf, type DuckLM } from "./ducklm.js";
import { createLogger } from "./logger.js";

export interface CreateDuckLMOptions {
  /** Data folder. Defaults to DUCKLM_HOME, else `$XDG_DATA_HOME/ducklm` (`~/.local/share/ducklm`). */
  home?: string;
  /** Your config folder, over the bundled defaults. Defaults to DUCKLM_CONFIG, else `~/.config/ducklm`. */
  config?: string;
  /** Where tasks work. Defaults to runtime.json's `workspace`, from the current directory. */
  workspace?: string;
  /**
   * The models: `true` loads what config/models.json names (llama.cpp files, model servers), `false`
   * runs without any (IntentParser mode), or a provider of your own. Defaults to `true`.
   */
  models?: boolean | ModelProvider;
  /** Connect the MCP servers and web tools of integrations.json. Defaults to `true`. */
  integrations?: boolean;
  /**
   * Check at start that permissions.json's examples classify as they say (see `createRuntime`).
   * Defaults to `true`; a tool that only reads what is stored can leave it to the processes that run tasks.
   */
  checkPermissions?: boolean;
  /** Tools of your own, next to the built-in ones and the plugins. */
  tools?: AnyToolDefinition[];
  /** Defaults to a pino logger writing `<home>/logs/ducklm.log`. */
  logger?: Logger;
  /** Told about what was left out (a broken plugin, an MCP server that did not start). Defaults to the log. */
  onWarning?: (message: string) => void;
}

/**
 * Opens DuckLM the way its command line does: config, models, plugins and integrations wired by the
 * composition root, checks done. Call `start()` before driving tasks (retention, resuming what an
 * earlier process left), and `close()` at the end.
 */
export async function createDuckLM(options: CreateDuckLMOptions = {}): Promise<DuckLM> {
  const home = resolveHomeDir(options.home);
  const config = loadConfig(resolveConfigDir(options.config));
  // Refused before anything is opened: a wrong folder must not first resume what other runs left.
  const workspace = resolveWorkspace(config, options.workspace);
  if (!statSync(workspace, { throwIfNoEntry: false })?.isDirectory()) {
    throw new DuckError(ErrorCode.InvalidInput, `workspace ${workspace} is not a directory: give a folder that exists (--workspace, or runtime.json's workspace)`);
  }
  const refusal = workspaceRefusal(workspace, protectedPathsFor(home, resolveConfigDir(options.config)), programPaths());
  if (refusal) throw new DuckError(ErrorCode.InvalidInput, refusal);
  // The home itself is named when it cannot be used, not the first folder made in it.
  ensurePrivateDir(home);
  const logger = options.logger ?? createLogger({ file: join(home, "logs", "ducklm.log") });
  const warn = options.onWarning ?? ((message: string) => logger.warn(message));
  const models =
    typeof options.models === "object"
      ? options.models
      : options.models === false
        ? null
        : await (await import("../models/create-model-provider.js")).createModelProvider({ config: config.models, home, logger, callTimeoutMs: config.runtime.timeouts.model_call_ms, ...(options.onWarning ? { onWarning: options.onWarning } : {}) });
  const plugins = await loadPlugins(pluginFolders(config.dir, home), logger, BUILTIN_TOOL_NAMES);
  for (const failure of plugins.failures) warn(`plugin ${failure.file} skipped: ${failure.reason}`);
  // MCP's SDK, the web tools' HTML converter and their kin load only where they are used.
  const integrations = options.integrations === false ? null : await (await import("../integrations/connect-integrations.js")).connectIntegrations(config.integrations, { workspace, home, logger });
  for (const failure of integrations?.failures ?? []) warn(`${failure.what} left out: ${failure.reason}`);
  const runtime = createRuntime({
    home,
    config,
    logger,
    models,
    tools: [...plugins.tools, ...(integrations?.tools ?? []), ...(options.tools ?? [])],
    workspace,
    ...(options.checkPermissions === false ? { checkPermissionExamples: false } : {}),
    ...(integrations ? { onClose: [integrations.close] } : {}),
  });
  try {
    await runtime.ready();
  } catch (error) {
    await runtime.close();
    throw error;
  }
  return ducklmOf(runtime);
}
