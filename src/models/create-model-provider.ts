import { join } from "node:path";
import type { Logger } from "pino";
import type { ModelsConfig } from "../config/config-schemas.js";
import type { ModelProvider } from "./model-provider.js";
import { resolveRoles } from "./model-roles.js";

export interface CreateModelProviderOptions {
  config: ModelsConfig;
  /** The data directory; relative model files are looked up in its `models/` folder. */
  home: string;
  logger: Logger;
  seed?: number;
  callTimeoutMs?: number;
}

/** The folder relative model file names in models.json are resolved against. */
export function modelsDirectory(home: string): string {
  return join(home, "models");
}

/**
 * The local model provider when at least one chat role has its file, else null (IntentParser mode).
 * node-llama-cpp is imported only then, so runs without models start fast.
 */
export async function createModelProvider(options: CreateModelProviderOptions): Promise<ModelProvider | null> {
  const modelsDir = modelsDirectory(options.home);
  const roles = resolveRoles(options.config, modelsDir);
  const anyChat = [...roles.values()].some((role) => role.role !== "embeddings" && role.servedBy !== null);
  if (!anyChat) {
    options.logger.info("no model file found for any role: running in IntentParser mode");
    return null;
  }
  const { LlamaCppProvider } = await import("./llama/llama-cpp-provider.js");
  return new LlamaCppProvider({
    config: options.config,
    modelsDir,
    logger: options.logger,
    ...(options.seed !== undefined ? { seed: options.seed } : {}),
    ...(options.callTimeoutMs !== undefined ? { callTimeoutMs: options.callTimeoutMs } : {}),
  });
}
