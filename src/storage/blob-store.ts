import { createHash } from "node:crypto";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { dialectOf, type SqlDatabase, type SqlStatement } from "./sql-database.js";

/**
 * Strings at least this long are stored once, in the `blobs` table, and referred to by their hash
 * wherever they appear: a tool's output is in its `tool-result`, the answer, the checkpoint (twice)
 * and the task row, and would otherwise be stored that many times.
 */
export const BLOB_MIN_CHARS = 8 * 1024;

/** How a stored string says "the text is blob <sha256>". A NUL cannot start a string anyone meant to keep raw (see `pack`). */
const REFERENCE_PREFIX = "\u0000blob:";
/** The prefix as it appears inside JSON text: how a caller can tell, without parsing, that there is nothing to resolve. */
const REFERENCE_IN_JSON = '"\\u0000blob:';
const SHA256_HEX = /^[0-9a-f]{64}$/;

/**
 * The PostgreSQL advisory lock between blob writers (shared) and the removal of blobs nobody refers to
 * (exclusive): without it, a removal could miss a reference another worker has written but not yet
 * committed and delete the text it names. SQLite has one writer at a time and needs none.
 */
export const BLOB_REMOVAL_LOCK = 7271165;

/** Hashes of the longest strings written lately: a checkpoint holds the same output at every milestone. */
const HASHES_KEPT = 16;

/**
 * The content-addressed store behind long strings in events, checkpoints and task rows. `pack` turns
 * a value into JSON text with each long string replaced by a reference (the text stored once, with a
 * row saying which task refers to it); `unpack` turns such text back into the value it was. Writes run
 * inside the caller's transaction, so a reference never commits without its text.
 */
export class BlobStore {
  private readonly insertBlob: SqlStatement<[string, string]>;
  private readonly insertReference: SqlStatement<[string, string]>;
  private readonly selectBlob: SqlStatement<[string]>;
  private readonly holdOffRemoval: SqlStatement<[]> | null;
  private readonly recentHashes = new Map<string, string>();

  constructor(db: SqlDatabase) {
    this.insertBlob = db.prepare("INSERT INTO blobs (hash, text) VALUES (?, ?) ON CONFLICT DO NOTHING");
    this.insertReference = db.prepare("INSERT INTO blob_refs (task_id, hash) VALUES (?, ?) ON CONFLICT DO NOTHING");
    this.selectBlob = db.prepare("SELECT text FROM blobs WHERE hash = ?");
    this.holdOffRemoval = dialectOf(db) === "postgres" ? db.prepare(`SELECT pg_advisory_xact_lock_shared(${BLOB_REMOVAL_LOCK})`) : null;
  }

  /**
   * `value` as JSON text to store for `taskId`. `json` is its plain JSON when the caller already has
   * it (an event's payload is serialised once for storage and streaming alike).
   */
  pack(taskId: string, value: unknown, json = JSON.stringify(value)): string {
    // Text shorter than a blob holds no long string; only a string that looks like a reference needs care.
    if (json.length < BLOB_MIN_CHARS && !json.includes(REFERENCE_IN_JSON)) return json;
    return JSON.stringify(value, (_key, item: unknown) => (typeof item === "string" && needsBlob(item) ? this.store(taskId, item) : item));
  }

  /** One stored string (a task row's answer): the reference when it is long, else the text itself. */
  packText(taskId: string, text: string | null): string | null {
    return text !== null && needsBlob(text) ? this.store(taskId, text) : text;
  }

  /** Whether `packText` stores this text as it is, with no blob (and so with no write of its own). */
  keepsInline(text: string): boolean {
    return !needsBlob(text);
  }

  /** The value `pack` was given. Throws DUCK_ERR_DATABASE_CORRUPT when a referred text is missing. */
  unpack(json: string): unknown {
    return unpackJson(json, (hash) => this.text(hash));
  }

  unpackText(stored: string | null): string | null {
    return stored !== null && stored.startsWith(REFERENCE_PREFIX) ? this.text(stored) : stored;
  }

  private store(taskId: string, text: string): string {
    let hash = this.recentHashes.get(text);
    if (hash === undefined) {
      hash = createHash("sha256").update(text).digest("hex");
      this.recentHashes.set(text, hash);
      if (this.recentHashes.size > HASHES_KEPT) this.recentHashes.delete(this.recentHashes.keys().next().value!);
    }
    // Held to the end of the caller's transaction, so the reference commits before any removal looks for it.
    this.holdOffRemoval?.run();
    this.insertBlob.run(hash, text);
    this.insertReference.run(taskId, hash);
    return `${REFERENCE_PREFIX}${hash}`;
  }

  private text(reference: string): string {
    const hash = blobHashOf(reference);
    const row = hash ? (this.selectBlob.get(hash) as { text: string } | undefined) : undefined;
    if (!row) throw missingBlob(reference);
    return row.text;
  }
}

/**
 * Stored JSON text back into its value, each reference replaced by the text `lookup` finds for it
 * (`lookup` gets the whole reference and throws when there is none).
 */
export function unpackJson(json: string, lookup: (reference: string) => string): unknown {
  if (!json.includes(REFERENCE_IN_JSON)) return JSON.parse(json);
  return JSON.parse(json, (_key, item: unknown) => (typeof item === "string" && item.startsWith(REFERENCE_PREFIX) ? lookup(item) : item));
}

export function missingBlob(reference: string): DuckError {
  const hash = blobHashOf(reference);
  return new DuckError(ErrorCode.DatabaseCorrupt, `a stored text refers to blob ${hash ?? JSON.stringify(reference.slice(0, 80))}, which is missing: run \`ducklm db check\`, then \`ducklm db recover\``, {
    details: { blob: hash ?? null },
  });
}

/** The hash a reference names (what `db check` and `db recover` look up), or null for any other text. */
export function blobHashOf(reference: string): string | null {
  if (!reference.startsWith(REFERENCE_PREFIX)) return null;
  const hash = reference.slice(REFERENCE_PREFIX.length);
  return SHA256_HEX.test(hash) ? hash : null;
}

/** Whether a blob's text is the one its hash names. */
export function blobMatchesHash(hash: string, text: string): boolean {
  return createHash("sha256").update(text).digest("hex") === hash;
}

/** Long strings, and any string that would read back as a reference: stored as a blob, never raw. */
function needsBlob(text: string): boolean {
  return text.length >= BLOB_MIN_CHARS || text.startsWith(REFERENCE_PREFIX);
}

