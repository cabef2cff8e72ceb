import type { ModelRole } from "../contracts/index.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import type { EmbeddingProvider, JsonRequest, JsonResult, ModelProvider, TextRequest } from "./model-provider.js";
import type { ResolvedRole } from "./model-roles.js";

type Backend = ModelProvider & Partial<EmbeddingProvider>;

/**
 * Sends each role to the backend of the model that serves it: a local GGUF file (llama.cpp) or an
 * OpenAI-compatible server. Fallbacks are resolved once over both, so a missing local critic can run
 * on a remote JSON compiler and the other way round.
 */
export class RoutedModelProvider implements ModelProvider, EmbeddingProvider {
  constructor(
    private readonly roles: Map<ModelRole, ResolvedRole>,
    private readonly local: Backend | null,
    private readonly remote: Backend | null,
  ) {}

  private route(role: ModelRole): Backend {
    const servedBy = this.roles.get(role)?.servedBy;
    const backend = servedBy ? (this.roles.get(servedBy)?.remote ? this.remote : this.local) : null;
    if (!backend) throw new DuckError(ErrorCode.ModelUnavailable, `no model serves role ${role} (config/models.json)`, { details: { role } });
    return backend;
  }

  hasRole(role: ModelRole): boolean {
    return (this.roles.get(role)?.servedBy ?? null) !== null;
  }

  async generateText(request: TextRequest): Promise<string> {
    return this.route(request.role).generateText(request);
  }

  async generateJson<T>(request: JsonRequest<T>): Promise<JsonResult<T>> {
    return this.route(request.role).generateJson(request);
  }

  countTokens(role: ModelRole, text: string): number {
    return this.route(role).countTokens(role, text);
  }

  sharesModel(first: ModelRole, second: ModelRole): boolean {
    if (!this.hasRole(first) || !this.hasRole(second)) return false;
    const backend = this.route(first);
    return backend === this.route(second) && (backend.sharesModel?.(first, second) ?? false);
  }

  callsTools(role: ModelRole): boolean {
    return this.hasRole(role) && (this.route(role).callsTools?.(role) ?? false);
  }

  releaseCache(prefix: string): void {
    this.local?.releaseCache?.(prefix);
    this.remote?.releaseCache?.(prefix);
  }

  async ensureLoaded(role: ModelRole): Promise<void> {
    await this.route(role).ensureLoaded?.(role);
  }

  async embed(texts: readonly string[], options?: { signal?: AbortSignal }): Promise<Float32Array[]> {
    const backend = this.route("embeddings");
    if (!backend.embed) throw new DuckError(ErrorCode.ModelUnavailable, "the embeddings role's backend cannot embed");
    return backend.embed(texts, options);
  }

  get embeddingModel(): string | null {
    return this.hasRole("embeddings") ? (this.route("embeddings").embeddingModel ?? null) : null;
  }

  get embeddingDimension(): number | null {
    return this.roles.get("embeddings")?.config?.dimension ?? null;
  }

  async dispose(): Promise<void> {
    await Promise.all([this.local?.dispose(), this.remote?.dispose()]);
  }
}
