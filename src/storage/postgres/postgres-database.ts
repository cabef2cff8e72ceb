import { DuckError, ErrorCode } from "../../errors/duck-error.js";
import { POSTGRES_DIALECT, type SqlDatabase, type SqlRunResult, type SqlStatement, type SqlTransaction, type AnyFunction, type ArgumentsOf } from "../sql-database.js";
import { SyncPostgres, type PgResult, type PgStatement, type SyncPostgresOptions } from "./sync-postgres.js";

/**
 * The stores' SqlDatabase on a PostgreSQL server. Statements keep the stores' `?` and `@name`
 * placeholders (numbered `$n` here). Inside a transaction, writes are not sent one by one: they wait
 * until something needs an answer (a read, a written-row count, the commit), then go together with it
 * in one round trip, so a commit of many rows costs about one trip to the server. A write that fails
 * therefore reports at that point, still inside the transaction, which then rolls back whole.
 */

/** Where each `$n` takes its value from: a position among the arguments, or a name in an object argument. */
type Binding = number | string;

interface Translated {
  text: string;
  bindings: Binding[];
}

/** Writes waiting in a transaction, each with the slot its result lands in. */
interface Deferred {
  statement: PgStatement;
  result: PgResult | null;
}

export class PostgresDatabase implements SqlDatabase {
  readonly [POSTGRES_DIALECT] = true;
  private connection: SyncPostgres;
  /** The first error of the open transaction: reported at its end even if the caller caught it, since PostgreSQL rolls it all back. */
  private transactionError: unknown = null;
  private readonly translations = new Map<string, Translated>();
  private queue: Deferred[] = [];
  /** Nesting depth of transactions: 0 outside, 1 in a transaction, more in savepoints. */
  private depth = 0;
  /** Whether BEGIN reached the server: a transaction whose statements never left needs no ROLLBACK. */
  private begun = false;

  constructor(
    private readonly url: string,
    private readonly options: SyncPostgresOptions = {},
  ) {
    this.connection = new SyncPostgres(url, options);
  }

  prepare(sql: string): SqlStatement {
    let translated = this.translations.get(sql);
    if (!translated) {
      translated = translatePlaceholders(sql);
      this.translations.set(sql, translated);
    }
    return new PostgresStatement(this, translated);
  }

  /** Runs SQL without values, possibly several statements (a migration), at once. */
  exec(sql: string): void {
    this.send([{ sql, params: [] }]);
  }

  /** Runs one statement and returns its rows, with whatever writes were waiting sent before it. */
  query(statement: PgStatement): PgResult {
    return this.send([statement]).at(-1)!;
  }

  /** A write: sent now outside a transaction, kept for the next round trip inside one. */
  write(statement: PgStatement): SqlRunResult {
    if (this.depth === 0) {
      const { rowCount } = this.query(statement);
      return { changes: rowCount, lastInsertRowid: 0 };
    }
    const deferred: Deferred = { statement, result: null };
    this.queue.push(deferred);
    const flush = () => this.flush();
    return {
      get changes() {
        if (!deferred.result) flush();
        return deferred.result!.rowCount;
      },
      // PostgreSQL has no row ids: the stores write `RETURNING id` and read it with get().
      lastInsertRowid: 0,
    };
  }

  transaction<Work extends AnyFunction>(work: Work): SqlTransaction<Work> {
    const wrapped = ((...args: ArgumentsOf<Work>) => this.inTransaction(work, args, false)) as SqlTransaction<Work>;
    wrapped.immediate = (...args: ArgumentsOf<Work>) => this.inTransaction(work, args, true);
    return wrapped;
  }

  close(): void {
    this.queue = [];
    this.connection.close();
  }

  private inTransaction<Work extends AnyFunction>(work: Work, args: ArgumentsOf<Work>, immediate: boolean): ReturnType<Work> {
    if (this.depth > 0) return this.inSavepoint(work, args);
    this.depth = 1;
    this.begun = false;
    this.transactionError = null;
    this.defer("BEGIN");
    // SQLite lets one writer at a time begin an immediate transaction; this lock does the same across
    // every process on the database, held until the transaction ends.
    if (immediate) this.defer("SELECT pg_advisory_xact_lock(7271163)");
    try {
      const result = work(...args) as ReturnType<Work>;
      if (this.transactionError) throw this.transactionError;
      const commit: Deferred = { statement: { sql: "COMMIT", params: [] }, result: null };
      this.queue.push(commit);
      this.flush();
      if (commit.result?.command === "ROLLBACK") throw new DuckError(ErrorCode.StorageFailed, "PostgreSQL rolled the transaction back: one of its statements failed");
      return result;
    } catch (error) {
      this.queue = [];
      if (this.begun) {
        try {
          this.connection.query("ROLLBACK");
        } catch {
          // A connection that failed has no transaction left to roll back.
        }
      }
      throw error;
    } finally {
      this.depth = 0;
      this.begun = false;
      this.transactionError = null;
    }
  }

  private inSavepoint<Work extends AnyFunction>(work: Work, args: ArgumentsOf<Work>): ReturnType<Work> {
    const name = `ducklm_${this.depth}`;
    this.depth += 1;
    this.defer(`SAVEPOINT ${name}`);
    try {
      const result = work(...args) as ReturnType<Work>;
      this.defer(`RELEASE SAVEPOINT ${name}`);
      return result;
    } catch (error) {
      // Writes of this savepoint that never left are dropped with it; those that did are rolled back,
      // and the transaction is sound again.
      this.transactionError = null;
      this.defer(`ROLLBACK TO SAVEPOINT ${name}`);
      this.defer(`RELEASE SAVEPOINT ${name}`);
      throw error;
    } finally {
      this.depth -= 1;
    }
  }

