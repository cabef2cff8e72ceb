import { timeOrderedId } from "../utils/time-ordered-id.js";
import {
  EventType,
  isTerminalTaskState,
  type Checkpoint,
  type PreApproval,
  type DuckEvent,
  type EventPayloads,
  type EventTypeName,
  type TaskState,
  type TaskSummary,
  type ConversationSummary,
} from "../contracts/index.js";
import { DuckError, ErrorCode, storageErrorOf } from "../errors/duck-error.js";
import type { EventBus } from "../events/event-bus.js";
import { DAMAGED_PAYLOAD, type EventStore } from "../events/event-store.js";
import { rememberPayloadJson } from "../events/event-json.js";
import { isUniqueViolation, type SqlDatabase } from "../storage/sql-database.js";
import { applyEvent, initialProjection, projectEvents, upgradedProjection, type TaskProjection } from "./task-projection.js";
import { pruneFinishedTasks, type PruneOptions, type PruneResult } from "./task-retention.js";
import { StepRatings, type StepRating } from "./step-ratings.js";
import { TaskRows, type NewTaskRow } from "./task-rows.js";

/**
 * Events after which a snapshot may be stored: the points a resume should not have to replay past.
 * Whether one is stored there is `checkpointDue`'s call.
 */
const CHECKPOINTED: ReadonlySet<EventTypeName> = new Set<EventTypeName>([
  EventType.TaskReceived,
  EventType.TaskStarted,
  EventType.DirectiveDecided,
  EventType.PlanAccepted,
  EventType.StepCompleted,
  EventType.StepFailed,
  EventType.StepSkipped,
  EventType.TaskAwaitingPermission,
  EventType.PermissionResolved,
  EventType.AnswerCompleted,
  EventType.TaskCompleted,
  EventType.TaskFailed,
  EventType.TaskCancelled,
]);

export type Clock = () => Date;

/** The events of one task in one commit: seqs `from` to `to`. */
export interface CommittedRange {
  taskId: string;
  from: number;
  to: number;
}

/**
 * A running task's snapshot is rewritten only once the events since the last one carry at least as
 * many bytes as that snapshot (and at least this many): snapshot bytes never exceed event bytes, so
 * what a step writes stays flat as a plan grows, and a rebuild replays a tail no bigger than the
 * snapshot. A task that finished or waits for a person always gets one, so reading it is one row.
 */
export const CHECKPOINT_MIN_TAIL_BYTES = 16 * 1024;

/** What was written since the store opened: the figures the benches and tests read. */
export interface WriteStats {
  commits: number;
  events: number;
  /** Bytes of event payloads as JSON, long texts included whole. */
  eventBytes: number;
  checkpoints: number;
  /** Bytes of snapshots as stored (long texts as references). */
  checkpointBytes: number;
}

/** Of a task with a snapshot: bytes of events appended since it, and its own stored size. */
interface Tail {
  bytes: number;
  snapshotBytes: number;
}

/**
 * What may still be recorded of a task after its terminal event: people's notes about it, which
 * change nothing of how it ran. Anything else is refused (DUCK_ERR_TASK_FINISHED).
 */
const AFTER_THE_END: ReadonlySet<EventTypeName> = new Set<EventTypeName>([EventType.FeedbackReceived, EventType.ApprovalRevoked, EventType.WorkspaceRestored]);

/** The events that end a task. */
const TASK_ENDINGS: ReadonlySet<EventTypeName> = new Set<EventTypeName>([EventType.TaskCompleted, EventType.TaskFailed, EventType.TaskCancelled]);

/** Who may write which task's events: the leases, whose epochs fence an owner that was paused past its lease. */
export interface WriterFence {
  /** Null when this process may write the task's events now; otherwise why not. Runs inside the commit. */
  writerProblem(taskId: string): string | null;
  /** Whether this process drives the task (then the fence checks it at each commit). */
  holds(taskId: string): boolean;
  /** Whether this process has lost the task to another: nothing of it is appended here any more. */
  isLost(taskId: string): boolean;
}

/** Something to append: an event type and its payload. */
export type PendingEvent = { [T in EventTypeName]: { type: T; payload: EventPayloads[T] } }[EventTypeName];

export interface AppendOptions {
  /** Commit now, with everything pending, instead of at the end of this turn of the event loop. */
  durable?: boolean;
}

