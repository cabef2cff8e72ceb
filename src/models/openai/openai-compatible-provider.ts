import { setTimeout as delay } from "node:timers/promises";
import type { Logger } from "pino";
import type { ModelRoleConfig, ModelServerConfig, ModelsConfig } from "../../config/config-schemas.js";
import type { ModelRole } from "../../contracts/index.js";
import { DuckError, ErrorCode } from "../../errors/duck-error.js";
import { expandEnv } from "../../config/expand-env.js";
import { withScopedSignal } from "../../utils/scoped-signal.js";
import { toServerSchema } from "../grammar-schema.js";
import { estimateTokens, type CallableTool, type EmbeddingProvider, type JsonRequest, type JsonResult, type ModelProvider, type TextRequest, type ToolCallAnswer } from "../model-provider.js";
import { checkedEmbedding, jsonTextOf, parseModelJson } from "../model-output.js";
import type { ResolvedRole } from "../model-roles.js";
import { urlForDisplay } from "../../utils/url-for-display.js";

export interface OpenAiCompatibleProviderOptions {
  config: ModelsConfig;
  roles: Map<ModelRole, ResolvedRole>;
  logger: Logger;
  env?: NodeJS.ProcessEnv;
  seed?: number;
  callTimeoutMs?: number;
}

/** Statuses a server gives while it is busy or loading, worth asking again. */
const TRANSIENT_STATUS = new Set([429, 502, 503, 504]);
const TRANSIENT_RETRIES = 2;

interface ChatMessage {
  role: "system" | "user";
  content: string;
}

/** Reads a server-sent-events body, calling `onData` with each event's data. */
async function readEvents(body: ReadableStream<Uint8Array>, onData: (data: string) => void): Promise<void> {
  const decoder = new TextDecoder();
  let buffer = "";
  let data: string[] = [];
  const flushEvent = () => {
    if (data.length > 0) onData(data.join("\n"));
    data = [];
  };
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let newline: number;
    while ((newline = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, newline).replace(/\r$/, "");
      buffer = buffer.slice(newline + 1);
      if (line === "") flushEvent();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      // Comments (":") and other fields (event, id, retry) carry nothing a completion needs.
    }
  }
  if (buffer.startsWith("data:")) data.push(buffer.slice(5).replace(/^ /, ""));
  flushEvent();
}

/**
 * The ModelProvider for roles served by an OpenAI-compatible HTTP server (llama.cpp's server, Ollama,
 * vLLM, LM Studio, hosted APIs): streamed chat completions, JSON through `response_format` where the
 * server supports it, embeddings through /embeddings. Output is checked against the schema here just
 * as it is for local models.
 */
export class OpenAiCompatibleProvider implements ModelProvider, EmbeddingProvider {
  private readonly env: NodeJS.ProcessEnv;

  constructor(private readonly options: OpenAiCompatibleProviderOptions) {
    this.env = options.env ?? process.env;
  }

  hasRole(role: ModelRole): boolean {
    const servedBy = this.options.roles.get(role)?.servedBy;
    return servedBy !== null && servedBy !== undefined && this.options.roles.get(servedBy)?.remote === true;
  }

  countTokens(_role: ModelRole, text: string): number {
    return estimateTokens(text);
  }

  sharesModel(first: ModelRole, second: ModelRole): boolean {
    if (!this.hasRole(first) || !this.hasRole(second)) return false;
    const a = this.serving(first).server;
    const b = this.serving(second).server;
    return a.base_url === b.base_url && a.model === b.model;
  }

  callsTools(role: ModelRole): boolean {
    return this.hasRole(role) && this.serving(role).server.structured_output === "tools";
  }

  async generateText(request: TextRequest): Promise<string> {
    return this.complete(request, null);
  }

