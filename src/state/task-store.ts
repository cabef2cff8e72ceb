import type { Statement } from "better-sqlite3";
import { randomUUID } from "node:crypto";
import {
  EventType,
  type Checkpoint,
  type DuckEvent,
  type EventPayloads,
  type EventTypeName,
  type TaskState,
  type TaskSummary,
} from "../contracts/index.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import type { EventBus } from "../events/event-bus.js";
import type { EventStore } from "../events/event-store.js";
import type { SqliteDatabase } from "../storage/open-database.js";
import { applyEvent, initialProjection, projectEvents, type TaskProjection } from "./task-projection.js";

/** Events after which a snapshot is stored: the points a resume should not have to replay past. */
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

/** Something to append: an event type and its payload. */
export type PendingEvent = { [T in EventTypeName]: { type: T; payload: EventPayloads[T] } }[EventTypeName];

/** Extra writes that must commit in the same transaction as the events (memory rows, approvals). */
export type TransactionalWrite = () => void;

interface TaskRow {
  id: string;
  text: string;
  state: TaskState;
  session_id: string | null;
  workspace: string;
  created_at: string;
  updated_at: string;
  last_seq: number;
  answer: string | null;
  error: string | null;
}

/**
 * The one writer of task history. Each `append` commits the events, the task row they change and,
 * at milestones, the checkpoint, in one SQLite transaction; then it publishes them on the bus.
 */
export class TaskStore {
  private readonly projections = new Map<string, TaskProjection>();
  /** Events committed inside an outer `transaction`, published once it commits. */
  private deferred: DuckEvent[] | null = null;
  private readonly insertTask: Statement;
  private readonly updateTask: Statement;
  private readonly upsertCheckpoint: Statement;
  private readonly selectCheckpoint: Statement<[string]>;
  private readonly selectTask: Statement<[string]>;
  private readonly selectTasks: Statement<[number]>;
  private readonly selectTasksByState: Statement<[string, number]>;
  private readonly selectSession: Statement<[string, string, number]>;

  constructor(
    private readonly db: SqliteDatabase,
    private readonly events: EventStore,
    private readonly bus: EventBus,
    private readonly clock: Clock = () => new Date(),
  ) {
    this.insertTask = db.prepare(
      `INSERT INTO tasks (id, text, state, session_id, workspace, created_at, updated_at, last_seq)
       VALUES (@id, @text, 'received', @session_id, @workspace, @time, @time, 0)`,
    );
    this.updateTask = db.prepare(
      "UPDATE tasks SET state = @state, updated_at = @time, last_seq = @seq, answer = @answer, error = @error WHERE id = @id",
    );
    this.upsertCheckpoint = db.prepare(
      `INSERT INTO checkpoints (task_id, seq, time, snapshot) VALUES (?, ?, ?, ?)
       ON CONFLICT(task_id) DO UPDATE SET seq = excluded.seq, time = excluded.time, snapshot = excluded.snapshot`,
    );
    this.selectCheckpoint = db.prepare("SELECT task_id, seq, time, snapshot FROM checkpoints WHERE task_id = ?");
    this.selectTask = db.prepare("SELECT * FROM tasks WHERE id = ?");
    this.selectTasks = db.prepare("SELECT * FROM tasks ORDER BY created_at DESC, rowid DESC LIMIT ?");
    this.selectSession = db.prepare(
      "SELECT * FROM tasks WHERE session_id = ? AND id != ? AND state = 'completed' ORDER BY created_at DESC, rowid DESC LIMIT ?",
    );
    this.selectTasksByState = db.prepare("SELECT * FROM tasks WHERE state = ? ORDER BY created_at DESC, rowid DESC LIMIT ?");
  }

  /** Records `task-received` and creates the task row. Returns the new task's projection. */
  createTask(input: { text: string; session_id?: string | undefined; workspace: string; id?: string }): TaskProjection {
    const id = input.id ?? randomUUID();
    const time = this.clock().toISOString();
    const event: DuckEvent = {
      task_id: id,
      seq: 1,
      type: EventType.TaskReceived,
      time,
      payload: { text: input.text, session_id: input.session_id ?? null, workspace: input.workspace },
    };
    const projection = initialProjection(event);
    this.db.transaction(() => {
      this.insertTask.run({ id, text: input.text, session_id: input.session_id ?? null, workspace: input.workspace, time });
      this.events.insert(event);
      this.writeRow(projection, time);
      this.writeCheckpoint(projection, time);
    })();
    this.projections.set(id, projection);
    this.bus.publish(event);
    return projection;
  }

  /** Appends one event (see `appendAll`). */
  append<T extends EventTypeName>(taskId: string, type: T, payload: EventPayloads[T], extra?: TransactionalWrite): DuckEvent {
    return this.appendAll(taskId, [{ type, payload } as PendingEvent], extra)[0]!;
  }