  private defer(sql: string): void {
    this.queue.push({ statement: { sql, params: [] }, result: null });
  }

  private flush(): void {
    if (this.queue.length > 0) this.send([]);
  }

  /** Sends what waits and then `statements`, in one round trip; returns the results of `statements`. */
  private send(statements: PgStatement[]): PgResult[] {
    const waiting = this.queue;
    this.queue = [];
    // A connection that was lost is replaced between transactions; inside one, the transaction is lost with it.
    if (!this.connection.open && this.depth === 0) this.connection = new SyncPostgres(this.url, this.options);
    if (waiting.length > 0 && this.depth > 0) this.begun = true;
    let results: PgResult[];
    try {
      results = this.connection.run([...waiting.map((deferred) => deferred.statement), ...statements]);
    } catch (error) {
      if (this.depth > 0) this.transactionError ??= error;
      throw error;
    }
    waiting.forEach((deferred, index) => (deferred.result = results[index]!));
    const answered = results.slice(waiting.length);
    for (const result of answered) for (const row of result.rows) for (const key in row) if (typeof row[key] === "string") row[key] = fromStoredText(row[key]);
    return answered;
  }
}

/**
 * PostgreSQL text cannot hold U+0000, which tool outputs and task texts may contain, and SQLite keeps.
 * It is stored as ESCAPE + "0", and ESCAPE itself (a private-use character) as ESCAPE twice, so that
 * every string comes back exactly as written and equal strings stay equal in SQL.
 */
const ESCAPE = "\uF8FF";

export function toStoredText(text: string): string {
  if (!text.includes("\0") && !text.includes(ESCAPE)) return text;
  return text.replaceAll(ESCAPE, ESCAPE + ESCAPE).replaceAll("\0", ESCAPE + "0");
}

export function fromStoredText(text: string): string {
  if (!text.includes(ESCAPE)) return text;
  return text.replace(/\uF8FF([\uF8FF0])/g, (_, escaped: string) => (escaped === "0" ? "\0" : ESCAPE));
}

class PostgresStatement implements SqlStatement {
  private plucked = false;

  constructor(
    private readonly db: PostgresDatabase,
    private readonly translated: Translated,
  ) {}

  run(...params: unknown[]): SqlRunResult {
    return this.db.write(this.bound(params));
  }

  get(...params: unknown[]): unknown {
    const [row] = this.db.query(this.bound(params)).rows;
    return row === undefined ? undefined : this.shaped(row);
  }

  all(...params: unknown[]): unknown[] {
    return this.db.query(this.bound(params)).rows.map((row) => this.shaped(row));
  }

  pluck(toggle = true): this {
    this.plucked = toggle;
    return this;
  }

  private shaped(row: Record<string, unknown>): unknown {
    if (!this.plucked) return row;
    for (const key in row) return row[key];
    return undefined;
  }

  private bound(params: unknown[]): PgStatement {
    const { text, bindings } = this.translated;
    const named = params.length === 1 && isPlainObject(params[0]) ? (params[0] as Record<string, unknown>) : null;
    const values = bindings.map((binding) => {
      const value = typeof binding === "number" ? params[binding] : named?.[binding];
      if (value === undefined) throw new DuckError(ErrorCode.Internal, `no value bound to ${typeof binding === "number" ? `parameter ${binding + 1}` : `@${binding}`} of: ${text}`);
      return typeof value === "string" ? toStoredText(value) : value;
    });
    return { sql: text, params: values };
  }
}

function isPlainObject(value: unknown): boolean {
  return typeof value === "object" && value !== null && !Buffer.isBuffer(value) && !ArrayBuffer.isView(value) && !Array.isArray(value);
}

/**
 * `?` and `@name` placeholders as `$1`, `$2`… with where each takes its value from. A name used twice
 * is one `$n`. Quoted strings, quoted identifiers and comments are left as they are.
 */
export function translatePlaceholders(sql: string): Translated {
  const bindings: Binding[] = [];
  const numberOfName = new Map<string, number>();
  let positional = 0;
  let text = "";
  for (let i = 0; i < sql.length; i++) {
    const char = sql[i]!;
    if (char === "'" || char === '"') {
      const end = closingQuote(sql, i, char);
      text += sql.slice(i, end + 1);
      i = end;
    } else if (char === "/" && sql[i + 1] === "*") {
      const end = sql.indexOf("*/", i + 2);
      const stop = end === -1 ? sql.length : end + 2;
      text += sql.slice(i, stop);
      i = stop - 1;
    } else if (char === "-" && sql[i + 1] === "-") {
      const end = sql.indexOf("\n", i);
      const stop = end === -1 ? sql.length : end;
      text += sql.slice(i, stop);
      i = stop - 1;
    } else if (char === "?") {
      bindings.push(positional++);
      text += `$${bindings.length}`;
    } else if (char === "@" && /[A-Za-z_]/.test(sql[i + 1] ?? "")) {
      const name = /^[A-Za-z_][A-Za-z0-9_]*/.exec(sql.slice(i + 1))![0];
      let number = numberOfName.get(name);
      if (number === undefined) {
        bindings.push(name);
        number = bindings.length;
        numberOfName.set(name, number);
      }
      text += `$${number}`;
      i += name.length;
    } else {
      text += char;
    }
  }
  return { text, bindings };
}

/** Where a quoted string or identifier starting at `start` ends; a doubled quote is part of it. */
function closingQuote(sql: string, start: number, quote: string): number {
  let i = start + 1;
  while (i < sql.length) {
    if (sql[i] === quote) {
      if (sql[i + 1] === quote) i += 2;
      else return i;
    } else {
      i += 1;
    }
  }
  return sql.length - 1;
}
