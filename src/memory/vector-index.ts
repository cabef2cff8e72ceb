import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { createHash } from "node:crypto";
import { chmodSync, existsSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import hnswlib from "hnswlib-node";

const { HierarchicalNSW } = hnswlib;

export interface VectorHit {
  id: number;
  /** Cosine: 1 - similarity; l2: squared distance. */
  distance: number;
}

export interface IndexMeta {
  count: number;
  checksum: string;
  dimension: number;
  space: "cosine" | "l2";
  model: string;
}

/** What the index must match: the ids that have embeddings, and the model that made them. */
export function indexChecksum(ids: readonly number[], model: string, dimension: number): string {
  const hash = createHash("sha256");
  hash.update(`${model}\u0000${dimension}\u0000`);
  for (const id of [...ids].sort((a, b) => a - b)) hash.update(`${id},`);
  return hash.digest("hex");
}

/**
 * The HNSW index of memory vectors, a file beside the database. Derived data: each label is the
 * memory row's id (an explicit, checked mapping), and a sidecar file records the count and a checksum
 * of the ids and model, so a stale, missing or corrupt index is detected and rebuilt from SQLite.
 */
export class VectorIndex {
  private index: InstanceType<typeof HierarchicalNSW>;
  private capacity = 0;
  private readonly ids = new Set<number>();

  constructor(
    private readonly file: string | null,
    readonly dimension: number,
    readonly space: "cosine" | "l2",
    readonly model: string,
    private readonly efSearch = 64,
  ) {
    this.index = new HierarchicalNSW(space, dimension);
    this.reset(1024);
  }

  get size(): number {
    return this.ids.size;
  }

  has(id: number): boolean {
    return this.ids.has(id);
  }

  /** The ids in the index, in no particular order. */
  labels(): number[] {
    return [...this.ids];
  }

  /** Loads the saved index when it matches `expected`; returns false when it must be rebuilt. */
  load(expected: { ids: readonly number[] }): boolean {
    if (!this.file || !existsSync(this.file) || !existsSync(`${this.file}.json`)) return false;
    try {
      const meta = JSON.parse(readFileSync(`${this.file}.json`, "utf8")) as IndexMeta;
      const checksum = indexChecksum(expected.ids, this.model, this.dimension);
      if (meta.checksum !== checksum || meta.count !== expected.ids.length || meta.dimension !== this.dimension || meta.space !== this.space || meta.model !== this.model) return false;
      const index = new HierarchicalNSW(this.space, this.dimension);
      index.readIndexSync(this.file, true);
      const labels = index.getIdsList();
      // A set, not a search of the list per label: at 100k entries that was seconds of every start.
      const wanted = new Set(expected.ids);
      if (labels.length !== expected.ids.length || labels.some((label) => !wanted.has(label))) return false;
      this.index = index;
      this.index.setEf(this.efSearch);
      this.capacity = index.getMaxElements();
      this.ids.clear();
      for (const label of labels) this.ids.add(label);
      return true;
    } catch {
      return false;
    }
  }

  /** Builds the index afresh from rows. */
  rebuild(rows: ReadonlyArray<{ id: number; vector: Float32Array }>): void {
    this.reset(Math.max(1024, rows.length * 2));
    for (const row of rows) this.add(row.id, row.vector);
  }

  add(id: number, vector: Float32Array): void {
    if (vector.length !== this.dimension) throw new DuckError(ErrorCode.InvalidInput, `vector has ${vector.length} dimensions, the index ${this.dimension}`);
    if (this.ids.size + 1 > this.capacity) {
      this.capacity *= 2;
      this.index.resizeIndex(this.capacity);
    }
    this.index.addPoint(Array.from(vector), id, true);
    this.ids.add(id);
  }

  remove(id: number): void {
    if (!this.ids.has(id)) return;
    this.index.markDelete(id);
    this.ids.delete(id);
  }

  search(vector: Float32Array, k: number): VectorHit[] {
    if (this.ids.size === 0) return [];
    const result = this.index.searchKnn(Array.from(vector), Math.min(k, this.ids.size));
    return result.neighbors.map((id, index) => ({ id, distance: result.distances[index]! }));
  }

  /** Writes the index and its sidecar (atomically, each through a temporary file). */
  save(): void {
    if (!this.file) return;
    const meta: IndexMeta = { count: this.ids.size, checksum: indexChecksum([...this.ids], this.model, this.dimension), dimension: this.dimension, space: this.space, model: this.model };
    this.index.writeIndexSync(`${this.file}.tmp`);
    // Memory is the user's own text: as private as the database it is derived from.
    chmodSync(`${this.file}.tmp`, 0o600);
    renameSync(`${this.file}.tmp`, this.file);
    writeFileSync(`${this.file}.json.tmp`, JSON.stringify(meta), { mode: 0o600 });
    renameSync(`${this.file}.json.tmp`, `${this.file}.json`);
  }

  deleteFiles(): void {
    if (!this.file) return;
    rmSync(this.file, { force: true });
    rmSync(`${this.file}.json`, { force: true });
  }

  private reset(capacity: number): void {
    this.index = new HierarchicalNSW(this.space, this.dimension);
    this.index.initIndex({ maxElements: capacity, m: 16, efConstruction: 200, randomSeed: 100, allowReplaceDeleted: true });
    this.index.setEf(this.efSearch);
    this.capacity = capacity;
    this.ids.clear();
  }
}