  /** Appends events in one transaction with the state change and checkpoint they cause, then publishes them. */
  appendAll(taskId: string, pending: readonly PendingEvent[], extra?: TransactionalWrite): DuckEvent[] {
    const before = this.projection(taskId);
    const time = this.clock().toISOString();
    let projection = before;
    const written: DuckEvent[] = [];
    let checkpoint = false;
    for (const { type, payload } of pending) {
      const event: DuckEvent = { task_id: taskId, seq: projection.seq + 1, type, time, payload: payload as Record<string, unknown> };
      projection = applyEvent(projection, event);
      written.push(event);
      if (CHECKPOINTED.has(type)) checkpoint = true;
    }
    try {
      this.db.transaction(() => {
        for (const event of written) this.events.insert(event);
        extra?.();
        this.writeRow(projection, time);
        if (checkpoint) this.writeCheckpoint(projection, time);
      })();
    } catch (error) {
      // Another writer moved this task on: drop the cached projection so the next call reloads it.
      this.projections.delete(taskId);
      if ((error as { code?: string }).code === "SQLITE_CONSTRAINT_UNIQUE") {
        throw new DuckError(ErrorCode.SeqConflict, `task ${taskId} was changed by another writer`, { cause: error });
      }
      throw error;
    }
    this.projections.set(taskId, projection);
    if (this.deferred) this.deferred.push(...written);
    else for (const event of written) this.bus.publish(event);
    return written;
  }

  /**
   * Runs several writes as one transaction; appends inside it join it, and their events are published
   * only after the whole commits.
   */
  transaction<T>(fn: () => T): T {
    if (this.deferred) return this.db.transaction(fn)();
    this.deferred = [];
    let result: T;
    try {
      result = this.db.transaction(fn)();
    } catch (error) {
      const touched = new Set(this.deferred.map((event) => event.task_id));
      this.deferred = null;
      for (const taskId of touched) this.projections.delete(taskId);
      throw error;
    }
    const events = this.deferred;
    this.deferred = null;
    for (const event of events) this.bus.publish(event);
    return result;
  }

  /** The task's current projection: from memory, else its checkpoint plus the events after it. */
  projection(taskId: string): TaskProjection {
    const cached = this.projections.get(taskId);
    if (cached) return cached;
    const loaded = this.loadProjection(taskId);
    this.projections.set(taskId, loaded);
    return loaded;
  }

  /** Rebuilds from storage, ignoring the in-memory copy. */
  loadProjection(taskId: string): TaskProjection {
    const checkpoint = this.checkpoint(taskId);
    if (checkpoint) {
      const base = checkpoint.snapshot as unknown as TaskProjection;
      const later = this.events.list(taskId, checkpoint.seq + 1);
      return later.length === 0 ? base : projectEvents(later, base);
    }
    const all = this.events.list(taskId, 1);
    if (all.length === 0) throw new DuckError(ErrorCode.TaskNotFound, `no task with id ${taskId}`, { details: { task_id: taskId } });
    return projectEvents(all);
  }

  /** Forgets the in-memory projection (after a task ends, or to simulate a fresh process). */
  evict(taskId: string): void {
    this.projections.delete(taskId);
  }

  checkpoint(taskId: string): Checkpoint | null {
    const row = this.selectCheckpoint.get(taskId) as { task_id: string; seq: number; time: string; snapshot: string } | undefined;
    return row ? { task_id: row.task_id, seq: row.seq, time: row.time, snapshot: JSON.parse(row.snapshot) } : null;
  }

  getTask(taskId: string): TaskSummary | null {
    const row = this.selectTask.get(taskId) as TaskRow | undefined;
    return row ? { ...row } : null;
  }

  requireTask(taskId: string): TaskSummary {
    const task = this.getTask(taskId);
    if (!task) throw new DuckError(ErrorCode.TaskNotFound, `no task with id ${taskId}`, { details: { task_id: taskId } });
    return task;
  }

  listTasks(options: { state?: TaskState; limit?: number } = {}): TaskSummary[] {
    const limit = options.limit ?? 50;
    const rows = options.state ? this.selectTasksByState.all(options.state, limit) : this.selectTasks.all(limit);
    return (rows as TaskRow[]).map((row) => ({ ...row }));
  }

  /** Earlier tasks of a conversation, oldest first. */
  sessionHistory(sessionId: string, beforeTaskId: string, limit: number): TaskSummary[] {
    const rows = this.selectSession.all(sessionId, beforeTaskId, limit) as TaskRow[];
    return rows.reverse().map((row) => ({ ...row }));
  }

  listEvents(taskId: string, fromSeq = 1, limit?: number): DuckEvent[] {
    return this.events.list(taskId, fromSeq, limit);
  }

  recentEvents(limit: number): DuckEvent[] {
    return this.events.recent(limit);
  }

  private writeRow(projection: TaskProjection, time: string): void {
    this.updateTask.run({
      id: projection.task_id,
      state: projection.state,
      time,
      seq: projection.seq,
      answer: projection.answer,
      error: projection.error ? `${projection.error.code}: ${projection.error.message}` : null,
    });
  }

  private writeCheckpoint(projection: TaskProjection, time: string): void {
    this.upsertCheckpoint.run(projection.task_id, projection.seq, time, JSON.stringify(projection));
  }
}
