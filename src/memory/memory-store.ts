import type { Statement } from "better-sqlite3";
import type { MemoryEntry, MemoryHit, MemoryKind } from "../contracts/index.js";
import type { SqliteDatabase } from "../storage/open-database.js";

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
  private readonly insertStatement: Statement;
  private readonly getStatement: Statement<[number]>;
  private readonly listStatement: Statement<[number]>;
  private readonly searchStatement: Statement<[string, number]>;
  private readonly deleteStatement: Statement<[number]>;
  private readonly touchStatement: Statement<[string, number]>;

  constructor(
    private readonly db: SqliteDatabase,
    private readonly clock: () => Date = () => new Date(),
  ) {
    this.insertStatement = db.prepare(
      "INSERT INTO memories (text, kind, source_task, created_at) VALUES (@text, @kind, @source_task, @created_at)",
    );
    this.getStatement = db.prepare("SELECT * FROM memories WHERE id = ?");
    this.listStatement = db.prepare("SELECT * FROM memories ORDER BY created_at DESC, id DESC LIMIT ?");
    this.searchStatement = db.prepare(
      `SELECT m.*, bm25(memories_fts) AS rank FROM memories_fts
       JOIN memories m ON m.id = memories_fts.rowid
       WHERE memories_fts MATCH ? ORDER BY rank LIMIT ?`,
    );
    this.deleteStatement = db.prepare("DELETE FROM memories WHERE id = ?");
    this.touchStatement = db.prepare("UPDATE memories SET last_used_at = ? WHERE id = ?");
  }

  insert(input: { text: string; kind: MemoryKind; source_task?: string | null }): MemoryEntry {
    const info = this.insertStatement.run({
      text: input.text,
      kind: input.kind,
      source_task: input.source_task ?? null,
      created_at: this.clock().toISOString(),
    });
    return this.get(Number(info.lastInsertRowid))!;
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
