import type { Logger } from "pino";
import type { RuntimeConfig } from "../config/config-schemas.js";
import type { MemoryEntry, MemoryHit, MemoryKind } from "../contracts/index.js";
import type { EmbeddingProvider } from "../models/model-provider.js";
import type { MemoryStore } from "./memory-store.js";
import { VectorIndex } from "./vector-index.js";

/** Reciprocal-rank fusion constant: the usual 60 keeps one list's top hit from drowning the other. */
export const RRF_K = 60;

/** How often recall looks whether other processes changed the rows the vector index is built from. */
const CATCH_UP_EVERY_MS = 1_000;

export interface RecallFilter {
  kinds?: readonly MemoryKind[];
  /** Only entries created within this many days. */
  maxAgeDays?: number;
}

/** A write decided before its transaction: either a new row (with its vector) or a reinforcement. */
export type PreparedMemoryWrite =
  | { action: "insert"; text: string; kind: MemoryKind; embedding: Float32Array | null }
  | { action: "reinforce"; text: string; kind: MemoryKind; existing: MemoryEntry; similarity: number };

export interface MemoryEmbedder {
  provider: EmbeddingProvider;
  /** What made the vectors (the embedding model file): a change means a rebuild. */
  model: string;
  dimension: number;
}

/**
 * Long-term memory: SQLite rows (the source of truth, with their FTS5 keyword index) and, when an
 * embedding model is present, an HNSW vector index derived from them. Recall fuses the keyword and
 * vector rankings; near-duplicates reinforce the entry they repeat; cleanup decays and bounds.
 */
export class MemoryService {
  index: VectorIndex | null = null;
  private dirty = false;
  private lastCatchUp = 0;

  constructor(
    readonly store: MemoryStore,
    private readonly embedder: MemoryEmbedder | null,
    private readonly config: RuntimeConfig["memory"],
    private readonly logger: Logger,
    private readonly indexFile: string | null,
    private readonly clock: () => Date = () => new Date(),
  ) {}

  /** Loads the vector index, or rebuilds it from SQLite when it is missing, stale or corrupt; returns whether it was rebuilt. */
  async open(): Promise<{ rebuilt: boolean; missingEmbeddings: number }> {
    if (!this.embedder) return { rebuilt: false, missingEmbeddings: 0 };
    // models.json may leave the dimension out: then the model says it.
    const dimension = this.embedder.dimension > 0 ? this.embedder.dimension : ((await this.embedder.provider.embed(["dimension"]))[0]?.length ?? 0);
    this.index = new VectorIndex(this.indexFile, dimension, this.config.vector_space, this.embedder.model, this.config.ef_search);
    const ids = this.store.idsWithEmbedding(this.embedder.model);
    if (this.index.load({ ids })) return { rebuilt: false, missingEmbeddings: 0 };
    this.logger.warn({ entries: ids.length }, "memory vector index missing or out of step with the database: rebuilding it");
    this.index.rebuild(this.store.embeddings(this.embedder.model));
    this.index.save();
    return { rebuilt: true, missingEmbeddings: 0 };
  }

  get vectorSearch(): boolean {
    return this.index !== null;
  }

  /**
   * Brings the vector index into step with the rows, which another process may have changed since
   * (a `ducklm memory` command beside the server, or another worker on a shared PostgreSQL database):
   * adds what they embedded and drops what they deleted. A cheap count is read first, at most once a
   * second; the ids are read only when it differs.
   */
  catchUp(now = Date.now()): { added: number; removed: number } {
    const none = { added: 0, removed: 0 };
    if (!this.index || !this.embedder || now - this.lastCatchUp < CATCH_UP_EVERY_MS) return none;
    this.lastCatchUp = now;
    const index = this.index;
    const model = this.embedder.model;
    const summary = this.store.embeddingSummary(model);
    const labels = index.labels();
    let highest: number | null = null;
    for (const id of labels) if (highest === null || id > highest) highest = id;
    if (summary.count === index.size && summary.max_id === highest) return none;
    const stored = new Set(this.store.idsWithEmbedding(model));
    const gone = labels.filter((id) => !stored.has(id));
    for (const id of gone) index.remove(id);
    const missing = new Set([...stored].filter((id) => !index.has(id)));
    let added = 0;
    if (missing.size > 0) {
      for (const row of this.store.embeddings(model)) {
        if (!missing.has(row.id) || row.vector.length !== index.dimension) continue;
        index.add(row.id, row.vector);
        added += 1;
      }
    }
    if (added > 0 || gone.length > 0) {
      this.dirty = true;
      this.persistSoon();
    }
    return { added, removed: gone.length };
  }

