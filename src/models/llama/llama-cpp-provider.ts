import { freemem } from "node:os";
import { availableParallelism } from "node:os";
import type { Logger } from "pino";
import {
  getLlama,
  LlamaChatSession,
  LlamaLogLevel,
  TokenMeter,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaEmbeddingContext,
  type LlamaGrammar,
  type LlamaModel,
} from "node-llama-cpp";
import type { z } from "zod";
import type { ModelRoleConfig, ModelsConfig } from "../../config/config-schemas.js";
import type { ModelRole } from "../../contracts/index.js";
import { DuckError, ErrorCode } from "../../errors/duck-error.js";
import { withScopedSignal } from "../../utils/scoped-signal.js";
import { gbnfLiteral, toGrammarSchema, type GrammarLimits } from "../grammar-schema.js";
import { estimateTokens, type EmbeddingProvider, type JsonRequest, type JsonResult, type ModelCallUsage, type ModelProvider, type TextRequest } from "../model-provider.js";
import { checkedEmbedding, parseModelJson } from "../model-output.js";
import { resolveRoles, type ResolvedRole } from "../model-roles.js";
import { ModelResidency, type Resident } from "./model-residency.js";

export interface LlamaCppProviderOptions {
  config: ModelsConfig;
  /** Where relative model file names in models.json are looked up. */
  modelsDir: string;
  logger: Logger;
  /**
   * Context sequences of one loaded model: generations that may run at once, and the lanes of tasks
   * whose KV cache is kept between calls (the least recently used idle one is given up when a call
   * needs a sequence). Each takes the model's context size in memory. Defaults to 4.
   */
  sequencesPerModel?: number;
  /** Sampling seed, for reproducible runs. Defaults to none (random). */
  seed?: number;
  /** Longest one call may take, in ms; the call is then aborted. Defaults to 120 s. */
  callTimeoutMs?: number;
  /** Bounds of the decoding grammar (see grammar-schema.ts). */
  grammarLimits?: Partial<GrammarLimits>;
  /**
   * For benchmarks on random-weight models: the text a call must produce, or undefined to generate
   * freely. A text given is forced by a grammar that admits it alone, so the engine evaluates and
   * generates every token as it would for a real model on a known trajectory.
   */
  scriptedOutput?: (request: TextRequest, schema: z.ZodType | null) => Promise<string | undefined>;
}

type Purpose = "chat" | "embedding";

interface LoadedModel extends Resident {
  purpose: Purpose;
  model: LlamaModel;
  chat: LlamaContext | null;
  embedding: LlamaEmbeddingContext | null;
  /** Calls waiting for a free context sequence, served first come, first served. */
  waiting: Array<() => void>;
  /** Sequences kept between calls, by cache key, least recently used first. */
  kept: Map<string, KeptSequence>;
}

/** A context sequence that holds a lane's tokens between its calls. */
interface KeptSequence {
  sequence: LlamaContextSequence;
  busy: boolean;
}

const DEFAULT_SEQUENCES_PER_MODEL = 4;

/** What a call on `sequence` cost, from its token meter and the tokens it holds now. */
function usageOf(sequence: LlamaContextSequence, meterBefore: ReturnType<TokenMeter["getState"]>, startedAt: number, firstTextAt: number | undefined): ModelCallUsage {
  const used = TokenMeter.diff(sequence.tokenMeter, meterBefore);
  // The sequence holds the prompt followed by what was generated (each generated token but the last fed back).
  const promptTokens = Math.max(used.usedInputTokens, sequence.nextTokenIndex - used.usedOutputTokens);
  return {
    prompt_tokens: promptTokens,
    cached_tokens: Math.max(0, promptTokens - used.usedInputTokens),
    evaluated_tokens: used.usedInputTokens,
    generated_tokens: used.usedOutputTokens,
    ...(firstTextAt !== undefined ? { ttft_ms: Math.round(firstTextAt - startedAt) } : {}),
    duration_ms: Math.round(performance.now() - startedAt),
  };
}