interface Batch {
  /** Tasks first recorded in this batch: their rows are inserted before their events. */
  created: NewTaskRow[];
  events: DuckEvent[];
  /** Each event's payload as JSON text, by position: made once, for the row, the counts and the stream. */
  payloadJson: string[];
  /** Task id to the time of its latest change: each task's row is written once per batch. */
  rows: Map<string, string>;
  /** Tasks that passed a milestone in this batch: their checkpoint is written once, at the end. */
  checkpoints: Set<string>;
}

/**
 * The one writer of task history. Each `append` commits the events, the task row they change and,
 * at milestones, the checkpoint, in one SQLite transaction; then it publishes them on the bus.
 */
/** Finished tasks whose projections stay in memory, at most; older ones are read back from their checkpoints. */
const FINISHED_KEPT = 256;
/** And at most about this many bytes of their texts (a task that read a large file holds it twice). */
const FINISHED_KEPT_BYTES = 32 * 1024 * 1024;

export class TaskStore {
  private readonly projections = new Map<string, TaskProjection>();
  /** The finished tasks among `projections`, least recently used first, with the bytes of text each holds. */
  private readonly finished = new Map<string, number>();
  private finishedBytes = 0;
  /** Events appended but not yet committed, with the tasks and checkpoints they touch. */
  private batch: Batch | null = null;
  private transactionDepth = 0;
  /** A commit that failed in the background, reported at the next append or flush. */
  private broken: DuckError | null = null;
  /** Sees each event before it is appended and may refuse it by throwing (replay stops at recorded crashes). */
  appendGuard: ((event: DuckEvent) => void) | null = null;
  /** Runs inside every commit before it writes; a test's way to make commits fail (a full disk). */
  commitGuard: (() => void) | null = null;
  /** Writes of other stores that ride along in every commit (the leases of tasks created here). */
  private readonly companionWrites: Array<(endsHere: (taskId: string) => boolean) => void> = [];
  /** Told after each commit that happened (the leases: the claims it wrote are no longer pending). */
  private readonly afterCommits: Array<() => void> = [];
  /** Told, inside each commit, which events of which tasks it holds (PostgreSQL tells other processes). */
  private readonly commitObservers: Array<(ranges: CommittedRange[]) => void> = [];
  /** Who may write which task (the leases); without one, every writer may. */
  writerFence: WriterFence | null = null;
  /** Tasks a commit refused to write (taken over elsewhere): each later append of theirs is refused too. */
  private readonly refused = new Map<string, DuckError>();
  /** Since when commits have been failing (a full disk, a read-only file), or null while they succeed. */
  private failingSince: { since: string; message: string } | null = null;
  private readonly rows: TaskRows;
  private readonly ratings: StepRatings;
  private readonly commitBatch: (batch: Batch) => void;
  private readonly runInTransaction: (work: () => unknown) => unknown;
  /** Unfinished tasks with a snapshot stored by this process; see CHECKPOINT_MIN_TAIL_BYTES. */
  private readonly tails = new Map<string, Tail>();
  private isoTimeAt = Number.NaN;
  private isoTimeText = "";
  private readonly stats: WriteStats = { commits: 0, events: 0, eventBytes: 0, checkpoints: 0, checkpointBytes: 0 };

  constructor(
    private readonly db: SqlDatabase,
    private readonly events: EventStore,
    private readonly bus: EventBus,
    private readonly clock: Clock = () => new Date(),
  ) {
    this.rows = new TaskRows(db);
    this.ratings = new StepRatings(db);
    // Made once: better-sqlite3 builds four wrapped functions for every `transaction()` call, which
    // cost about as much again as a small commit.
    this.commitBatch = db.transaction((batch: Batch) => this.writeBatch(batch));
    this.runInTransaction = db.transaction((work: () => unknown) => work());
  }

