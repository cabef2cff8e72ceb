import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { dialectOf, type SqlDatabase, type SqlStatement, type SqlTransaction } from "../storage/sql-database.js";
import { isProcessAlive } from "../utils/process-alive.js";

/** PostgreSQL's code for a transaction it ended to break a deadlock. */
const POSTGRES_DEADLOCK = "40P01";

/** Who holds a task: a process (CLI run, server, worker) identified by a random owner id, its PID and its host. */
export interface LeaseHolder {
  task_id: string;
  owner: string;
  pid: number;
  host: string;
  acquired_at: string;
  expires_at: string;
}

/**
 * `cancelRequested`: a cancel another process asked of the previous holder, which it did not carry
 * out: the new holder must. `previous`: the holder whose lease ran out, when another process held it
 * (it may be paused, not gone: a tool it started may still run).
 */
export type LeaseAttempt = { acquired: true; cancelRequested?: string; previous?: LeaseHolder } | { acquired: false; holder: LeaseHolder };

interface LeaseRow extends LeaseHolder {
  cancel_requested: string | null;
  epoch: number;
}

/** Owners open in this process: a lease of this PID whose owner is not among them was left by a runtime that is gone. */
const ownersInThisProcess = new Set<string>();

/**
 * Which process drives which task. A process takes a task's lease before it drives it and renews it
 * while it runs (`renew`, on a timer); another process never drives a task whose lease is live, only
 * one whose owner is gone: its lease expired, or its PID is dead on this machine. The same rows carry
 * a cancel asked for by another process to the owner, which sees it at its next renewal.
 */
export class TaskLeases {
  /** This process's id as an owner of leases. */
  readonly owner = randomUUID();
  private readonly host = hostname();
  /** The tasks this process holds, each with the epoch of its lease: the fencing token its commits carry. */
  private readonly held = new Map<string, number>();
  /** Tasks this process held until another took them over while it was paused: nothing more of theirs is written here. */
  private readonly lost = new Set<string>();
  /** Told of each task this process finds it has lost (at a commit or a renewal): its run must stop at once. */
  onLost: ((taskId: string) => void) | null = null;
  /** Tasks created here whose lease is written with their first commit (nobody else can know them before). */
  private readonly newClaims: string[] = [];
  /** What the commit in progress writes of `newClaims` and `pendingOffers`. */
  private claimsWriting: string[] = [];
  private offersWriting: string[] = [];
  /** Finished tasks whose lease rows go at the next renewal: nobody resumes a finished task, so no hurry. */
  private readonly finishedReleases = new Set<string>();
  /** Held tasks waiting in this process's line that another worker may take (`offer`). */
  private readonly offered = new Set<string>();
  /** Offers not committed yet: written with the next commit, like new claims. */
  private readonly pendingOffers = new Set<string>();
  private readonly markOffered: SqlStatement<[string, string]>;
  private readonly withdrawOffer: SqlStatement<[string, string]>;
  private readonly ownerOf: SqlStatement<[string]>;
  private readonly ownRows: SqlStatement<[string]>;
  private readonly offersElsewhere: SqlStatement<[string, number]>;
  private readonly takeOffer: SqlStatement;
  private readonly select: SqlStatement<[string]>;
  private readonly upsert: SqlStatement;
  private readonly remove: SqlStatement<[string, string]>;
  private readonly extend: SqlStatement<[string, string]>;
  private readonly expireNow: SqlStatement<[string, string]>;
  private readonly cancels: SqlStatement<[string]>;
  private readonly clearCancel: SqlStatement<[string, string]>;
  private readonly markCancel: SqlStatement<[string, string]>;
  private readonly unfinished: SqlStatement<[]>;
  private readonly forgetPruned: SqlStatement<[]>;
  private readonly acquireInTransaction: SqlTransaction<(taskId: string) => LeaseAttempt>;
  private readonly fenceOf: SqlStatement<[string]>;
  private readonly epochOf: SqlStatement<[string]>;