  async generateJson<T>(request: JsonRequest<T>): Promise<JsonResult<T>> {
    const schema = toServerSchema(request.schema);
    const raw = await this.complete(request, schema, request.tools);
    // Servers that had only the prompt to go by wrap JSON in a fence, and often in prose too.
    return { value: parseModelJson(request.role, jsonTextOf(raw), request.schema, "cut at max_tokens?"), raw };
  }

  async embed(texts: readonly string[], options: { signal?: AbortSignal } = {}): Promise<Float32Array[]> {
    const { server } = this.serving("embeddings");
    const expected = this.options.roles.get("embeddings")?.config?.dimension;
    const response = await this.post(server, "embeddings", { model: server.model, input: texts }, options.signal ?? new AbortController().signal);
    const body = (await jsonBodyOf(response)) as { data?: Array<{ index: number; embedding: number[] }> };
    const rows = [...(body.data ?? [])].sort((a, b) => a.index - b.index);
    if (rows.length !== texts.length) throw new DuckError(ErrorCode.ModelServerFailed, `the server returned ${rows.length} embeddings for ${texts.length} texts`);
    return rows.map((row) => checkedEmbedding(row.embedding, expected));
  }

  get embeddingModel(): string | null {
    if (!this.hasRole("embeddings")) return null;
    const { server } = this.serving("embeddings");
    return `${server.model}@${server.base_url}`;
  }

  get embeddingDimension(): number | null {
    return this.options.roles.get("embeddings")?.config?.dimension ?? null;
  }

  async dispose(): Promise<void> {}

  private serving(role: ModelRole): { server: ModelServerConfig; sampling: ModelRoleConfig } {
    const servedBy = this.options.roles.get(role)?.servedBy;
    const serving = servedBy ? this.options.roles.get(servedBy) : undefined;
    const server = serving?.config?.server;
    if (!server || !serving?.config) throw new DuckError(ErrorCode.ModelUnavailable, `role ${role} is not served by a model server (config/models.json)`, { details: { role } });
    return { server, sampling: this.options.roles.get(role)?.config ?? serving.config };
  }

  private headers(server: ModelServerConfig): Record<string, string> {
    const headers: Record<string, string> = { "content-type": "application/json", ...Object.fromEntries(Object.entries(server.headers).map(([key, value]) => [key, expandEnv(value, this.env, `models.json server header ${key}`)])) };
    if (server.api_key_env) {
      const key = this.env[server.api_key_env];
      if (!key) throw new DuckError(ErrorCode.ConfigInvalid, `models.json names api_key_env ${server.api_key_env} for ${urlForDisplay(server.base_url)}, but it is not set in the environment`);
      headers.authorization = `Bearer ${key}`;
    }
    return headers;
  }

  /**
   * POSTs JSON, retrying what a busy server answers while it loads a model or sheds load (429, 502,
   * 503, 504) a few times, after the server's Retry-After when it gives one.
   */
  private async post(server: ModelServerConfig, path: string, body: unknown, signal: AbortSignal): Promise<Response> {
    // The path goes after the base's own, before its query (`…/v1?api-version=…`).
    const endpoint = new URL(server.base_url);
    endpoint.pathname = `${endpoint.pathname.replace(/\/+$/, "")}/${path}`;
    const url = endpoint.href;
    const shown = urlForDisplay(url);
    const headers = this.headers(server);
    for (let attempt = 0; ; attempt += 1) {
      let response: Response;
      try {
        response = await fetch(url, { method: "POST", headers, body: JSON.stringify(body), signal });
      } catch (error) {
        if (signal.aborted) throw signal.reason ?? error;
        throw new DuckError(ErrorCode.ModelServerFailed, `could not reach the model server at ${shown}: ${(error as Error).cause instanceof Error ? ((error as Error).cause as Error).message : (error as Error).message}`, { cause: error });
      }
      if (response.ok) return response;
      const text = (await response.text().catch(() => "")).slice(0, 500);
      if (TRANSIENT_STATUS.has(response.status) && attempt < TRANSIENT_RETRIES) {
        const retryAfter = Number(response.headers.get("retry-after"));
        const wait = Number.isFinite(retryAfter) && retryAfter > 0 ? Math.min(retryAfter * 1000, 10_000) : 500 * 2 ** attempt;
        this.options.logger.warn({ url: shown, status: response.status, wait_ms: wait }, "model server busy; trying again");
        await delay(wait, undefined, { signal });
        continue;
      }
      throw new DuckError(ErrorCode.ModelServerFailed, `the model server at ${shown} answered HTTP ${response.status}: ${text}`, { details: { status: response.status, url: shown } });
    }
  }