  /**
   * Records `task-received` and creates the task row. Like any append it joins the open batch; pass
   * `durable` when the caller is about to acknowledge the task to someone outside this process.
   */
  createTask(
    input: { text: string; session_id?: string | undefined; workspace: string; id?: string; auto_approve?: PreApproval[]; kind?: "memory-edit" },
    options: AppendOptions = {},
  ): TaskProjection {
    this.throwIfBroken();
    const id = input.id ?? timeOrderedId();
    const time = this.isoTime(this.clock());
    const event: DuckEvent = {
      task_id: id,
      seq: 1,
      type: EventType.TaskReceived,
      time,
      payload: {
        text: input.text,
        session_id: input.session_id ?? null,
        workspace: input.workspace,
        ...(input.auto_approve && input.auto_approve.length > 0 ? { auto_approve: input.auto_approve } : {}),
        ...(input.kind ? { kind: input.kind } : {}),
      },
    };
    const projection = initialProjection(event);
    const batch = this.openBatch();
    batch.created.push({ id, text: input.text, session_id: input.session_id ?? null, workspace: input.workspace, time });
    batch.events.push(event);
    batch.payloadJson.push(JSON.stringify(event.payload));
    batch.rows.set(id, time);
    batch.checkpoints.add(id);
    this.projections.set(id, projection);
    if (options.durable) this.flush();
    return projection;
  }

  /** Appends one event (see `appendAll`) and returns the task's state after it. */
  append<T extends EventTypeName>(taskId: string, type: T, payload: EventPayloads[T], options: AppendOptions = {}): TaskProjection {
    return this.appendAll(taskId, [{ type, payload } as PendingEvent], options);
  }

  /**
   * Appends events with the state change they cause. They join the open batch, which commits as one
   * transaction (events, task rows, checkpoints) at the end of the current turn of the event loop, or
   * at once with `durable`; subscribers see them only after that commit. Returns the task's state
   * after them, so the caller never needs to read it back.
   */
  appendAll(taskId: string, pending: readonly PendingEvent[], options: AppendOptions = {}): TaskProjection {
    this.throwIfBroken();
    this.refuseStaleWriter(taskId, pending);
    let projection = this.projection(taskId);
    if (isTerminalTaskState(projection.state) && pending.some((event) => !AFTER_THE_END.has(event.type))) {
      throw new DuckError(ErrorCode.TaskFinished, `task ${taskId} has ended (${projection.state}): nothing more is recorded of its run`, { details: { task_id: taskId, state: projection.state } });
    }
    const now = this.clock();
    const at = now.getTime();
    const time = this.isoTime(now, at);
    const written: DuckEvent[] = [];
    const batch = this.openBatch();
    for (const pendingEvent of pending) {
      const { type } = pendingEvent;
      // A task's end carries what its model calls cost together: the totals are the projection's.
      const payload = projection.model_work && TASK_ENDINGS.has(type) ? { ...pendingEvent.payload, model_work: projection.model_work } : pendingEvent.payload;
      const event: DuckEvent = { task_id: taskId, seq: projection.seq + 1, type, time, payload: payload as Record<string, unknown> };
      this.appendGuard?.(event);
      projection = applyEvent(projection, event, at);
      written.push(event);
      const json = JSON.stringify(payload);
      batch.payloadJson.push(json);
      const tail = this.tails.get(taskId);
      if (tail) tail.bytes += json.length;
      if (CHECKPOINTED.has(type)) batch.checkpoints.add(taskId);
      if (type === EventType.FeedbackReceived) this.ratings.forget();
    }
    batch.events.push(...written);
    batch.rows.set(taskId, time);
    this.projections.set(taskId, projection);
    if (options.durable) {
      this.flush();
      // The commit took the other tasks' events and refused these: the caller must not go on as if stored.
      const refusal = this.refused.get(taskId);
      if (refusal) throw refusal;
    }
    return projection;
  }

  /** Throws when this process may no longer write the task: another took it over while this one was paused. */
  private refuseStaleWriter(taskId: string, pending: readonly PendingEvent[]): void {
    if (pending.every((event) => AFTER_THE_END.has(event.type))) return;
    const known = this.refused.get(taskId);
    if (known) throw known;
    if (this.writerFence?.isLost(taskId)) throw fencedError(taskId, "another process took the task over while this one was paused");
  }