  constructor(
    private readonly db: SqlDatabase,
    private readonly options: { ttlMs: number; clock?: () => Date },
  ) {
    ownersInThisProcess.add(this.owner);
    this.select = db.prepare("SELECT * FROM task_leases WHERE task_id = ?");
    this.upsert = db.prepare(
      `INSERT INTO task_leases (task_id, owner, pid, host, acquired_at, expires_at, cancel_requested)
       VALUES (@task_id, @owner, @pid, @host, @now, @expires_at, NULL)
       ON CONFLICT(task_id) DO UPDATE SET owner = excluded.owner, pid = excluded.pid, host = excluded.host,
         acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, offered = 0, epoch = task_leases.epoch + 1`,
    );
    // In the commit's own transaction; on PostgreSQL the row is locked for it, so a takeover waits for the commit to end.
    this.fenceOf = db.prepare(`SELECT owner, epoch, pid, host FROM task_leases WHERE task_id = ?${dialectOf(db) === "postgres" ? " FOR SHARE" : ""}`);
    this.epochOf = db.prepare("SELECT epoch FROM task_leases WHERE task_id = ?");
    this.markOffered = db.prepare("UPDATE task_leases SET offered = 1 WHERE task_id = ? AND owner = ?");
    this.withdrawOffer = db.prepare("UPDATE task_leases SET offered = 0 WHERE task_id = ? AND owner = ? AND offered = 1");
    this.ownerOf = db.prepare("SELECT owner FROM task_leases WHERE task_id = ?");
    this.ownRows = db.prepare("SELECT task_id FROM task_leases WHERE owner = ?");
    // Oldest first, as they were received; on PostgreSQL, rows another worker is taking at this moment are skipped, not waited for.
    this.offersElsewhere = db.prepare(
      `SELECT l.task_id AS task_id, l.owner AS owner FROM task_leases l
         JOIN tasks t ON t.id = l.task_id JOIN events e ON e.task_id = l.task_id AND e.seq = 1
        WHERE l.offered = 1 AND l.owner != ? AND t.state = 'queued' ORDER BY e.id LIMIT ?${dialectOf(db) === "postgres" ? " FOR UPDATE OF l SKIP LOCKED" : ""}`,
    );
    this.takeOffer = db.prepare(
      `UPDATE task_leases SET owner = @owner, pid = @pid, host = @host, acquired_at = @now, expires_at = @expires_at, offered = 0, epoch = epoch + 1
        WHERE task_id = @task_id AND owner = @previous AND offered = 1`,
    );
    // A row with a cancel nobody has carried out yet stays, run out, for whoever takes the task on next.
    this.remove = db.prepare("DELETE FROM task_leases WHERE task_id = ? AND owner = ? AND cancel_requested IS NULL");
    this.expireNow = db.prepare("UPDATE task_leases SET expires_at = '' WHERE task_id = ? AND owner = ?");
    this.extend = db.prepare("UPDATE task_leases SET expires_at = ? WHERE owner = ?");
    this.cancels = db.prepare("SELECT task_id, cancel_requested FROM task_leases WHERE owner = ? AND cancel_requested IS NOT NULL");
    this.clearCancel = db.prepare("UPDATE task_leases SET cancel_requested = NULL WHERE task_id = ? AND owner = ?");
    this.markCancel = db.prepare("UPDATE task_leases SET cancel_requested = ? WHERE task_id = ?");
    this.unfinished = db.prepare(
      `SELECT t.id AS id, l.owner AS owner, l.pid AS pid, l.host AS host, l.expires_at AS expires_at
         FROM tasks t LEFT JOIN task_leases l ON l.task_id = t.id
        WHERE t.state IN ('received', 'queued', 'running') ORDER BY t.created_at, t.id`,
    );
    this.forgetPruned = db.prepare("DELETE FROM task_leases WHERE task_id NOT IN (SELECT id FROM tasks WHERE state NOT IN ('completed', 'failed', 'cancelled'))");
    this.acquireInTransaction = db.transaction((taskId: string) => this.attemptAcquire(taskId));
  }

  /**
   * Takes the task's lease unless another live process holds it. Read and written in one immediate
   * transaction, so two processes asking at once cannot both get it.
   */
  acquire(taskId: string): LeaseAttempt {
    return this.acquireInTransaction.immediate(taskId);
  }

