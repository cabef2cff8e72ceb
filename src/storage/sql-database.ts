/**
 * The part of a SQL connection the stores use: prepared statements run synchronously, and functions
 * wrapped in a transaction. better-sqlite3's Database has exactly this shape, so SQLite pays nothing
 * for it; PostgresDatabase gives the same on a PostgreSQL server. SQL written to it keeps to what
 * both dialects accept (`?` or `@name` placeholders, ON CONFLICT, RETURNING, octet_length); the few
 * statements that cannot are chosen by `dialectOf`.
 */

export interface SqlRunResult {
  changes: number;
  lastInsertRowid: number | bigint;
}

export interface SqlStatement<Params extends unknown[] = unknown[]> {
  run(...params: Params): SqlRunResult;
  get(...params: Params): unknown;
  all(...params: Params): unknown[];
  /** Rows as their first column's value. */
  pluck(toggle?: boolean): this;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- better-sqlite3 types its transactions over any arguments
type AnyFunction = (...args: any[]) => unknown;
type ArgumentsOf<Work extends AnyFunction> = Work extends (...args: infer A) => unknown ? A : never;

/** A function that runs inside a transaction, committed when it returns and rolled back when it throws. */
export interface SqlTransaction<Work extends AnyFunction> {
  (...args: ArgumentsOf<Work>): ReturnType<Work>;
  /** The same, serialised with every other writer from its start (SQLite's BEGIN IMMEDIATE). */
  immediate(...args: ArgumentsOf<Work>): ReturnType<Work>;
}

export type { AnyFunction, ArgumentsOf };

export interface SqlDatabase {
  prepare(sql: string): SqlStatement;
  transaction<Work extends AnyFunction>(work: Work): SqlTransaction<Work>;
}

export type SqlDialect = "sqlite" | "postgres";

/** Marks a connection as PostgreSQL; anything without it is better-sqlite3. */
export const POSTGRES_DIALECT = Symbol.for("ducklm.sql-dialect.postgres");

export function dialectOf(db: SqlDatabase): SqlDialect {
  return POSTGRES_DIALECT in db ? "postgres" : "sqlite";
}

/** A write refused because a row with the same key exists: another writer got there first. */
export function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  // SQLite's code for a UNIQUE constraint, and PostgreSQL's SQLSTATE unique_violation.
  return code === "SQLITE_CONSTRAINT_UNIQUE" || code === "23505";
}