  /**
   * Inside a commit: the tasks whose events this process may not write — taken over by another owner
   * (the lease's epoch moved on), or ended — are left out of it, forgotten here, and refused from
   * then on; the other tasks' events commit as usual.
   */
  private leaveOutRefused(batch: Batch): void {
    let refusedHere: Map<string, DuckError> | null = null;
    const created = batch.created.length > 0 ? new Set(batch.created.map((task) => task.id)) : null;
    for (const taskId of batch.rows.keys()) {
      if (created?.has(taskId)) continue;
      let refusal: DuckError | null = null;
      if (this.writerFence?.holds(taskId) || this.writerFence?.isLost(taskId)) {
        const problem = this.writerFence.writerProblem(taskId);
        if (problem) refusal = fencedError(taskId, problem);
      } else if (batch.events.some((event) => event.task_id === taskId && !AFTER_THE_END.has(event.type as EventTypeName))) {
        // A writer that does not drive the task (another process ended it meanwhile) may add notes, not steps.
        const stored = this.rows.get(taskId);
        if (stored && isTerminalTaskState(stored.state)) refusal = new DuckError(ErrorCode.TaskFinished, `task ${taskId} has ended (${stored.state}): nothing more is recorded of its run`, { details: { task_id: taskId, state: stored.state } });
      }
      if (refusal) (refusedHere ??= new Map()).set(taskId, refusal);
    }
    if (!refusedHere) return;
    const kept: DuckEvent[] = [];
    const keptJson: string[] = [];
    batch.events.forEach((event, index) => {
      if (refusedHere.has(event.task_id)) return;
      kept.push(event);
      keptJson.push(batch.payloadJson[index]!);
    });
    batch.events = kept;
    batch.payloadJson = keptJson;
    for (const [taskId, refusal] of refusedHere) {
      batch.rows.delete(taskId);
      batch.checkpoints.delete(taskId);
      this.refused.set(taskId, refusal);
      this.forgetUncommitted(taskId);
    }
  }

  /**
   * Throws DUCK_ERR_TASK_FENCED when this process no longer holds the task at its lease's epoch: the
   * last look before a tool starts, so that an owner thawed after a takeover runs nothing more.
   */
  assertStillWriter(taskId: string): void {
    const known = this.refused.get(taskId);
    if (known) throw known;
    const problem = this.writerFence?.holds(taskId) || this.writerFence?.isLost(taskId) ? this.writerFence.writerProblem(taskId) : null;
    if (problem) {
      const refusal = fencedError(taskId, problem);
      this.refused.set(taskId, refusal);
      throw refusal;
    }
  }

  /** Lets the task be written again from here: this process holds it anew (it took the lease back). */
  writableAgain(taskId: string): void {
    this.refused.delete(taskId);
  }

  /**
   * Commits every pending event now. The RuntimeLoop calls it before anything that must not happen
   * unless its record is on disk: running a tool, answering a caller.
   */
  flush(): void {
    const batch = this.batch;
    if (!batch || this.transactionDepth > 0) return;
    this.batch = null;
    try {
      this.commitBatch(batch);
    } catch (error) {
      this.fail(batch, error);
    }
    for (const after of this.afterCommits) after();
    this.failingSince = null;
    this.keepFinished(batch.rows.keys());
    this.publish(batch);
  }

  /**
   * Tells the bus of a committed batch. A task someone streams gets each payload's text with it, so
   * the stream sends what was stored without serialising it again.
   */
  private publish(batch: Batch): void {
    for (let i = 0; i < batch.events.length; i += 1) {
      const event = batch.events[i]!;
      if (this.bus.subscriberCount(event.task_id) > 0) rememberPayloadJson(event, batch.payloadJson[i]!);
      this.bus.publish(event);
    }
  }

  /** Keeps the newest finished tasks' projections in memory and lets the older ones go. */
  private keepFinished(taskIds: Iterable<string>): void {
    for (const taskId of taskIds) {
      const projection = this.projections.get(taskId);
      if (!projection || !isTerminalTaskState(projection.state)) continue;
      this.forgetFinished(taskId);
      const bytes = textBytesOf(projection);
      this.finished.set(taskId, bytes);
      this.finishedBytes += bytes;
    }
    for (const oldest of this.finished.keys()) {
      if (this.finished.size <= FINISHED_KEPT && this.finishedBytes <= FINISHED_KEPT_BYTES) break;
      this.forgetFinished(oldest);
      if (!this.batch?.rows.has(oldest)) this.projections.delete(oldest);
    }
  }