  /** `acquire`'s reading and writing, inside its transaction. */
  private attemptAcquire(taskId: string): LeaseAttempt {
    const row = this.select.get(taskId) as LeaseRow | undefined;
    if (row && row.owner !== this.owner && this.isLive(row)) return { acquired: false, holder: holderOf(row) };
    const now = this.now();
    if (row?.owner === this.owner) {
      this.extend.run(this.expiry(now), this.owner);
    } else {
      this.upsert.run({ task_id: taskId, owner: this.owner, pid: process.pid, host: this.host, now: now.toISOString(), expires_at: this.expiry(now) });
    }
    this.held.set(taskId, Number((this.epochOf.get(taskId) as { epoch: number }).epoch));
    this.lost.delete(taskId);
    const previous = row && row.owner !== this.owner ? { previous: holderOf(row) } : {};
    // A cancel asked of a holder that stopped before it acted is the new holder's to carry out.
    if (row?.cancel_requested) {
      this.clearCancel.run(taskId, this.owner);
      return { acquired: true, cancelRequested: row.cancel_requested, ...previous };
    }
    return { acquired: true, ...previous };
  }

  /**
   * Holds a task this process has just created, without a commit of its own: the lease row is written
   * in the task's first commit (`writeNewClaims`, which the TaskStore runs inside each of its commits).
   */
  claimNew(taskId: string): void {
    // A new task's row is written fresh, at epoch 0 (nobody held it before).
    this.held.set(taskId, 0);
    this.newClaims.push(taskId);
  }

  /**
   * Writes the leases of tasks claimed, and the offers made, since the last commit; runs inside the
   * TaskStore's transaction. A task that also ends in that commit gets no row: no other process ever
   * sees it unfinished, so there is nothing to hold it against, and nothing to remove afterwards.
   */
  writeNewClaims(endsHere: (taskId: string) => boolean = () => false): void {
    // Kept until the commit is known to have happened (`committed`): a commit that fails (a full disk)
    // writes them with the next one instead of losing them.
    this.claimsWriting = [...this.newClaims];
    this.offersWriting = [...this.pendingOffers];
    if (this.claimsWriting.length > 0) {
      const now = this.now();
      for (const taskId of this.claimsWriting) {
        if (this.held.has(taskId) && !endsHere(taskId)) this.upsert.run({ task_id: taskId, owner: this.owner, pid: process.pid, host: this.host, now: now.toISOString(), expires_at: this.expiry(now) });
      }
    }
    for (const taskId of this.offersWriting) this.markOffered.run(taskId, this.owner);
  }

  /** The commit that wrote the new claims and offers has happened: they are no longer pending. */
  committed(): void {
    if (this.claimsWriting.length > 0) {
      const written = new Set(this.claimsWriting);
      const still = this.newClaims.filter((taskId) => !written.has(taskId));
      this.newClaims.splice(0, this.newClaims.length, ...still);
    }
    for (const taskId of this.offersWriting) this.pendingOffers.delete(taskId);
    this.claimsWriting = [];
    this.offersWriting = [];
  }

  /**
   * Lets other workers take a held task that waits in this process's line (`claimOffered`). The
   * lease stays this process's, renewed, so nobody resumes the task as left behind; the offer is
   * written with the task's next commit.
   */
  offer(taskId: string): void {
    if (!this.held.has(taskId)) return;
    this.offered.add(taskId);
    this.pendingOffers.add(taskId);
  }

  /**
   * Withdraws the offer before this process drives the task itself: true when the task is still this
   * process's, false when another worker took it meanwhile (then it is no longer held here).
   */
  takeBack(taskId: string): boolean {
    if (!this.offered.delete(taskId)) return this.held.has(taskId);
    if (this.pendingOffers.delete(taskId)) return true;
    // Still this process's unless its row names another owner: an offer whose commit failed was never
    // written, and leaves the row as it was.
    const kept = this.db.transaction(() => this.withdrawOffer.run(taskId, this.owner).changes === 1 || (this.ownerOf.get(taskId) as { owner: string } | undefined)?.owner === this.owner)();
    if (!kept) this.held.delete(taskId);
    return kept;
  }