  private async complete(request: TextRequest, schema: Record<string, unknown> | null, tools?: readonly CallableTool[]): Promise<string> {
    const { server, sampling } = this.serving(request.role);
    // Native tool calls answer a decision; any other JSON is asked for under its schema.
    const nativeTools = server.structured_output === "tools" && tools !== undefined && tools.length > 0 ? tools : null;
    const jsonBy = nativeTools ? null : server.structured_output === "tools" ? "json_schema" : server.structured_output;
    const messages: ChatMessage[] = [
      { role: "system", content: request.system },
      { role: "user", content: schema && jsonBy !== null && jsonBy !== "json_schema" ? `${request.prompt}\n\nAnswer with JSON only, matching this JSON schema:\n${JSON.stringify(schema)}` : request.prompt },
    ];
    const body: Record<string, unknown> = {
      model: server.model,
      messages,
      stream: true,
      // The server's count of what the call cost, cached prompt tokens included, in the last chunk.
      stream_options: { include_usage: true },
      max_tokens: request.maxTokens ?? sampling.max_tokens,
      temperature: request.temperature ?? sampling.temperature,
      ...(this.options.seed !== undefined ? { seed: this.options.seed } : {}),
    };
    if (schema && jsonBy === "json_schema") body.response_format = { type: "json_schema", json_schema: { name: "output", schema } };
    if (schema && jsonBy === "json_object") body.response_format = { type: "json_object" };
    if (nativeTools) {
      body.tools = nativeTools.map((tool) => ({ type: "function", function: { name: tool.name, description: tool.description, parameters: tool.parameters } }));
      body.tool_choice = "auto";
    }
    const calls = new ToolCallCollector();
    // What a decision by native tool calls hands on: the text and the calls, as JSON (what a replay reads back).
    const answerOf = (text: string) => (nativeTools ? JSON.stringify(calls.answer(text)) : text);
    const signals = request.signal ? [request.signal] : [];
    const startedAt = performance.now();
    let firstTextAt: number | undefined;
    const onDelta = (text: string) => {
      firstTextAt ??= performance.now();
      request.onDelta?.(text);
    };
    const report = (usage: ServerUsage | undefined) =>
      request.onUsage?.({
        ...(usage?.prompt_tokens !== undefined ? { prompt_tokens: usage.prompt_tokens } : {}),
        ...(usage?.prompt_tokens_details?.cached_tokens !== undefined ? { cached_tokens: usage.prompt_tokens_details.cached_tokens } : {}),
        ...(usage?.prompt_tokens !== undefined && usage.prompt_tokens_details?.cached_tokens !== undefined ? { evaluated_tokens: Math.max(0, usage.prompt_tokens - usage.prompt_tokens_details.cached_tokens) } : {}),
        ...(usage?.completion_tokens !== undefined ? { generated_tokens: usage.completion_tokens } : {}),
        ...(firstTextAt !== undefined ? { ttft_ms: Math.round(firstTextAt - startedAt) } : {}),
        duration_ms: Math.round(performance.now() - startedAt),
      });
    return withScopedSignal(signals, this.options.callTimeoutMs ?? 120_000, `${request.role} model call`, async (signal) => {
      const response = await this.post(server, "chat/completions", body, signal);
      if (!response.body) throw new DuckError(ErrorCode.ModelServerFailed, "the model server sent an empty response");
      let text = "";
      let failure: string | null = null;
      let usage: ServerUsage | undefined;
      if (!(response.headers.get("content-type") ?? "").includes("text/event-stream")) {
        // A server that ignores `stream` answers with one JSON body.
        const whole = (await jsonBodyOf(response)) as { choices?: Array<{ message?: { content?: string | null; tool_calls?: StreamedToolCall[] } }>; usage?: ServerUsage };
        text = whole.choices?.[0]?.message?.content ?? "";
        for (const [index, call] of (whole.choices?.[0]?.message?.tool_calls ?? []).entries()) calls.add({ ...call, index });
        if (text) onDelta(text);
        report(whole.usage);
        return answerOf(text);
      }
      await readEvents(response.body, (data) => {
        if (data === "[DONE]") return;
        let chunk: { choices?: Array<{ delta?: { content?: string | null; tool_calls?: StreamedToolCall[] } }>; error?: { message?: string }; usage?: ServerUsage | null };
        try {
          chunk = JSON.parse(data);
        } catch {
          failure = `unreadable stream event: ${data.slice(0, 200)}`;
          return;
        }
        if (chunk.error) failure = chunk.error.message ?? "error in stream";
        if (chunk.usage) usage = chunk.usage;
        const delta = chunk.choices?.[0]?.delta?.content;
        if (delta) {
          text += delta;
          onDelta(delta);
        }
        for (const call of chunk.choices?.[0]?.delta?.tool_calls ?? []) calls.add(call);
      });
      if (failure) throw new DuckError(ErrorCode.ModelServerFailed, `the model server failed mid-answer: ${failure}`);
      report(usage);
      return answerOf(text);
    }, ErrorCode.ModelTimeout);
  }
}