  /** Runs cleanup now and then every `cleanup_interval_hours`. */
  /**
   * Cleans memory up a little after start-up and then every `cleanup_interval_hours`: off the start-up
   * path, whose time would otherwise grow with the memory table. A short CLI command exits first.
   */
  scheduleCleanup(firstAfterMs = FIRST_CLEANUP_AFTER_MS): void {
    this.firstCleanup = setTimeout(() => {
      this.firstCleanup = null;
      this.runCleanup();
      this.cleanupTimer = setInterval(() => this.runCleanup(), this.config.cleanup_interval_hours * 3_600_000);
      this.cleanupTimer.unref();
    }, firstAfterMs);
    this.firstCleanup.unref();
  }

  private cleanupTimer: NodeJS.Timeout | null = null;
  private firstCleanup: NodeJS.Timeout | null = null;

  private runCleanup(): void {
    try {
      const result = this.cleanup();
      if (result.removed.length > 0) this.logger.info({ removed: result.removed.length }, "memory cleanup");
    } catch (error) {
      this.logger.error({ err: error }, "memory cleanup failed");
    }
  }

  async embed(texts: readonly string[]): Promise<Array<Float32Array | null>> {
    if (!this.embedder) return texts.map(() => null);
    return this.embedder.provider.embed(texts);
  }

  /** Decides, before any transaction, whether `text` is new or repeats an entry closely enough to reinforce it. */
  async prepare(text: string, kind: MemoryKind): Promise<PreparedMemoryWrite> {
    const exact = this.store.findExact(text);
    if (exact) return { action: "reinforce", text, kind, existing: exact, similarity: 1 };
    const [embedding] = await this.embed([text]);
    this.catchUp();
    if (embedding && this.index) {
      // The nearest few, not only the nearest: the closest may be a different fact said alike.
      for (const near of this.index.search(embedding, NEAR_DUPLICATE_CANDIDATES)) {
        const similarity = this.config.vector_space === "cosine" ? 1 - near.distance : 1 / (1 + near.distance);
        if (similarity < this.config.near_duplicate_similarity) continue;
        const existing = this.store.get(near.id);
        if (existing && sameFacts(existing.text, text)) return { action: "reinforce", text, kind, existing, similarity };
      }
    }
    return { action: "insert", text, kind, embedding: embedding ?? null };
  }

  /** Applies a prepared write to SQLite (inside the caller's transaction); call `indexWrite` after it commits. */
  applyWrite(write: PreparedMemoryWrite, sourceTask: string | null): MemoryEntry {
    if (write.action === "reinforce") return this.store.reinforce(write.existing.id) ?? write.existing;
    return this.store.insert({ text: write.text, kind: write.kind, source_task: sourceTask, embedding: write.embedding, embedding_model: this.embedder?.model ?? null });
  }

  indexWrite(entry: MemoryEntry, write: PreparedMemoryWrite): void {
    if (write.action !== "insert" || !write.embedding || !this.index) return;
    this.index.add(entry.id, write.embedding);
    this.dirty = true;
  }

  /** Stores one entry now (tools, CLI, API): prepare, apply, index. */
  async remember(text: string, kind: MemoryKind, sourceTask: string | null): Promise<{ action: "insert" | "reinforce"; entry: MemoryEntry }> {
    const write = await this.prepare(text, kind);
    const entry = this.applyWrite(write, sourceTask);
    this.indexWrite(entry, write);
    this.persistSoon();
    return { action: write.action, entry };
  }

  /**
   * Top-k entries for a query: BM25 keyword ranks and vector ranks fused by reciprocal rank
   * (score = Σ 1 / (60 + rank)), filtered by kind and age. Keyword only without an embedding model.
   */
  async recall(query: string, k: number, filter: RecallFilter = {}): Promise<MemoryHit[]> {
    const pool = Math.max(k * 4, 20);
    this.catchUp();
    const keyword = this.store.search(query, pool);
    let vector: Array<{ id: number; distance: number }> = [];
    if (this.index && this.index.size > 0) {
      const [embedding] = await this.embed([query]);
      if (embedding) vector = this.index.search(embedding, pool);
    }
    return this.fuse(keyword.map((hit) => hit.entry.id), vector.map((hit) => hit.id), k, filter);
  }

  /** The fusion itself, exposed so that it can be checked exactly. */
  fuse(keywordIds: readonly number[], vectorIds: readonly number[], k: number, filter: RecallFilter = {}): MemoryHit[] {
    const scores = new Map<number, { score: number; matched_by: string[] }>();
    const add = (ids: readonly number[], source: string) =>
      ids.forEach((id, index) => {
        const current = scores.get(id) ?? { score: 0, matched_by: [] };
        current.score += 1 / (RRF_K + index + 1);
        current.matched_by.push(source);
        scores.set(id, current);
      });
    add(keywordIds, "keyword");
    add(vectorIds, "vector");
    const oldest = filter.maxAgeDays !== undefined ? new Date(this.clock().getTime() - filter.maxAgeDays * 86_400_000).toISOString() : null;
    const hits: MemoryHit[] = [];
    for (const [id, { score, matched_by }] of [...scores.entries()].sort((a, b) => b[1].score - a[1].score || a[0] - b[0])) {
      const entry = this.store.get(id);
      if (!entry) continue;
      if (filter.kinds && !filter.kinds.includes(entry.kind)) continue;
      if (oldest && entry.created_at < oldest) continue;
      hits.push({ entry, score: Math.round(score * 1e6) / 1e6, matched_by });
      if (hits.length >= k) break;
    }
    return hits;
  }