  /** Offered tasks of this process that another worker has taken since the last look; they are no longer held here. */
  takenElsewhere(): string[] {
    const committed = [...this.offered].filter((taskId) => !this.pendingOffers.has(taskId));
    if (committed.length === 0) return [];
    // Taken means owned by another: a row still this process's is its, offered or not.
    const still = new Set((this.ownRows.all(this.owner) as Array<{ task_id: string }>).map((row) => row.task_id));
    const taken = committed.filter((taskId) => !still.has(taskId));
    for (const taskId of taken) {
      this.offered.delete(taskId);
      this.held.delete(taskId);
    }
    return taken;
  }

  /**
   * Takes up to `limit` tasks that other workers offered from their lines, oldest first, and holds
   * them here. Each is taken by one worker only: the row changes owner only while it is still offered
   * by the worker that offered it.
   */
  claimOffered(limit: number): string[] {
    if (limit <= 0) return [];
    // Immediate, as `acquire` is: a task whose offering worker died may be adopted by one worker and
    // claimed by another at the same moment; serialised, the second sees the first's row.
    return this.db.transaction(() => {
      const now = this.now();
      const claimed: string[] = [];
      for (const row of this.offersElsewhere.all(this.owner, limit) as Array<{ task_id: string; owner: string }>) {
        const taken = this.takeOffer.run({ task_id: row.task_id, owner: this.owner, pid: process.pid, host: this.host, now: now.toISOString(), expires_at: this.expiry(now), previous: row.owner });
        if (taken.changes !== 1) continue;
        this.held.set(row.task_id, Number((this.epochOf.get(row.task_id) as { epoch: number }).epoch));
        this.lost.delete(row.task_id);
        claimed.push(row.task_id);
      }
      return claimed;
    }).immediate();
  }

  /**
   * Gives the task up: it waits for a person, or this process stops; or, with `finished`, it has
   * ended — then its row is removed at the next renewal rather than by a commit of its own.
   */
  release(taskId: string, options: { finished?: boolean } = {}): void {
    this.offered.delete(taskId);
    this.pendingOffers.delete(taskId);
    if (!this.held.delete(taskId)) return;
    if (options.finished) this.finishedReleases.add(taskId);
    else this.dropRow(taskId);
  }

  /** Removes the task's row; one carrying a cancel request is only marked run out, so that the request is kept. */
  private dropRow(taskId: string): void {
    this.remove.run(taskId, this.owner);
    this.expireNow.run(taskId, this.owner);
  }

  holds(taskId: string): boolean {
    return this.held.has(taskId);
  }

  /**
   * Whether this process may still write the task's events: null when it may (it holds the task at
   * the epoch the store says, or does not drive it at all); otherwise why not. Called inside each
   * commit, for every task the commit changes: a task found taken over is lost here from then on.
   */
  writerProblem(taskId: string): string | null {
    if (this.lost.has(taskId)) return "another process took the task over while this one was paused";
    const epoch = this.held.get(taskId);
    if (epoch === undefined) return null;
    // A task created here whose row this commit (or the next) writes: nobody else can have it.
    if (this.newClaims.includes(taskId)) return null;
    const row = this.fenceOf.get(taskId) as Pick<LeaseRow, "owner" | "epoch" | "pid" | "host"> | undefined;
    if (row && row.owner === this.owner && Number(row.epoch) === epoch) return null;
    this.held.delete(taskId);
    this.offered.delete(taskId);
    this.pendingOffers.delete(taskId);
    this.lost.add(taskId);
    const reason = row ? `another process (PID ${row.pid} on ${row.host}) took the task over while this one was paused` : "its lease is gone: another process took the task over while this one was paused";
    // Told after the commit, whose transaction this is.
    queueMicrotask(() => this.onLost?.(taskId));
    return reason;
  }

  /** Whether this process lost the task to another (see `writerProblem`). */
  isLost(taskId: string): boolean {
    return this.lost.has(taskId);
  }

  /** Tasks this process holds, and finished ones whose rows await the next renewal. */
  get footprint(): { held: number; releasing: number; offered: number } {
    return { held: this.held.size, releasing: this.finishedReleases.size, offered: this.offered.size };
  }

  /** The live holder of a task other than this process, or null when nobody else drives it. */
  otherHolder(taskId: string): LeaseHolder | null {
    const row = this.select.get(taskId) as LeaseRow | undefined;
    return row && row.owner !== this.owner && this.isLive(row) ? holderOf(row) : null;
  }

