import type { z } from "zod";
import type { ModelCallUsage, ModelRole } from "../contracts/index.js";

export type { ModelCallUsage } from "../contracts/index.js";

export interface ModelCallOptions {
  /** What the call is for ("draft", "directive", "recall", "critic:step-1"…), as recorded in its events. */
  purpose?: string;
  /** Cancels the call; the provider stops generating and rejects with an AbortError. */
  signal?: AbortSignal;
  /** Most tokens to generate. Defaults to the role's `max_tokens`. */
  maxTokens?: number;
  /** Defaults to the role's `temperature`. */
  temperature?: number;
  /**
   * Called with how many tokens the model generated, as it generates them, where the provider knows
   * (llama.cpp does); counting the text again would count differently from what was generated.
   */
  onTokens?: (count: number) => void;
  /**
   * Calls with the same key continue one kept context sequence (one lane of one task: its decisions,
   * its critic), so that each evaluates only what follows the prefix it shares with what the sequence
   * holds. Providers without a cache of their own ignore it. Defaults to none: a sequence of its own.
   */
  cacheKey?: string;
  /** Called once, when the call ends well, with what it cost the model. */
  onUsage?: (usage: ModelCallUsage) => void;
}


export interface TextRequest extends ModelCallOptions {
  role: ModelRole;
  system: string;
  prompt: string;
  /** Called with each generated chunk, in order. */
  onDelta?: (text: string) => void;
}

/** A tool the model may call, as native tool calling sends it (its arguments' JSON schema). */
export interface CallableTool {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/**
 * What a model that called tools natively answered, as a provider hands it on (and a replay reads it
 * back): the text it wrote, and each tool call with its arguments.
 */
export interface ToolCallAnswer {
  thought: string;
  tool_calls: Array<{ name: string; arguments: Record<string, unknown> }>;
}

export interface JsonRequest<T> extends ModelCallOptions {
  role: ModelRole;
  system: string;
  prompt: string;
  /** What the output must satisfy. Local providers decode under a grammar derived from it. */
  schema: z.ZodType<T>;
  /**
   * Tools to offer as native tool calls, where the role's provider `callsTools`: the answer then comes
   * back as a {@link ToolCallAnswer}, which `schema` must describe.
   */
  tools?: readonly CallableTool[];
  /** Called with each generated chunk, in order. */
  onDelta?: (text: string) => void;
}

export interface JsonResult<T> {
  value: T;
  /** The text the model produced, recorded so that a replay needs no model. */
  raw: string;
}

/** The port every model backend implements: llama.cpp, a remote server, or a script for tests. */
export interface ModelProvider {
  /** Which roles can be served right now (a role whose file is missing is absent). */
  hasRole(role: ModelRole): boolean;
  generateText(request: TextRequest): Promise<string>;
  generateJson<T>(request: JsonRequest<T>): Promise<JsonResult<T>>;
  /** Tokens `text` takes for the role's model. */
  countTokens(role: ModelRole, text: string): number;
  /**
   * The prompt tokens of one request, as counted against a task's budget. Optional: by default its
   * system and prompt are counted with `countTokens`; a replay serves the recorded count (none for
   * a log recorded before calls were counted).
   */
  promptTokens?(request: { role: ModelRole; purpose?: string; system: string; prompt: string }): number | undefined;
  /**
   * Whether two roles run on one model (one file, or one server and model name), so that one call can
   * play both. Optional: by default no two roles do.
   */
  sharesModel?(first: ModelRole, second: ModelRole): boolean;
  /**
   * Whether the role's model calls tools natively (an OpenAI-compatible server with
   * `structured_output: "tools"`): a JSON request with `tools` is then answered with its tool calls.
   * Optional: by default none does.
   */
  callsTools?(role: ModelRole): boolean;
  /** Frees what calls with keys starting with `prefix` kept (a finished task's sequences). Optional. */
  releaseCache?(prefix: string): void;
  /** Loads the role's model ahead of use (so that `countTokens` uses its tokenizer). Optional. */
  ensureLoaded?(role: ModelRole): Promise<void>;
  dispose(): Promise<void>;
}

/** Turns text into vectors for memory search. */
export interface EmbeddingProvider {
  embed(texts: readonly string[], options?: { signal?: AbortSignal }): Promise<Float32Array[]>;
  /** The dimension models.json declares, or null when it declares none. */
  readonly embeddingDimension: number | null;
  /** What identifies the embedding model (its file), or null when there is none. */
  readonly embeddingModel: string | null;
}

export function isEmbeddingProvider(value: unknown): value is EmbeddingProvider {
  return typeof value === "object" && value !== null && typeof (value as EmbeddingProvider).embed === "function";
}

export { estimateTokens } from "../contracts/tokens.js";