  private forgetFinished(taskId: string): void {
    const bytes = this.finished.get(taskId);
    if (bytes === undefined) return;
    this.finished.delete(taskId);
    this.finishedBytes -= bytes;
  }

  /** After a commit that did not happen: the projection reloads from disk, and the next milestone stores a snapshot. */
  private forgetUncommitted(taskId: string): void {
    this.projections.delete(taskId);
    this.tails.delete(taskId);
  }

  /** Whether commits are failing now, and since when: what `/health` reports as degraded. */
  writeHealth(): { since: string; message: string } | null {
    return this.failingSince;
  }

  /**
   * Runs `fn` and every append inside it, with whatever was pending, as one transaction; for writes to
   * other tables (memory rows) that must commit with their events.
   */
  transaction<T>(fn: () => T): T {
    this.throwIfBroken();
    const batch = this.openBatch();
    let result: T;
    let failedInside = false;
    this.transactionDepth += 1;
    try {
      result = this.runInTransaction(() => {
        let value: T;
        try {
          value = fn();
        } catch (error) {
          failedInside = true;
          throw error;
        }
        this.writeBatch(batch);
        return value;
      }) as T;
    } catch (error) {
      this.transactionDepth -= 1;
      this.batch = null;
      if (!failedInside) this.fail(batch, error);
      // The caller's own failure: everything rolled back, and it is theirs to see as it was.
      for (const taskId of batch.rows.keys()) this.forgetUncommitted(taskId);
      throw error;
    }
    this.transactionDepth -= 1;
    this.batch = null;
    for (const after of this.afterCommits) after();
    this.failingSince = null;
    this.keepFinished(batch.rows.keys());
    this.publish(batch);
    return result;
  }

  /** The task's current projection: from memory, else its checkpoint plus the events after it. */
  projection(taskId: string): TaskProjection {
    const cached = this.projections.get(taskId);
    if (cached) return cached;
    const loaded = this.loadProjection(taskId);
    this.projections.set(taskId, loaded);
    this.keepFinished([taskId]);
    return loaded;
  }

  /** Rebuilds from storage, ignoring the in-memory copy. */
  loadProjection(taskId: string): TaskProjection {
    let checkpoint: Checkpoint | null = null;
    try {
      checkpoint = this.checkpoint(taskId);
    } catch (error) {
      // A damaged snapshot (bad JSON, a missing blob) is only a shortcut lost: the events say the same.
      if (!(error instanceof SyntaxError) && !(error instanceof DuckError && error.code === ErrorCode.DatabaseCorrupt)) throw error;
    }
    if (checkpoint) {
      const base = upgradedProjection(checkpoint.snapshot as unknown as TaskProjection);
      const later = undamaged(taskId, this.events.list(taskId, checkpoint.seq + 1));
      return later.length === 0 ? base : projectEvents(later, base);
    }
    const all = undamaged(taskId, this.events.list(taskId, 1));
    if (all.length === 0) throw new DuckError(ErrorCode.TaskNotFound, `no task with id ${taskId}`, { details: { task_id: taskId } });
    return projectEvents(all);
  }

  /** Prunes finished tasks (see task-retention.ts), forgetting their cached projections. */
  prune(options: PruneOptions): PruneResult {
    this.flush();
    const result = pruneFinishedTasks(this.db, options);
    for (const id of result.pruned) {
      this.projections.delete(id);
      this.tails.delete(id);
    }
    return result;
  }

  /**
   * Forgets the in-memory projection when another process has stored events of the task since it was
   * read (a process taking over a task another one drove): the next read comes from disk.
   */
  forgetIfChangedElsewhere(taskId: string): void {
    const cached = this.projections.get(taskId);
    if (!cached) return;
    const stored = this.rows.get(taskId);
    if (stored && stored.last_seq > cached.seq) this.evict(taskId);
  }

  /** Forgets the in-memory projection (after a task ends, or to simulate a fresh process). */
  evict(taskId: string): void {
    this.projections.delete(taskId);
    this.tails.delete(taskId);
    this.forgetFinished(taskId);
  }

  /** How many task projections are held in memory (the running ones and the newest finished ones). */
  get cachedProjections(): number {
    return this.projections.size;
  }

  /** About how many bytes of text the finished tasks held in memory carry (bounded by FINISHED_KEPT_BYTES). */
  get cachedFinishedBytes(): number {
    return this.finishedBytes;
  }

