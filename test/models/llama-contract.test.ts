import pino from "pino";
import { ModelsConfigSchema } from "../../src/config/config-schemas.js";
import { createModelProvider } from "../../src/models/create-model-provider.js";
import { LlamaCppProvider } from "../../src/models/llama/llama-cpp-provider.js";
import { RoutedModelProvider } from "../../src/models/routed-model-provider.js";
import { describeModelProviderContract } from "../contracts/model-provider-contract.js";
import { endlessFixtureModel, fixtureModels } from "../helpers/fixture-models.js";
import { LOOPBACK_EMBEDDING_DIMENSION, startLoopbackModelServer } from "../helpers/model-server.js";
import { makeTempDir } from "../helpers/test-runtime.js";

const logger = pino({ level: "silent" });
const roles = { served: "json_compiler", throughFallback: "critic", unserved: "thinker" } as const;

// Random weights: the text is noise, so only the shape of each answer is checked, not its words. A
// stall is arranged by serving the role from the fixture whose answers never end.
function localRoles(endless = false) {
  const { chat, embedding } = fixtureModels();
  return {
    json_compiler: { file: endless ? endlessFixtureModel() : chat, backend: "cpu", gpu_layers: 0, context_size: 4096, max_tokens: 64, temperature: 0.8, threads: 1 },
    embeddings: { file: embedding, backend: "cpu", gpu_layers: 0, context_size: 512, threads: 1, dimension: 64 },
  };
}

function llama(endless: boolean, callTimeoutMs?: number): LlamaCppProvider {
  return new LlamaCppProvider({ config: ModelsConfigSchema.parse({ threads: 1, roles: localRoles(endless) }), modelsDir: "/", logger, seed: 3, ...(callTimeoutMs ? { callTimeoutMs } : {}) });
}

describeModelProviderContract(
  {
    name: "llama.cpp on the fixture model",
    answersAsArranged: false,
    roles,
    embeds: true,
    canBreakSchema: false,
    create: async (replies) => ({ provider: llama(replies.some((reply) => "stallAfter" in reply)) }),
    createWithCallLimit: async (limitMs) => ({ provider: llama(true, limitMs) }),
  },
  240_000,
);

describeModelProviderContract(
  {
    name: "routed: chat on llama.cpp, embeddings on a server",
    answersAsArranged: false,
    roles,
    embeds: true,
    canBreakSchema: false,
    async create(replies) {
      const server = await startLoopbackModelServer();
      const config = ModelsConfigSchema.parse({
        threads: 1,
        roles: { ...localRoles(replies.some((reply) => "stallAfter" in reply)), embeddings: { server: { base_url: server.baseUrl, model: "loopback" }, dimension: LOOPBACK_EMBEDDING_DIMENSION } },
      });
      const provider = await createModelProvider({ config, home: makeTempDir(), logger, seed: 3 });
      if (!(provider instanceof RoutedModelProvider)) throw new Error("a local chat role and a server role should give a routed provider");
      return { provider, close: () => server.close() };
    },
  },
  240_000,
);
