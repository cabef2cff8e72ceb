import { existsSync, renameSync } from "node:fs";
import { join, resolve } from "node:path";
import { ModelsConfigSchema, type ModelsConfig } from "../../src/config/config-schemas.js";
import { writeTinyLlamaGguf, type TinyModelOptions } from "../../src/models/gguf/tiny-gguf-writer.js";

/** Where the generated fixture models live (ignored by git; written on first use). */
export const FIXTURE_MODELS_DIR = resolve(import.meta.dirname, "../.tmp/models");

/** Writes (once) a tiny random-weight model and returns its path. Deterministic for given options. */
export function fixtureModel(name: string, options: TinyModelOptions = {}): string {
  const file = join(FIXTURE_MODELS_DIR, `${name}.gguf`);
  if (!existsSync(file)) {
    // Parallel test workers may write the same file: each writes its own copy and renames it in.
    const temporary = `${file}.${process.pid}.tmp`;
    writeTinyLlamaGguf(temporary, options);
    renameSync(temporary, file);
  }
  return file;
}

/** The chat fixture (2 layers, 64 dims) and the embedding fixture (1 layer, 64 dims). */
export function fixtureModels(): { chat: string; embedding: string } {
  return {
    chat: fixtureModel("tiny-chat", { seed: 1, contextLength: 32768, name: "ducklm-tiny-chat" }),
    embedding: fixtureModel("tiny-embedding", { seed: 2, blockCount: 1, name: "ducklm-tiny-embedding" }),
  };
}

/** A chat fixture whose answers never end by themselves, for cancellation and time-limit tests. */
export function endlessFixtureModel(): string {
  return fixtureModel("tiny-chat-endless", { seed: 1, contextLength: 32768, name: "ducklm-tiny-chat-endless", endless: true });
}

/**
 * models.json for tests: every chat role on the chat fixture, embeddings on the other, one CPU thread
 * (on two cores, two threads made this tiny model about 15 times slower).
 */
export function fixtureModelsConfig(overrides: Record<string, unknown> = {}): ModelsConfig {
  const { chat, embedding } = fixtureModels();
  const role = { file: chat, backend: "cpu", gpu_layers: 0, context_size: 4096, max_tokens: 64, temperature: 0.8, threads: 1 };
  return ModelsConfigSchema.parse({
    threads: 1,
    roles: {
      thinker: role,
      json_compiler: { ...role, max_tokens: 2048 },
      critic: { ...role, max_tokens: 512 },
      coder: { ...role, max_tokens: 64 },
      sys_util: { ...role, max_tokens: 256 },
      embeddings: { file: embedding, backend: "cpu", gpu_layers: 0, context_size: 512, threads: 1, dimension: 64 },
    },
    ...overrides,
  });
}