  checkpoint(taskId: string): Checkpoint | null {
    return this.rows.checkpoint(taskId);
  }

  getTask(taskId: string): TaskSummary | null {
    return this.rows.get(taskId);
  }

  requireTask(taskId: string): TaskSummary {
    const task = this.getTask(taskId);
    if (!task) throw new DuckError(ErrorCode.TaskNotFound, `no task with id ${taskId}`, { details: { task_id: taskId } });
    return task;
  }

  /** Newest first; `after` (a task's creation time and id) continues a listing past that task. */
  listTasks(options: { state?: TaskState; limit?: number; after?: { created_at: string; id: string } } = {}): TaskSummary[] {
    return this.rows.list(options.state ?? null, options.limit ?? 50, options.after ?? null);
  }

  /** Conversations (a session's tasks, or a task sent without one), the most recently active first. */
  listConversations(limit = 50): ConversationSummary[] {
    return this.rows.conversations(limit);
  }

  /** The tasks of one conversation, oldest first; empty when there is none by that id. */
  conversationTasks(id: string, limit = 500): TaskSummary[] {
    return this.rows.conversationTasks(id, limit);
  }

  /** Tasks received, queued or running (none waits for a person), in the order they were received. */
  unfinishedTasks(): TaskSummary[] {
    return this.rows.unfinished();
  }

  /** Earlier tasks of a conversation, oldest first. */
  sessionHistory(sessionId: string, beforeTaskId: string, limit: number): TaskSummary[] {
    return this.rows.session(sessionId, beforeTaskId, limit);
  }

  /** People's newest ratings of steps that called `tool` (see StepRatings). */
  stepRatings(tool: string, limit: number): StepRating[] {
    return this.ratings.forTool(tool, limit);
  }

  listEvents(taskId: string, fromSeq = 1, limit?: number): DuckEvent[] {
    return this.events.list(taskId, fromSeq, limit);
  }

  recentEvents(limit: number): DuckEvent[] {
    return this.events.recent(limit);
  }

  /** `now` as ISO text, made once per millisecond: a busy store appends many events within one. */
  private isoTime(now: Date, at = now.getTime()): string {
    if (at !== this.isoTimeAt) {
      this.isoTimeAt = at;
      this.isoTimeText = now.toISOString();
    }
    return this.isoTimeText;
  }

  private openBatch(): Batch {
    if (this.batch) return this.batch;
    const batch: Batch = { created: [], events: [], payloadJson: [], rows: new Map(), checkpoints: new Set() };
    this.batch = batch;
    if (this.transactionDepth === 0) setImmediate(() => this.flushQuietly());
    return batch;
  }

  private flushQuietly(): void {
    try {
      this.flush();
    } catch (error) {
      // Nobody waits on a background commit: the next append or flush reports it to the RuntimeLoop.
      this.broken = error as DuckError;
    }
  }

  /**
   * Adds a write that runs inside every commit, after the task rows it may refer to. `endsHere` says
   * whether a task reaches its final state in this commit.
   */
  alsoInEachCommit(write: (endsHere: (taskId: string) => boolean) => void): void {
    this.companionWrites.push(write);
  }

  /** Adds what runs after every commit that happened. */
  afterEachCommit(done: () => void): void {
    this.afterCommits.push(done);
  }

  /** Adds a write that runs inside every commit with the seq range of each task's events in it. */
  alsoWithEachCommitsEvents(write: (ranges: CommittedRange[]) => void): void {
    this.commitObservers.push(write);
  }

