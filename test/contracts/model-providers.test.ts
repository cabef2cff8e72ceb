import pino from "pino";
import { ModelsConfigSchema } from "../../src/config/config-schemas.js";
import type { DuckEvent, ModelRole } from "../../src/contracts/index.js";
import { createModelProvider } from "../../src/models/create-model-provider.js";
import { resolveRoles } from "../../src/models/model-roles.js";
import { OpenAiCompatibleProvider } from "../../src/models/openai/openai-compatible-provider.js";
import { RoutedModelProvider } from "../../src/models/routed-model-provider.js";
import { ScriptedModelProvider, stallingReply } from "../../src/models/scripted-provider.js";
import { ReplayModelProvider } from "../../src/replay/replay-model-provider.js";
import { ReplayProgress } from "../../src/replay/replay-progress.js";
import { LOOPBACK_EMBEDDING_DIMENSION, startLoopbackModelServer } from "../helpers/model-server.js";
import { makeTempDir } from "../helpers/test-runtime.js";
import { describeModelProviderContract, type ArrangedReply, type ProviderUnderTest } from "./model-provider-contract.js";

const logger = pino({ level: "silent" });
// Only the JSON compiler has a model: the critic reaches it through the fallback table, the Thinker has none.
const roles = { served: "json_compiler", throughFallback: "critic", unserved: "thinker" } as const satisfies Record<string, ModelRole>;

describeModelProviderContract({
  name: "scripted",
  answersAsArranged: true,
  roles,
  embeds: false,
  canBreakSchema: true,
  async create(replies) {
    const provider = new ScriptedModelProvider({ json_compiler: replies.map((reply) => ("text" in reply ? reply.text : stallingReply(reply.stallAfter))) });
    return { provider };
  },
});

/** The events a task would have recorded had a model answered `replies` for purpose "contract". */
function recordedAnswers(replies: ArrangedReply[]): DuckEvent[] {
  const events: DuckEvent[] = [];
  const record = (type: DuckEvent["type"], payload: Record<string, unknown>) =>
    events.push({ task_id: "recorded", seq: events.length + 1, type, time: new Date(0).toISOString(), payload: { role: "json_compiler", purpose: "contract", ...payload } });
  for (const reply of replies) {
    record("model-output-started", {});
    const text = "text" in reply ? reply.text : reply.stallAfter;
    for (const piece of text.match(/[\s\S]{1,8}/g) ?? []) record("model-output-delta", { text: piece });
    if ("text" in reply) record("model-output-completed", { text });
  }
  return events;
}

describeModelProviderContract({
  name: "replay of a recorded task",
  answersAsArranged: true,
  roles,
  embeds: false,
  canBreakSchema: true,
  async create(replies) {
    const progress = new ReplayProgress();
    // Every recorded event already published: the recording plays without waiting on a replayed task.
    progress.advance(Number.MAX_SAFE_INTEGER);
    return { provider: new ReplayModelProvider(recordedAnswers(replies), progress) };
  },
});

function serverModelsConfig(baseUrl: string) {
  const server = { base_url: baseUrl, model: "loopback", structured_output: "json_schema" };
  return ModelsConfigSchema.parse({ roles: { json_compiler: { server, max_tokens: 256 }, embeddings: { server, dimension: LOOPBACK_EMBEDDING_DIMENSION } } });
}

async function openAiCompatible(replies: ArrangedReply[], callTimeoutMs?: number): Promise<ProviderUnderTest> {
  const server = await startLoopbackModelServer();
  server.answer(...replies);
  const config = serverModelsConfig(server.baseUrl);
  const provider = new OpenAiCompatibleProvider({ config, roles: resolveRoles(config, makeTempDir()), logger, ...(callTimeoutMs ? { callTimeoutMs } : {}) });
  return { provider, close: () => server.close() };
}

describeModelProviderContract({
  name: "OpenAI-compatible server (loopback)",
  answersAsArranged: true,
  roles,
  embeds: true,
  canBreakSchema: true,
  create: (replies) => openAiCompatible(replies),
  createWithCallLimit: (limitMs) => openAiCompatible([{ stallAfter: "The ducks" }], limitMs),
});

describeModelProviderContract({
  name: "routed (roles on a server, chosen by models.json)",
  answersAsArranged: true,
  roles,
  embeds: true,
  canBreakSchema: true,
  async create(replies) {
    const server = await startLoopbackModelServer();
    server.answer(...replies);
    const provider = await createModelProvider({ config: serverModelsConfig(server.baseUrl), home: makeTempDir(), logger });
    if (!(provider instanceof RoutedModelProvider)) throw new Error("models.json with server roles should give a routed provider");
    return { provider, close: () => server.close() };
  },
  async createWithCallLimit(limitMs) {
    const server = await startLoopbackModelServer();
    server.answer({ stallAfter: "The ducks" });
    const provider = await createModelProvider({ config: serverModelsConfig(server.baseUrl), home: makeTempDir(), logger, callTimeoutMs: limitMs });
    return { provider: provider!, close: () => server.close() };
  },
});
