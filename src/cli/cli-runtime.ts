import { join } from "node:path";
import { loadConfig, resolveConfigDir, resolveHomeDir } from "../config/load-config.js";
import { DuckError } from "../errors/duck-error.js";
import { connectIntegrations } from "../integrations/connect-integrations.js";
import { createModelProvider } from "../models/create-model-provider.js";
import { createLogger } from "../runtime/logger.js";
import { BUILTIN_TOOL_NAMES, createRuntime, pluginFolders, resolveWorkspace, type Runtime } from "../runtime/create-runtime.js";
import { loadPlugins } from "../tools/plugin-loader.js";

export interface GlobalOptions {
  home?: string;
  config?: string;
  workspace?: string;
}

/** Exit codes the CLI uses, documented in the README. */
export const ExitCode = { Ok: 0, TaskFailed: 1, BadInput: 2, AwaitingPermission: 3, Cancelled: 130 } as const;

/**
 * Loads config, finds the models (if any) and opens the runtime for one command. Commands that run
 * tasks (`integrations`) also connect the MCP servers and web tools of integrations.json; the others
 * do not start servers they will never call.
 */
export async function openRuntime(options: GlobalOptions, settings: { models?: boolean; integrations?: boolean } = {}): Promise<Runtime> {
  const home = resolveHomeDir(options.home);
  const config = loadConfig(resolveConfigDir(options.config));
  const logger = createLogger({ file: join(home, "logs", "ducklm.log") });
  const models =
    settings.models === false
      ? null
      : await createModelProvider({ config: config.models, home, logger, callTimeoutMs: config.runtime.timeouts.model_call_ms });
  const plugins = await loadPlugins(pluginFolders(config.dir, home), logger, BUILTIN_TOOL_NAMES);
  for (const failure of plugins.failures) console.error(`warning: plugin ${failure.file} skipped: ${failure.reason}`);
  const workspace = resolveWorkspace(config, options.workspace);
  const integrations = settings.integrations ? await connectIntegrations(config.integrations, { workspace, home, logger }) : null;
  for (const failure of integrations?.failures ?? []) console.error(`warning: ${failure.what} left out: ${failure.reason}`);
  const runtime = createRuntime({
    home,
    config,
    logger,
    models,
    tools: [...plugins.tools, ...(integrations?.tools ?? [])],
    workspace,
    ...(integrations ? { onClose: [integrations.close] } : {}),
  });
  try {
    await runtime.ready();
  } catch (error) {
    await runtime.close();
    throw error;
  }
  // Said wherever tasks run: a person must know when commands are not confined.
  if (settings.integrations && runtime.sandboxWarning) console.error(`warning: ${runtime.sandboxWarning}`);
  return runtime;
}

/** Prints an error a person can act on and returns the exit code for it. */
export function reportError(error: unknown): number {
  if (DuckError.isInstance(error)) {
    console.error(`error ${error.code}: ${error.message}`);
    return error.code === "DUCK_ERR_INTERNAL" || error.code === "DUCK_ERR_STORAGE" ? 1 : ExitCode.BadInput;
  }
  console.error(`error: ${error instanceof Error ? error.message : String(error)}`);
  return 1;
}