/** Share of free memory the models may take when models.json sets no budget. */
const DEFAULT_BUDGET_SHARE_OF_FREE_MEMORY = 0.7;

/**
 * The ModelProvider on llama.cpp through node-llama-cpp. Roles that name the same file, GPU layers and
 * context size share one loaded model; models load on first use and the least recently used idle one
 * is unloaded when the memory budget would be exceeded.
 */
export class LlamaCppProvider implements ModelProvider, EmbeddingProvider {
  readonly roles: Map<ModelRole, ResolvedRole>;
  readonly residency: ModelResidency<LoadedModel>;
  private readonly llamas = new Map<string, Promise<Llama>>();
  private readonly grammars = new WeakMap<z.ZodType, Promise<LlamaGrammar>>();
  private readonly announced = new Set<ModelRole>();
  private disposed = false;

  constructor(private readonly options: LlamaCppProviderOptions) {
    this.roles = resolveRoles(options.config, options.modelsDir);
    const budgetMb = options.config.memory_budget_mb;
    this.residency = new ModelResidency(budgetMb ? budgetMb * 1024 * 1024 : freemem() * DEFAULT_BUDGET_SHARE_OF_FREE_MEMORY, options.logger);
    for (const resolved of this.roles.values()) {
      if (resolved.config && !resolved.present) {
        const instead = resolved.servedBy ? `the ${resolved.servedBy} model stands in` : "the role is unavailable";
        const what = resolved.problem ? `model file for ${resolved.role} ${resolved.problem}` : `model file for ${resolved.role} is missing`;
        options.logger.warn({ role: resolved.role, file: resolved.path, problem: resolved.problem }, `${what}; ${instead}`);
      }
    }
  }

  /** True when at least one chat role has a model file. */
  get anyChatModel(): boolean {
    return [...this.roles.values()].some((role) => role.role !== "embeddings" && role.servedBy !== null);
  }

  hasRole(role: ModelRole): boolean {
    return (this.roles.get(role)?.servedBy ?? null) !== null;
  }

  sharesModel(first: ModelRole, second: ModelRole): boolean {
    const key = this.keyFor(first, "chat");
    return key !== null && key === this.keyFor(second, "chat");
  }

  releaseCache(prefix: string): void {
    for (const loaded of this.residency.loaded()) {
      for (const [key, kept] of loaded.kept) {
        if (!key.startsWith(prefix) || kept.busy) continue;
        loaded.kept.delete(key);
        void kept.sequence.dispose().finally(() => loaded.waiting.shift()?.());
      }
    }
  }

  /** How many sequences of loaded models hold a lane's tokens now (for tests and diagnostics). */
  keptSequences(): string[] {
    return this.residency.loaded().flatMap((loaded) => [...loaded.kept.keys()]);
  }

  /** Loads the model serving `role` now, so that token counting can use its tokenizer. */
  async ensureLoaded(role: ModelRole): Promise<void> {
    if (this.hasRole(role)) await this.instanceFor(role, role === "embeddings" ? "embedding" : "chat");
  }

  isLoaded(role: ModelRole): boolean {
    const key = this.keyFor(role, role === "embeddings" ? "embedding" : "chat");
    return key !== null && this.residency.isLoaded(key);
  }

  countTokens(role: ModelRole, text: string): number {
    const key = this.keyFor(role, "chat");
    const loaded = key ? this.residency.peek(key) : undefined;
    return loaded ? loaded.model.tokenize(text).length : estimateTokens(text);
  }

  async generateText(request: TextRequest): Promise<string> {
    const scripted = await this.options.scriptedOutput?.(request, null);
    return this.prompt(request, scripted === undefined ? undefined : await this.grammarOnly(request.role, scripted));
  }

  async generateJson<T>(request: JsonRequest<T>): Promise<JsonResult<T>> {
    const scripted = await this.options.scriptedOutput?.(request, request.schema);
    const grammar = scripted === undefined ? await this.grammarFor(request.role, request.schema) : await this.grammarOnly(request.role, scripted);
    const maxTokens = request.maxTokens ?? this.samplingFor(request.role).max_tokens;
    const raw = await this.prompt({ ...request, maxTokens }, grammar);
    return { value: parseModelJson(request.role, raw, request.schema, `cut at ${maxTokens} tokens?`), raw };
  }