  /**
   * Asks the live holder of a task to cancel it (it sees the request at its next renewal). Returns
   * false when no other live process holds the task: then the caller cancels it itself.
   */
  requestCancel(taskId: string, reason: string): boolean {
    if (!this.otherHolder(taskId)) return false;
    this.markCancel.run(reason, taskId);
    return true;
  }

  /**
   * Extends every lease this process holds, and returns the cancels other processes asked for since
   * the last renewal (each once).
   */
  renew(): Array<{ taskId: string; reason: string }> {
    if (this.held.size === 0 && this.finishedReleases.size === 0) return [];
    return this.db.transaction(() => {
      for (const taskId of this.finishedReleases) if (!this.held.has(taskId)) this.dropRow(taskId);
      this.finishedReleases.clear();
      this.extend.run(this.expiry(this.now()), this.owner);
      // A held task whose row another owner has taken (while this process was paused) is lost here, not renewed.
      const pending = new Set(this.newClaims);
      for (const taskId of [...this.held.keys()]) if (!pending.has(taskId)) this.writerProblem(taskId);
      const asked = (this.cancels.all(this.owner) as Array<{ task_id: string; cancel_requested: string }>).map((row) => ({ taskId: row.task_id, reason: row.cancel_requested }));
      for (const { taskId } of asked) this.clearCancel.run(taskId, this.owner);
      return asked;
    })();
  }

  /** Unfinished tasks (received, queued or running) that no live process holds: the ones this process may take on. */
  orphans(): string[] {
    const rows = this.unfinished.all() as Array<{ id: string; owner: string | null; pid: number; host: string; expires_at: string }>;
    return rows.filter((row) => row.owner === null || (row.owner !== this.owner && !this.isLive({ ...row, owner: row.owner }))).map((row) => row.id);
  }

  /**
   * Drops the lease rows of tasks that are finished or no longer exist (after pruning). Housekeeping:
   * where PostgreSQL ends it to break a deadlock with workers renewing their leases, it is left to
   * the next start.
   */
  forgetMissingTasks(): void {
    try {
      this.forgetPruned.run();
    } catch (error) {
      if ((error as { code?: unknown }).code !== POSTGRES_DEADLOCK) throw error;
    }
  }

  /** Gives up every lease this process holds; it owns nothing any more. */
  close(): void {
    for (const taskId of [...this.held.keys(), ...this.finishedReleases]) {
      this.held.delete(taskId);
      this.dropRow(taskId);
    }
    this.finishedReleases.clear();
    this.offered.clear();
    this.pendingOffers.clear();
    ownersInThisProcess.delete(this.owner);
  }

  /** Whether the process that held a lease may still be running (paused, not gone): always for another host's. */
  mayStillRun(holder: Pick<LeaseHolder, "pid" | "host">): boolean {
    if (holder.host !== this.host) return true;
    return holder.pid !== process.pid && isProcessAlive(holder.pid);
  }

  private isLive(row: Pick<LeaseRow, "owner" | "pid" | "host" | "expires_at">): boolean {
    // An expiry that does not read as a time (a row edited by hand) has run out, not lasts for ever.
    const expires = Date.parse(row.expires_at);
    if (!(expires > this.now().getTime())) return false;
    if (row.host !== this.host) return true;
    if (row.pid === process.pid) return ownersInThisProcess.has(row.owner);
    return isProcessAlive(row.pid);
  }

  private now(): Date {
    return this.options.clock?.() ?? new Date();
  }

  private expiry(now: Date): string {
    return new Date(now.getTime() + this.options.ttlMs).toISOString();
  }
}

function holderOf(row: LeaseRow): LeaseHolder {
  return { task_id: row.task_id, owner: row.owner, pid: row.pid, host: row.host, acquired_at: row.acquired_at, expires_at: row.expires_at };
}

/** The error for driving, resuming or answering a task another live process drives. */
export function ownedElsewhereError(taskId: string, holder: LeaseHolder): DuckError {
  return new DuckError(
    ErrorCode.TaskOwnedElsewhere,
    `task ${taskId} is being run by another DuckLM process (PID ${holder.pid} on ${holder.host}, since ${holder.acquired_at}): answer, resume or watch it there; it can be resumed here once that process stops`,
    { details: { task_id: taskId, pid: holder.pid, host: holder.host } },
  );
}