/** A tool call as a server sends it: whole, or in pieces that share an `index` (the arguments split anywhere). */
interface StreamedToolCall {
  index?: number;
  function?: { name?: string; arguments?: string };
}

/** Puts streamed tool calls together, and reads their arguments. */
class ToolCallCollector {
  private readonly calls = new Map<number, { name: string; arguments: string }>();

  add(piece: StreamedToolCall): void {
    const index = piece.index ?? 0;
    const call = this.calls.get(index) ?? { name: "", arguments: "" };
    call.name += piece.function?.name ?? "";
    call.arguments += piece.function?.arguments ?? "";
    this.calls.set(index, call);
  }

  answer(thought: string): ToolCallAnswer {
    const ordered = [...this.calls.entries()].sort((a, b) => a[0] - b[0]).map((entry) => entry[1]);
    return {
      thought,
      tool_calls: ordered.map((call) => {
        let parsed: unknown;
        try {
          parsed = call.arguments.trim() === "" ? {} : JSON.parse(call.arguments);
        } catch {
          throw new DuckError(ErrorCode.ModelOutputInvalid, `the model called ${call.name || "a tool"} with arguments that are not JSON: ${call.arguments.slice(0, 200)}`);
        }
        if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
          throw new DuckError(ErrorCode.ModelOutputInvalid, `the model called ${call.name || "a tool"} with arguments that are not a JSON object`);
        }
        return { name: call.name, arguments: parsed as Record<string, unknown> };
      }),
    };
  }
}

/** What an OpenAI-compatible server says a call cost (llama.cpp's server, vLLM and the hosted APIs report cached tokens). */
interface ServerUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number };
}

/** A response body that should be JSON; a server that sends something else is the server's failure. */
async function jsonBodyOf(response: Response): Promise<unknown> {
  const text = await response.text();
  try {
    return JSON.parse(text);
  } catch {
    throw new DuckError(ErrorCode.ModelServerFailed, `the model server answered ${response.status} with a body that is not JSON: ${text.slice(0, 200)}`);
  }
}