  /**
   * One chat turn, optionally under a grammar, on the request's kept sequence (or one of its own). The
   * chat reuses whatever prefix of the rendered prompt the sequence already holds and evaluates the rest.
   */
  private prompt(request: TextRequest, grammar: LlamaGrammar | undefined): Promise<string> {
    const sampling = this.samplingFor(request.role);
    return this.withSequence(request.role, request.cacheKey, request.signal, async (sequence, signal) => {
      const session = new LlamaChatSession({ contextSequence: sequence, systemPrompt: request.system });
      const meterBefore = sequence.tokenMeter.getState();
      const startedAt = performance.now();
      let firstTextAt: number | undefined;
      const onTextChunk = (text: string) => {
        firstTextAt ??= performance.now();
        request.onDelta?.(text);
      };
      try {
        const text = await session.prompt(request.prompt, {
          ...(grammar ? { grammar } : {}),
          maxTokens: request.maxTokens ?? sampling.max_tokens,
          temperature: request.temperature ?? sampling.temperature,
          ...(this.options.seed !== undefined ? { seed: this.options.seed } : {}),
          signal,
          onTextChunk,
          ...(request.onTokens ? { onToken: (tokens: readonly unknown[]) => request.onTokens!(tokens.length) } : {}),
        });
        request.onUsage?.(usageOf(sequence, meterBefore, startedAt, firstTextAt));
        return text;
      } finally {
        session.dispose({ disposeSequence: false });
      }
    });
  }

  /** Embeds texts with the embeddings role's model, checking the dimension models.json declares. */
  async embed(texts: readonly string[], options: { signal?: AbortSignal } = {}): Promise<Float32Array[]> {
    if (!this.hasRole("embeddings")) throw new DuckError(ErrorCode.ModelUnavailable, "no embedding model is configured (models.json role embeddings)");
    const instance = await this.instanceFor("embeddings", "embedding");
    const expected = this.roles.get("embeddings")?.config?.dimension;
    instance.active += 1;
    try {
      const vectors: Float32Array[] = [];
      for (const text of texts) {
        options.signal?.throwIfAborted();
        const embedding = await instance.embedding!.getEmbeddingFor(text);
        vectors.push(checkedEmbedding(embedding.vector, expected));
      }
      return vectors;
    } finally {
      instance.active -= 1;
    }
  }

  get embeddingModel(): string | null {
    return this.hasRole("embeddings") ? (this.roles.get(this.roles.get("embeddings")!.servedBy!)?.path ?? null) : null;
  }

