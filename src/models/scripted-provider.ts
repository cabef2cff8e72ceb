import { setTimeout as delay } from "node:timers/promises";
import type { ModelRole } from "../contracts/index.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { parseModelJson } from "./model-output.js";
import { estimateTokens, type JsonRequest, type JsonResult, type ModelCallUsage, type ModelProvider, type TextRequest } from "./model-provider.js";
import { ROLE_FALLBACKS } from "./model-roles.js";

/** One scripted answer: text (or a value serialised to JSON), or a function of the request. */
export type ScriptedReply =
  | string
  | object
  | ((request: TextRequest | JsonRequest<unknown>) => string | object | Promise<string | object>);

/**
 * A reply that streams `text` and then never finishes, as a model that hangs mid-answer: the call
 * ends only when its signal aborts, rejecting with the signal's reason.
 */
export function stallingReply(text: string): ScriptedReply {
  return (request) =>
    new Promise<never>((_resolve, reject) => {
      const signal = request.signal;
      const stop = () => reject(signal?.reason);
      if (signal?.aborted) return stop();
      signal?.addEventListener("abort", stop, { once: true });
      request.onDelta?.(text);
    });
}

export interface ScriptedCall {
  role: ModelRole;
  kind: "text" | "json";
  prompt: string;
  system: string;
  purpose?: string;
  cacheKey?: string;
  /** What the call cost, as a server with a prefix cache per lane would count it. */
  usage?: ModelCallUsage;
}

/**
 * A deterministic ModelProvider for tests: each role answers from its own queue of replies,
 * and every call it receives is recorded.
 */
export class ScriptedModelProvider implements ModelProvider {
  readonly calls: ScriptedCall[] = [];
  private readonly queues = new Map<ModelRole, ScriptedReply[]>();
  private readonly fallbacks = new Map<ModelRole, ScriptedReply>();

  /** Every served role runs on one model (as the starter preset has it), so one call may play two roles. */
  private readonly oneModel: boolean;

  constructor(script: Partial<Record<ModelRole, ScriptedReply[]>> = {}, options: { chunkSize?: number; chunkDelayMs?: number; oneModel?: boolean } = {}) {
    this.oneModel = options.oneModel ?? false;
    for (const [role, replies] of Object.entries(script)) this.queues.set(role as ModelRole, [...(replies ?? [])]);
    this.chunkSize = options.chunkSize ?? 8;
    this.chunkDelayMs = options.chunkDelayMs ?? 0;
  }

  private readonly chunkSize: number;
  /** Pause between chunks, as a model generating at some speed would; 0 streams at once. */
  chunkDelayMs: number;

  /** A reply used whenever the role's queue is empty. */
  always(role: ModelRole, reply: ScriptedReply): this {
    this.fallbacks.set(role, reply);
    return this;
  }

  push(role: ModelRole, ...replies: ScriptedReply[]): this {
    const queue = this.queues.get(role) ?? [];
    queue.push(...replies);
    this.queues.set(role, queue);
    return this;
  }

  private scripted(role: ModelRole): boolean {
    return (this.queues.get(role)?.length ?? 0) > 0 || this.fallbacks.has(role);
  }

  /** The role whose script answers: the role itself, else its fallback (`ROLE_FALLBACKS`), as a configured model would. */
  private servedBy(role: ModelRole): ModelRole | null {
    const seen = new Set<ModelRole>();
    for (let candidate: ModelRole | undefined = role; candidate && !seen.has(candidate); candidate = ROLE_FALLBACKS[candidate]) {
      if (this.scripted(candidate)) return candidate;
      seen.add(candidate);
    }
    return null;
  }

  hasRole(role: ModelRole): boolean {
    return this.servedBy(role) !== null;
  }

  /** Two roles share a model when one script answers both, or when every role runs on one model. */
  sharesModel(first: ModelRole, second: ModelRole): boolean {
    const served = this.servedBy(first);
    if (served === null || this.servedBy(second) === null) return false;
    return this.oneModel || served === this.servedBy(second);
  }

  releaseCache(prefix: string): void {
    for (const key of this.held.keys()) if (key.startsWith(prefix)) this.held.delete(key);
  }

  async generateText(request: TextRequest): Promise<string> {
    const reply = await this.next(request, "text");
    const text = typeof reply === "string" ? reply : JSON.stringify(reply);
    await this.stream(text, request.onDelta, request.signal);
    this.reportUsage(request, text);
    return text;
  }

  async generateJson<T>(request: JsonRequest<T>): Promise<JsonResult<T>> {
    const reply = await this.next(request as JsonRequest<unknown>, "json");
    const raw = typeof reply === "string" ? reply : JSON.stringify(reply);
    await this.stream(raw, request.onDelta, request.signal);
    const value = parseModelJson(request.role, raw, request.schema);
    this.reportUsage(request, raw);
    return { value, raw };
  }

  /** What each lane's sequence holds after its last call: its system text, prompt and output. */
  private readonly held = new Map<string, string>();

  /**
   * Counts a call as a model with a prefix cache per lane would: the part of the prompt shared with
   * what the lane held is cached, the rest evaluated (tokens estimated from characters).
   */
  private reportUsage(request: TextRequest | JsonRequest<unknown>, output: string): void {
    const text = `${request.system}\n${request.prompt}\n`;
    const held = request.cacheKey !== undefined ? (this.held.get(request.cacheKey) ?? "") : "";
    let shared = 0;
    while (shared < held.length && shared < text.length && held.charCodeAt(shared) === text.charCodeAt(shared)) shared += 1;
    if (request.cacheKey !== undefined) this.held.set(request.cacheKey, text + output);
    const promptTokens = estimateTokens(text);
    const cached = Math.min(promptTokens, Math.floor(shared / 4));
    const usage: ModelCallUsage = { prompt_tokens: promptTokens, cached_tokens: cached, evaluated_tokens: promptTokens - cached, generated_tokens: estimateTokens(output), duration_ms: 0 };
    const call = this.calls.at(-1);
    if (call) call.usage = usage;
    request.onUsage?.(usage);
  }

  countTokens(_role: ModelRole, text: string): number {
    return estimateTokens(text);
  }

  async dispose(): Promise<void> {}

  private async next(request: TextRequest | JsonRequest<unknown>, kind: "text" | "json"): Promise<string | object> {
    request.signal?.throwIfAborted();
    this.calls.push({ role: request.role, kind, prompt: request.prompt, system: request.system, ...(request.purpose !== undefined ? { purpose: request.purpose } : {}), ...(request.cacheKey !== undefined ? { cacheKey: request.cacheKey } : {}) });
    const role = this.servedBy(request.role) ?? request.role;
    const reply = this.queues.get(role)?.shift() ?? this.fallbacks.get(role);
    if (reply === undefined) {
      throw new DuckError(ErrorCode.ModelUnavailable, `no scripted reply left for role ${request.role}`);
    }
    return typeof reply === "function" ? reply(request) : reply;
  }

  private async stream(text: string, onDelta: ((text: string) => void) | undefined, signal: AbortSignal | undefined): Promise<void> {
    if (!onDelta) return;
    for (let i = 0; i < text.length; i += this.chunkSize) {
      if (i > 0 && this.chunkDelayMs > 0) await delay(this.chunkDelayMs, undefined, signal ? { signal } : {});
      signal?.throwIfAborted();
      onDelta(text.slice(i, i + this.chunkSize));
    }
  }
}