  private writeBatch(batch: Batch): void {
    this.commitGuard?.();
    this.leaveOutRefused(batch);
    // A task created in this batch gets its row as the batch leaves it, so it needs no update below.
    let writtenWhole: Set<string> | null = null;
    for (const task of batch.created) {
      if (this.rows.insert(task, this.projections.get(task.id)!, batch.rows.get(task.id)!)) (writtenWhole ??= new Set()).add(task.id);
    }
    if (this.companionWrites.length > 0) {
      const endsHere = (taskId: string) => batch.rows.has(taskId) && isTerminalTaskState(this.projections.get(taskId)!.state);
      for (const write of this.companionWrites) write(endsHere);
    }
    this.events.insertAll(batch.events, batch.payloadJson);
    for (const json of batch.payloadJson) this.stats.eventBytes += json.length;
    this.stats.events += batch.events.length;
    this.stats.commits += 1;
    if (this.commitObservers.length > 0 && batch.events.length > 0) {
      const ranges = new Map<string, CommittedRange>();
      for (const event of batch.events) {
        const range = ranges.get(event.task_id);
        if (range) range.to = event.seq;
        else ranges.set(event.task_id, { taskId: event.task_id, from: event.seq, to: event.seq });
      }
      for (const observe of this.commitObservers) observe([...ranges.values()]);
    }
    for (const [taskId, time] of batch.rows) {
      const projection = this.projections.get(taskId)!;
      if (!writtenWhole?.has(taskId)) this.rows.update(projection, time);
      if (batch.checkpoints.has(taskId) && this.checkpointDue(projection)) this.writeCheckpoint(projection, time);
    }
  }

  private checkpointDue(projection: TaskProjection): boolean {
    if (projection.state !== "received" && projection.state !== "queued" && projection.state !== "running") return true;
    const tail = this.tails.get(projection.task_id);
    return !tail || tail.bytes >= Math.max(tail.snapshotBytes, CHECKPOINT_MIN_TAIL_BYTES);
  }

  private writeCheckpoint(projection: TaskProjection, time: string): void {
    const bytes = this.rows.writeCheckpoint(projection, time);
    this.stats.checkpoints += 1;
    this.stats.checkpointBytes += bytes;
    // A finished task is read from its last snapshot; only an unfinished one counts a tail.
    if (isTerminalTaskState(projection.state)) this.tails.delete(projection.task_id);
    else this.tails.set(projection.task_id, { bytes: 0, snapshotBytes: bytes });
  }

  /** What this store has written since it opened. */
  writeStats(): Readonly<WriteStats> {
    return { ...this.stats };
  }

  /** A batch that did not commit: forget the projections it changed, so they reload from disk. */
  private fail(batch: Batch, error: unknown): never {
    for (const taskId of batch.rows.keys()) this.forgetUncommitted(taskId);
    if (isUniqueViolation(error)) throw new DuckError(ErrorCode.SeqConflict, "a task was changed by another writer", { cause: error });
    // A damaged file, a full disk, a read-only one: said as what it is, with what to do.
    const known = storageErrorOf(error);
    const message = `could not store events: ${known?.message ?? (error as Error).message}`;
    this.failingSince = { since: this.failingSince?.since ?? this.clock().toISOString(), message };
    throw new DuckError(known?.code ?? ErrorCode.StorageFailed, message, { cause: error, ...(known ? { details: known.details } : {}) });
  }

  private throwIfBroken(): void {
    if (!this.broken) return;
    const error = this.broken;
    this.broken = null;
    throw error;
  }
}

function fencedError(taskId: string, why: string): DuckError {
  return new DuckError(ErrorCode.TaskFenced, `this process no longer drives task ${taskId}: ${why}; nothing more of this run is recorded, and the new owner carries it on`, { details: { task_id: taskId } });
}

/** A task's events, refused when one of them could not be read back: its state cannot be known from them. */
function undamaged(taskId: string, events: DuckEvent[]): DuckEvent[] {
  const damaged = events.find((event) => DAMAGED_PAYLOAD in event.payload);
  if (damaged) {
    throw new DuckError(ErrorCode.DatabaseCorrupt, `event ${damaged.seq} of task ${taskId} is damaged: run \`ducklm db check\`, then \`ducklm db recover\` to keep every intact task`, { details: { task_id: taskId, seq: damaged.seq } });
  }
  return events;
}

/**
 * About how much text a projection holds: its answer, its steps' outputs and what earlier decisions
 * saw (UTF-16, two bytes a character). Counted once, when the task is kept as finished.
 */
function textBytesOf(projection: TaskProjection): number {
  let chars = (projection.answer?.length ?? 0) + projection.text.length;
  for (const step of Object.values(projection.steps)) chars += (step.result?.output.length ?? 0) + (step.step.kind === "tool" ? JSON.stringify(step.step.arguments).length : 0);
  for (const iteration of projection.iterations) for (const step of iteration.steps) chars += step.output.length;
  return chars * 2;
}