  get embeddingDimension(): number | null {
    return this.roles.get("embeddings")?.config?.dimension ?? null;
  }

  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    await this.residency.unloadAll();
    for (const llama of this.llamas.values()) await (await llama).dispose();
  }

  private servingRole(role: ModelRole): ResolvedRole {
    const servedBy = this.roles.get(role)?.servedBy;
    const serving = servedBy ? this.roles.get(servedBy) : undefined;
    if (!serving?.config || !serving.path) {
      const own = this.roles.get(role);
      if (own?.problem) {
        throw new DuckError(ErrorCode.ModelLoadFailed, `the ${role} model ${own.path} ${own.problem}: download it again (\`ducklm models pull\`) or point the role at another file in models.json`, { details: { role, file: own.path } });
      }
      throw new DuckError(ErrorCode.ModelUnavailable, `no model file for role ${role} (config/models.json); see README "Getting models"`, { details: { role } });
    }
    if (servedBy !== role && !this.announced.has(role)) {
      this.announced.add(role);
      this.options.logger.info({ role, served_by: servedBy }, `role ${role} runs on the ${servedBy} model`);
    }
    return serving;
  }

  /** Temperature and max_tokens come from the asking role's own entry when it has one. */
  private samplingFor(role: ModelRole): ModelRoleConfig {
    return this.roles.get(role)?.config ?? this.servingRole(role).config!;
  }

  private keyFor(role: ModelRole, purpose: Purpose): string | null {
    const servedBy = this.roles.get(role)?.servedBy;
    const serving = servedBy ? this.roles.get(servedBy) : undefined;
    if (!serving?.config || !serving.path) return null;
    return `${serving.path}|gpu=${serving.config.gpu_layers}|${purpose}`;
  }

  /** One file is loaded once for every role it serves, with the largest context any of them asks for. */
  private contextSizeFor(serving: ResolvedRole): number {
    let size = serving.config!.context_size;
    for (const resolved of this.roles.values()) {
      const other = resolved.servedBy ? this.roles.get(resolved.servedBy) : undefined;
      if (other?.config && other.role !== "embeddings" && other.path === serving.path && other.config.gpu_layers === serving.config!.gpu_layers) size = Math.max(size, other.config.context_size);
    }
    return size;
  }

  private llamaFor(backend: ModelRoleConfig["backend"]): Promise<Llama> {
    let llama = this.llamas.get(backend);
    if (!llama) {
      const logger = this.options.logger;
      llama = getLlama({
        gpu: backend === "cpu" ? false : backend,
        // Building llama.cpp from source needs the network; the prebuilt binaries ship with npm.
        build: "never",
        logLevel: LlamaLogLevel.warn,
        logger: (level, message) => logger.debug({ level, message }, "llama.cpp"),
      });
      this.llamas.set(backend, llama);
    }
    return llama;
  }

  private async instanceFor(role: ModelRole, purpose: Purpose): Promise<LoadedModel> {
    if (this.disposed) throw new DuckError(ErrorCode.ModelUnavailable, "the model provider is disposed");
    const serving = this.servingRole(role);
    const config = serving.config!;
    const key = this.keyFor(role, purpose)!;
    const threads = config.threads ?? this.options.config.threads ?? availableParallelism();
    return this.residency.acquire(key, serving.sizeBytes ?? 0, async () => {
      let llama: Llama;
      try {
        llama = await this.llamaFor(config.backend);
      } catch (error) {
        this.llamas.delete(config.backend);
        throw new DuckError(ErrorCode.ModelLoadFailed, `llama.cpp's "${config.backend}" backend cannot start here for the ${serving.role} model (${(error as Error).message}): set "backend": "auto" (or "cpu") for it in models.json`, {
          cause: error,
          details: { role: serving.role, file: serving.path, backend: config.backend },
        });
      }
      let model: LlamaModel;
      try {
        model = await llama.loadModel({ modelPath: serving.path!, gpuLayers: config.gpu_layers });
      } catch (error) {
        throw new DuckError(
          ErrorCode.ModelLoadFailed,
          `the ${serving.role} model ${serving.path} could not be loaded (${(error as Error).message}): the file may be cut short, or for a model architecture this llama.cpp does not know; download it again (\`ducklm models pull\`) or point the role at another file in models.json`,
          { cause: error, details: { role: serving.role, file: serving.path } },
        );
      }
      try {
        const chat = purpose === "chat" ? await model.createContext({ contextSize: this.contextSizeFor(serving), threads, sequences: this.options.sequencesPerModel ?? DEFAULT_SEQUENCES_PER_MODEL }) : null;
        const embedding = purpose === "embedding" ? await model.createEmbeddingContext({ contextSize: config.context_size, threads }) : null;
        const contextBytes = chat ? chat.memoryUsage.ram + chat.memoryUsage.vram : 0;
        this.options.logger.info({ role, file: serving.path, threads, purpose }, "model loaded");
        const loaded: LoadedModel = {
          key,
          purpose,
          model,
          chat,
          embedding,
          waiting: [],
          kept: new Map(),
          sizeBytes: model.size + contextBytes,
          lastUsed: 0,
          active: 0,
          unload: async () => {
            await embedding?.dispose();
            await model.dispose();
          },
        };
        return loaded;
      } catch (error) {
        await model.dispose();
        throw error;
      }
    });
  }

  /**
   * Runs `work` on the lane's kept sequence when it has one free, else on a new sequence: taken from
   * the context, or from the least recently used idle lane, or waited for in line when every sequence
   * is busy. A keyed sequence is kept afterwards; one without a key is given back.
   */
  private async withSequence<T>(role: ModelRole, cacheKey: string | undefined, signal: AbortSignal | undefined, work: (sequence: LlamaContextSequence, signal: AbortSignal) => Promise<T>): Promise<T> {
    const instance = await this.instanceFor(role, "chat");
    instance.active += 1;
    try {
      return await withScopedSignal([signal], this.options.callTimeoutMs ?? 120_000, `${role} model call`, async (callSignal) => {
        const context = instance.chat!;
        let kept = cacheKey !== undefined ? instance.kept.get(cacheKey) : undefined;
        // Two calls of one lane at once (parallel steps' critics) cannot share its tokens: the second gets a sequence of its own.
        const keepKey = kept?.busy ? undefined : cacheKey;
        if (kept?.busy) kept = undefined;
        if (kept) {
          // Most recently used last.
          instance.kept.delete(cacheKey!);
          instance.kept.set(cacheKey!, kept);
        }
        while (!kept && context.sequencesLeft === 0) {
          callSignal.throwIfAborted();
          if (await this.evictIdleLane(instance)) continue;
          await new Promise<void>((resolve, reject) => {
            const wake = () => {
              callSignal.removeEventListener("abort", onAbort);
              resolve();
            };
            // A call that gives up leaves the line, so that a freed sequence wakes one still waiting.
            const onAbort = () => {
              const place = instance.waiting.indexOf(wake);
              if (place >= 0) instance.waiting.splice(place, 1);
              reject(callSignal.reason);
            };
            callSignal.addEventListener("abort", onAbort, { once: true });
            instance.waiting.push(wake);
          });
        }
        if (!kept) {
          kept = { sequence: context.getSequence(), busy: false };
          if (keepKey !== undefined) instance.kept.set(keepKey, kept);
        }
        kept.busy = true;
        let failed = true;
        try {
          const result = await work(kept.sequence, callSignal);
          failed = false;
          return result;
        } finally {
          kept.busy = false;
          // A sequence whose call failed may hold a half-evaluated state: it is not worth keeping.
          if (keepKey === undefined || failed || instance.kept.get(keepKey) !== kept) {
            if (keepKey !== undefined && instance.kept.get(keepKey) === kept) instance.kept.delete(keepKey);
            // The context takes the sequence back only once its disposal is through.
            await kept.sequence.dispose();
          }
          instance.waiting.shift()?.();
        }
      }, ErrorCode.ModelTimeout);
    } finally {
      instance.active -= 1;
    }
  }

  /** Gives up the least recently used lane that no call is using; false when there is none. */
  private async evictIdleLane(instance: LoadedModel): Promise<boolean> {
    for (const [key, kept] of instance.kept) {
      if (kept.busy) continue;
      instance.kept.delete(key);
      await kept.sequence.dispose();
      return true;
    }
    return false;
  }

  /** A grammar that admits exactly `text`. */
  private async grammarOnly(role: ModelRole, text: string): Promise<LlamaGrammar> {
    const llama = await this.llamaFor(this.servingRole(role).config!.backend);
    return llama.createGrammar({ grammar: `root ::= ${gbnfLiteral(text)}` });
  }

  private grammarFor(role: ModelRole, schema: z.ZodType): Promise<LlamaGrammar> {
    let grammar = this.grammars.get(schema);
    if (!grammar) {
      const backend = this.servingRole(role).config!.backend;
      grammar = this.llamaFor(backend).then((llama) =>
        llama.createGrammarForJsonSchema(toGrammarSchema(schema, this.options.grammarLimits) as Parameters<Llama["createGrammarForJsonSchema"]>[0]),
      );
      this.grammars.set(schema, grammar);
    }
    return grammar;
  }
}
