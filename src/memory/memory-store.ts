import type { MemoryEntry, MemoryHit, MemoryKind } from "../contracts/index.js";
import { dialectOf, type SqlDatabase, type SqlStatement } from "../storage/sql-database.js";

interface MemoryRow {
  id: number;
  text: string;
  kind: MemoryKind;
  source_task: string | null;
  weight: number;
  pinned: number;
  created_at: string;
  last_used_at: string | null;
  embedding_model: string | null;
}

// The embedding blob stays in SQLite; entries handed out do not carry it.
const COLUMNS = "id, text, kind, source_task, weight, pinned, created_at, last_used_at, embedding_model";

function toEntry(row: MemoryRow): MemoryEntry {
  return { ...row, pinned: row.pinned === 1 };
}

/** Words of a free-text query as an FTS5 expression that cannot be a syntax error. */
export function toFtsQuery(query: string): string | null {
  const words = query.toLowerCase().match(/[\p{L}\p{N}_]+/gu) ?? [];
  const unique = [...new Set(words)].filter((word) => word.length > 1).slice(0, 32);
  if (unique.length === 0) return null;
  return unique.map((word) => `"${word}"`).join(" OR ");
}

/** Long-term memory rows with their FTS5 keyword index (kept by triggers in the same transaction). */
export class MemoryStore {
  private readonly insertStatement: SqlStatement;
  private readonly getStatement: SqlStatement<[number]>;
  private readonly listStatement: SqlStatement<[number]>;
  private readonly searchStatement: SqlStatement<[string, number]>;
  private readonly deleteStatement: SqlStatement<[number]>;
  private readonly touchStatement: SqlStatement<[string, number]>;

  constructor(
    private readonly db: SqlDatabase,
    private readonly clock: () => Date = () => new Date(),
  ) {
    // PostgreSQL's identity never gives an id twice; on SQLite the next id is past the highest ever used.
    this.insertStatement = db.prepare(
      dialectOf(db) === "postgres"
        ? "INSERT INTO memories (text, kind, source_task, created_at, embedding, embedding_model) VALUES (@text, @kind, @source_task, @created_at, @embedding, @embedding_model) RETURNING id"
        : "INSERT INTO memories (id, text, kind, source_task, created_at, embedding, embedding_model) VALUES ((SELECT last + 1 FROM memory_id_high), @text, @kind, @source_task, @created_at, @embedding, @embedding_model) RETURNING id",
    );
    this.getStatement = db.prepare(`SELECT ${COLUMNS} FROM memories WHERE id = ?`);
    this.listStatement = db.prepare(`SELECT ${COLUMNS} FROM memories ORDER BY created_at DESC, id DESC LIMIT ?`);
    // Both give a rank where lower is better: FTS5's BM25 is negative, ts_rank is negated.
    this.searchStatement = db.prepare(
      dialectOf(db) === "postgres"
        ? `SELECT ${COLUMNS}, -ts_rank(search, query) AS rank FROM memories, websearch_to_tsquery('simple', ?) AS query
            WHERE search @@ query ORDER BY rank, id LIMIT ?`
        : `SELECT ${COLUMNS.split(", ").map((column) => `m.${column}`).join(", ")}, bm25(memories_fts) AS rank FROM memories_fts
            JOIN memories m ON m.id = memories_fts.rowid
            WHERE memories_fts MATCH ? ORDER BY rank LIMIT ?`,
    );
    this.deleteStatement = db.prepare("DELETE FROM memories WHERE id = ?");
    this.touchStatement = db.prepare("UPDATE memories SET last_used_at = ? WHERE id = ?");
  }

  insert(input: { text: string; kind: MemoryKind; source_task?: string | null; embedding?: Float32Array | null; embedding_model?: string | null }): MemoryEntry {
    const inserted = this.insertStatement.get({
      text: input.text,
      kind: input.kind,
      source_task: input.source_task ?? null,
      created_at: this.clock().toISOString(),
      embedding: input.embedding ? Buffer.from(input.embedding.buffer, input.embedding.byteOffset, input.embedding.byteLength) : null,
      embedding_model: input.embedding && input.embedding_model ? input.embedding_model : null,
    });
    return this.get((inserted as { id: number }).id)!;
  }

  /** Raises an entry's weight (a near-duplicate was seen again) and marks it used. */
  reinforce(id: number, amount = 1): MemoryEntry | null {
    this.db.prepare("UPDATE memories SET weight = weight + ?, last_used_at = ? WHERE id = ?").run(amount, this.clock().toISOString(), id);
    return this.get(id);
  }

