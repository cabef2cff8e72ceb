import { createHash, randomBytes } from "node:crypto";
import type { SqlDatabase, SqlStatement } from "../storage/sql-database.js";

/** How long a printed login link works. */
export const LOGIN_CODE_TTL_MS = 15 * 60 * 1000;
/** How long a browser stays logged in without coming back. */
export const SESSION_TTL_MS = 30 * 24 * 60 * 60 * 1000;

function hashOf(secret: string): string {
  return createHash("sha256").update(secret, "utf8").digest("hex");
}

/**
 * One-time login codes (printed by `ducklm serve` and `ducklm login`) and the browser sessions they
 * turn into. Only hashes are stored, so the database never holds a usable code or session; it lives
 * in DuckLM's home, which no task can read.
 */
export class LoginStore {
  private readonly insert: SqlStatement<[string, string, string, string]>;
  private readonly find: SqlStatement<[string, string, string]>;
  private readonly remove: SqlStatement<[string]>;
  private readonly spend: SqlStatement<[string]>;
  private readonly touch: SqlStatement<[string, string]>;
  private readonly purge: SqlStatement<[string]>;

  constructor(db: SqlDatabase, private readonly clock: () => Date = () => new Date()) {
    this.insert = db.prepare("INSERT INTO web_logins (hash, kind, created_at, expires_at) VALUES (?, ?, ?, ?)");
    this.find = db.prepare("SELECT expires_at FROM web_logins WHERE hash = ? AND kind = ? AND expires_at > ?");
    this.remove = db.prepare("DELETE FROM web_logins WHERE hash = ?");
    this.spend = db.prepare("DELETE FROM web_logins WHERE hash = ? AND kind = 'code' RETURNING expires_at");
    this.touch = db.prepare("UPDATE web_logins SET expires_at = ? WHERE hash = ?");
    this.purge = db.prepare("DELETE FROM web_logins WHERE expires_at <= ?");
  }

  private issue(kind: "code" | "session", ttlMs: number): string {
    const now = this.clock();
    this.purge.run(now.toISOString());
    const secret = randomBytes(24).toString("base64url");
    this.insert.run(hashOf(secret), kind, now.toISOString(), new Date(now.getTime() + ttlMs).toISOString());
    return secret;
  }

  /** A new login code, good for one visit within `LOGIN_CODE_TTL_MS`. */
  issueCode(): string {
    return this.issue("code", LOGIN_CODE_TTL_MS);
  }

  /** Spends a login code and opens a session for it; null when the code is unknown, used or expired. */
  redeemCode(code: string): string | null {
    // Spent whether or not it was still valid, in one statement: a code works once, even when two
    // servers on one database are handed it at the same moment.
    const spent = this.spend.get(hashOf(code)) as { expires_at: string } | undefined;
    return spent && spent.expires_at > this.clock().toISOString() ? this.issue("session", SESSION_TTL_MS) : null;
  }

  /** Whether a browser's session is valid; a valid one is extended. */
  checkSession(session: string): boolean {
    const hash = hashOf(session);
    const now = this.clock();
    const found = this.find.get(hash, "session", now.toISOString()) as { expires_at: string } | undefined;
    if (!found) return false;
    // Extended at most once an hour, so checking a session is a read, not a write.
    const extended = now.getTime() + SESSION_TTL_MS;
    if (extended - Date.parse(found.expires_at) > 60 * 60 * 1000) this.touch.run(new Date(extended).toISOString(), hash);
    return true;
  }

  endSession(session: string): void {
    this.remove.run(hashOf(session));
  }
}
