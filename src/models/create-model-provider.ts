import { join } from "node:path";
import type { Logger } from "pino";
import type { ModelsConfig } from "../config/config-schemas.js";
import type { ModelProvider } from "./model-provider.js";
import { resolveRoles } from "./model-roles.js";
import { OpenAiCompatibleProvider } from "./openai/openai-compatible-provider.js";
import { RoutedModelProvider } from "./routed-model-provider.js";

export interface CreateModelProviderOptions {
  config: ModelsConfig;
  /** The data directory; relative model files are looked up in its `models/` folder. */
  home: string;
  logger: Logger;
  seed?: number;
  callTimeoutMs?: number;
  /** Told about each role whose configured file is no model (the CLI prints it); the log is told anyway. */
  onWarning?: (message: string) => void;
}

/** The folder relative model file names in models.json are resolved against. */
export function modelsDirectory(home: string): string {
  return join(home, "models");
}

/**
 * The model provider when at least one chat role has its file or a server, else null (IntentParser
 * mode). node-llama-cpp is imported only when a local file serves a role, so runs without local
 * models start fast.
 */
export async function createModelProvider(options: CreateModelProviderOptions): Promise<ModelProvider | null> {
  const modelsDir = modelsDirectory(options.home);
  const roles = resolveRoles(options.config, modelsDir);
  const anyChat = [...roles.values()].some((role) => role.role !== "embeddings" && role.servedBy !== null);
  // A file someone configured that is no model is said where they will see it, not only in the log.
  for (const role of [...roles.values()].filter((candidate) => candidate.problem)) {
    options.logger.warn({ role: role.role, file: role.path, problem: role.problem }, `model file for ${role.role} ${role.problem}`);
    const instead = role.servedBy ? `the ${role.servedBy} model serves ${role.role} instead` : anyChat ? `nothing serves ${role.role}` : "DuckLM runs without a model until it is fixed";
    options.onWarning?.(`the ${role.role} model file ${role.path} ${role.problem}: ${instead} (see \`ducklm models list\`; \`ducklm setup\` or \`ducklm models pull\` gets a good one)`);
  }
  if (!anyChat) {
    options.logger.info("no model file found for any role: running in IntentParser mode");
    return null;
  }
  const served = [...roles.values()].filter((role) => role.servedBy !== null).map((role) => roles.get(role.servedBy!)!);
  const anyLocal = served.some((role) => !role.remote);
  const anyRemote = served.some((role) => role.remote);
  const shared = {
    config: options.config,
    logger: options.logger,
    ...(options.seed !== undefined ? { seed: options.seed } : {}),
    ...(options.callTimeoutMs !== undefined ? { callTimeoutMs: options.callTimeoutMs } : {}),
  };
  const local = anyLocal ? new (await import("./llama/llama-cpp-provider.js")).LlamaCppProvider({ ...shared, modelsDir }) : null;
  if (!anyRemote) return local;
  const remote = new OpenAiCompatibleProvider({ ...shared, roles });
  return new RoutedModelProvider(roles, local, remote);
}