  setPinned(id: number, pinned: boolean): boolean {
    return this.db.prepare("UPDATE memories SET pinned = ? WHERE id = ?").run(pinned ? 1 : 0, id).changes > 0;
  }

  setWeight(id: number, weight: number): void {
    this.db.prepare("UPDATE memories SET weight = ? WHERE id = ?").run(weight, id);
  }

  setEmbedding(id: number, embedding: Float32Array, model: string): void {
    this.db.prepare("UPDATE memories SET embedding = ?, embedding_model = ? WHERE id = ?").run(Buffer.from(embedding.buffer, embedding.byteOffset, embedding.byteLength), model, id);
  }

  findExact(text: string): MemoryEntry | null {
    const row = this.db.prepare(`SELECT ${COLUMNS} FROM memories WHERE text = ? ORDER BY id LIMIT 1`).get(text) as MemoryRow | undefined;
    return row ? toEntry(row) : null;
  }

  /** Rows whose embedding was made by `model`: what the vector index is built from. */
  embeddings(model: string): Array<{ id: number; vector: Float32Array }> {
    const rows = this.db.prepare("SELECT id, embedding FROM memories WHERE embedding IS NOT NULL AND embedding_model = ? ORDER BY id").all(model) as Array<{ id: number; embedding: Buffer }>;
    return rows.map((row) => ({ id: row.id, vector: new Float32Array(row.embedding.buffer.slice(row.embedding.byteOffset, row.embedding.byteOffset + row.embedding.byteLength)) }));
  }

  /** How many rows have an embedding of `model`, and the highest id among them: a cheap test of whether the index is in step. */
  embeddingSummary(model: string): { count: number; max_id: number | null } {
    return this.db.prepare("SELECT COUNT(*) AS count, MAX(id) AS max_id FROM memories WHERE embedding IS NOT NULL AND embedding_model = ?").get(model) as { count: number; max_id: number | null };
  }

  idsWithEmbedding(model: string): number[] {
    return (this.db.prepare("SELECT id FROM memories WHERE embedding IS NOT NULL AND embedding_model = ? ORDER BY id").all(model) as Array<{ id: number }>).map((row) => row.id);
  }

  /** What cleanup weighs: every entry's weight, age, use and size. */
  cleanupView(): Array<{ id: number; weight: number; pinned: boolean; created_at: string; last_used_at: string | null; bytes: number }> {
    const rows = this.db.prepare("SELECT id, weight, pinned, created_at, last_used_at, octet_length(text) AS bytes FROM memories").all() as Array<{ id: number; weight: number; pinned: number; created_at: string; last_used_at: string | null; bytes: number }>;
    return rows.map((row) => ({ ...row, pinned: row.pinned === 1 }));
  }

  stats(): { entries: number; pinned: number; bytes: number; with_embedding: number; by_kind: Record<string, number> } {
    const totals = this.db.prepare("SELECT COUNT(*) AS entries, COALESCE(SUM(pinned), 0) AS pinned, COALESCE(SUM(octet_length(text)), 0) AS bytes, COUNT(embedding) AS with_embedding FROM memories").get() as { entries: number; pinned: number; bytes: number; with_embedding: number };
    const kinds = this.db.prepare("SELECT kind, COUNT(*) AS n FROM memories GROUP BY kind").all() as Array<{ kind: string; n: number }>;
    return { ...totals, by_kind: Object.fromEntries(kinds.map((row) => [row.kind, row.n])) };
  }

  get(id: number): MemoryEntry | null {
    const row = this.getStatement.get(id) as MemoryRow | undefined;
    return row ? toEntry(row) : null;
  }

  list(limit = 50): MemoryEntry[] {
    return (this.listStatement.all(limit) as MemoryRow[]).map(toEntry);
  }

  /** Keyword search (BM25). Higher score is better. */
  search(query: string, limit: number): MemoryHit[] {
    const fts = toFtsQuery(query);
    if (!fts) return [];
    const rows = this.searchStatement.all(fts, limit) as Array<MemoryRow & { rank: number }>;
    return rows.map(({ rank, ...row }) => ({ entry: toEntry(row), score: -rank, matched_by: ["keyword"] }));
  }

  markUsed(ids: readonly number[]): void {
    const time = this.clock().toISOString();
    this.db.transaction(() => {
      for (const id of ids) this.touchStatement.run(time, id);
    })();
  }

  delete(id: number): boolean {
    return this.deleteStatement.run(id).changes > 0;
  }
}