  forget(id: number): boolean {
    const removed = this.store.delete(id);
    if (removed) {
      this.index?.remove(id);
      this.dirty = true;
      this.persistSoon();
    }
    return removed;
  }

  pin(id: number, pinned: boolean): boolean {
    return this.store.setPinned(id, pinned);
  }

  /**
   * Decays weights by their time unused (half-life), removes old entries below the minimum weight,
   * then the weakest until the count and size limits hold. Pinned entries are never removed.
   */
  cleanup(): { removed: number[]; decayed: number } {
    const now = this.clock().getTime();
    const view = this.store.cleanupView();
    const removed: number[] = [];
    let decayed = 0;
    const halfLifeMs = this.config.half_life_days * 86_400_000;
    const minAge = this.config.min_age_days * 86_400_000;
    const survivors: typeof view = [];
    for (const entry of view) {
      const since = Date.parse(entry.last_used_at ?? entry.created_at);
      const factor = Math.pow(0.5, Math.max(0, now - since) / halfLifeMs);
      const weight = entry.weight * factor;
      if (Math.abs(weight - entry.weight) > 1e-9) {
        this.store.setWeight(entry.id, weight);
        decayed += 1;
      }
      const old = now - Date.parse(entry.created_at) >= minAge;
      if (!entry.pinned && old && weight < this.config.min_weight) removed.push(entry.id);
      else survivors.push({ ...entry, weight });
    }
    // Weakest and oldest first, until the bounds hold.
    const removable = survivors.filter((entry) => !entry.pinned).sort((a, b) => a.weight - b.weight || a.created_at.localeCompare(b.created_at));
    let count = survivors.length;
    let bytes = survivors.reduce((sum, entry) => sum + entry.bytes, 0);
    for (const entry of removable) {
      if (count <= this.config.max_entries && bytes <= this.config.max_bytes) break;
      removed.push(entry.id);
      count -= 1;
      bytes -= entry.bytes;
    }
    for (const id of removed) {
      this.store.delete(id);
      this.index?.remove(id);
    }
    if (removed.length > 0) {
      this.dirty = true;
      this.persistSoon();
    }
    return { removed, decayed };
  }

  /** Embeds every entry again (after a model change) and rebuilds the index. */
  async reindex(): Promise<number> {
    if (!this.index || !this.embedder) return 0;
    const entries = this.store.list(Number.MAX_SAFE_INTEGER);
    for (const entry of entries) {
      const [vector] = await this.embed([entry.text]);
      if (vector) this.store.setEmbedding(entry.id, vector, this.embedder.model);
    }
    this.index.rebuild(this.store.embeddings(this.embedder.model));
    this.index.save();
    return entries.length;
  }

  stats() {
    return { ...this.store.stats(), vector_index: this.index ? { entries: this.index.size, model: this.embedder!.model, space: this.config.vector_space } : null };
  }

  /** Saves the vector index when it changed (also at close). */
  persist(): void {
    if (!this.dirty || !this.index) return;
    this.index.save();
    this.dirty = false;
  }

  private persistTimer: NodeJS.Timeout | null = null;
  private persistSoon(): void {
    if (this.persistTimer) return;
    this.persistTimer = setTimeout(() => {
      this.persistTimer = null;
      this.persist();
    }, 1_000);
    this.persistTimer.unref();
  }

  close(): void {
    if (this.cleanupTimer) clearInterval(this.cleanupTimer);
    if (this.firstCleanup) clearTimeout(this.firstCleanup);
    if (this.persistTimer) clearTimeout(this.persistTimer);
    this.persistTimer = null;
    this.persist();
  }
}

/** How long after start-up the first memory cleanup runs. */
const FIRST_CLEANUP_AFTER_MS = 15_000;

/** Entries looked at as a possible repeat of a new one. */
const NEAR_DUPLICATE_CANDIDATES = 8;

/** Numbers, names with digits (`node-3`, `v2.1`), paths and quoted text: what makes two similar sentences different facts. */
function factTokens(text: string): string {
  const tokens = text.toLowerCase().match(/"[^"]*"|'[^']*'|`[^`]*`|[\w./~-]*\d[\w./~-]*|[\w.-]*\/[\w./~-]*/g) ?? [];
  const negated = /\b(not|no|never|none|without)\b|n't\b/i.test(text);
  return JSON.stringify([[...new Set(tokens)].sort(), negated]);
}

/**
 * Whether a similar sentence says the same fact: however close their embeddings, "host for
 * service 3 is node-3" and "… service 4 is node-4" are two facts, and so are a sentence and its
 * negation. A merge must never drop a distinct fact.
 */
export function sameFacts(a: string, b: string): boolean {
  return factTokens(a) === factTokens(b);
}

