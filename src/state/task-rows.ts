import type { Checkpoint, ConversationSummary, ModelWork, TaskState, TaskSummary } from "../contracts/index.js";
import { BlobStore } from "../storage/blob-store.js";
import type { SqlDatabase, SqlStatement } from "../storage/sql-database.js";
import type { TaskProjection } from "./task-projection.js";

/** A task row as first written, with the time of its `task-received`. */
export interface NewTaskRow {
  id: string;
  text: string;
  session_id: string | null;
  workspace: string;
  time: string;
}

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
  model_work: string | null;
}

/**
 * The `tasks` and `checkpoints` tables: one row per task that follows its events, one snapshot per
 * task at its latest milestone. Written only inside TaskStore's commits.
 */
export class TaskRows {
  private readonly insertTask: SqlStatement;
  private readonly updateTask: SqlStatement;
  private readonly upsertCheckpoint: SqlStatement;
  private readonly selectCheckpoint: SqlStatement<[string]>;
  private readonly selectTask: SqlStatement<[string]>;
  private readonly selectTasks: SqlStatement<[number]>;
  private readonly selectTasksByState: SqlStatement<[string, number]>;
  private readonly selectTasksAfter: SqlStatement<[string, string, string, number]>;
  private readonly selectTasksByStateAfter: SqlStatement<[string, string, string, string, number]>;
  private readonly selectSession: SqlStatement<[string, string, number]>;
  private readonly selectUnfinished: SqlStatement<[]>;
  private readonly selectConversations: SqlStatement<[number]>;
  private readonly selectSessionTasks: SqlStatement<[string, number]>;

  constructor(
    db: SqlDatabase,
    private readonly blobs = new BlobStore(db),
  ) {
    this.insertTask = db.prepare(
      `INSERT INTO tasks (id, text, state, session_id, workspace, created_at, updated_at, last_seq, answer, error, model_work)
       VALUES (@id, @text, @state, @session_id, @workspace, @created_at, @updated_at, @seq, @answer, @error, @model_work)`,
    );
    this.updateTask = db.prepare(
      "UPDATE tasks SET state = @state, updated_at = @time, last_seq = @seq, answer = @answer, error = @error, model_work = @model_work WHERE id = @id",
    );
    this.upsertCheckpoint = db.prepare(
      `INSERT INTO checkpoints (task_id, seq, time, snapshot) VALUES (?, ?, ?, ?)
       ON CONFLICT(task_id) DO UPDATE SET seq = excluded.seq, time = excluded.time, snapshot = excluded.snapshot`,
    );
    this.selectCheckpoint = db.prepare("SELECT task_id, seq, time, snapshot FROM checkpoints WHERE task_id = ?");
    this.selectTask = db.prepare("SELECT * FROM tasks WHERE id = ?");
    this.selectTasks = db.prepare("SELECT * FROM tasks ORDER BY created_at DESC, id LIMIT ?");
    this.selectSession = db.prepare(
      "SELECT * FROM tasks WHERE session_id = ? AND id != ? AND state = 'completed' ORDER BY created_at DESC, id LIMIT ?",
    );
    // In the order they were received: the id of each task's first event, since many may share one instant.
    this.selectUnfinished = db.prepare(
      `SELECT t.* FROM tasks t JOIN events e ON e.task_id = t.id AND e.seq = 1
        WHERE t.state IN ('received', 'queued', 'running') ORDER BY e.id`,
    );
    // A task with no session is a conversation of its own. A memory edit made from a page or a command
    // is recorded as a task, but nobody said it: it is no conversation. Its `kind` is the last key of
    // its first event, so only an unescaped one can end the text so.
    this.selectConversations = db.prepare(
      `SELECT coalesce(session_id, id) AS conversation, MAX(session_id) AS session_id, COUNT(*) AS tasks, MIN(created_at) AS started_at, MAX(updated_at) AS updated_at
         FROM tasks t
        WHERE session_id IS NOT NULL
           OR NOT EXISTS (SELECT 1 FROM events e WHERE e.task_id = t.id AND e.seq = 1 AND e.payload LIKE '%,"kind":"memory-edit"}')
        GROUP BY conversation ORDER BY updated_at DESC, conversation LIMIT ?`,
    );
    this.selectSessionTasks = db.prepare("SELECT * FROM tasks WHERE session_id = ? ORDER BY created_at, id LIMIT ?");
    this.selectTasksByState = db.prepare("SELECT * FROM tasks WHERE state = ? ORDER BY created_at DESC, id LIMIT ?");
    // The page after a task: older ones, and among those created at the same instant, the later ids.
    this.selectTasksAfter = db.prepare("SELECT * FROM tasks WHERE (created_at < ? OR (created_at = ? AND id > ?)) ORDER BY created_at DESC, id LIMIT ?");
    this.selectTasksByStateAfter = db.prepare("SELECT * FROM tasks WHERE state = ? AND (created_at < ? OR (created_at = ? AND id > ?)) ORDER BY created_at DESC, id LIMIT ?");
  }

  /**
   * Writes a new task's row as `projection` has it at `time` (a task's first commit often takes it
   * past several states), so that the commit needs no update after it. Returns false when the row
   * still needs one: a long answer is stored as a blob, whose reference can only follow the row.
   */
  insert(task: NewTaskRow, projection: TaskProjection, time: string): boolean {
    const answerInline = projection.answer === null || this.blobs.keepsInline(projection.answer);
    this.insertTask.run({
      id: task.id,
      text: task.text,
      state: projection.state,
      session_id: task.session_id,
      workspace: task.workspace,
      created_at: task.time,
      updated_at: time,
      seq: projection.seq,
      answer: answerInline ? projection.answer : null,
      error: errorTextOf(projection),
      model_work: modelWorkOf(projection),
    });
    return answerInline;
  }

  update(projection: TaskProjection, time: string): void {
    this.updateTask.run({
      id: projection.task_id,
      state: projection.state,
      time,
      seq: projection.seq,
      answer: this.blobs.packText(projection.task_id, projection.answer),
      error: errorTextOf(projection),
      model_work: modelWorkOf(projection),
    });
  }

  /** Stores the task's snapshot in place of the one before; returns its stored size in bytes. */
  writeCheckpoint(projection: TaskProjection, time: string): number {
    const snapshot = this.blobs.pack(projection.task_id, projection);
    this.upsertCheckpoint.run(projection.task_id, projection.seq, time, snapshot);
    return snapshot.length;
  }

  checkpoint(taskId: string): Checkpoint | null {
    const row = this.selectCheckpoint.get(taskId) as { task_id: string; seq: number; time: string; snapshot: string } | undefined;
    return row ? { task_id: row.task_id, seq: row.seq, time: row.time, snapshot: this.blobs.unpack(row.snapshot) as Record<string, unknown> } : null;
  }

  get(taskId: string): TaskSummary | null {
    const row = this.selectTask.get(taskId) as TaskRow | undefined;
    return row ? this.summary(row) : null;
  }

  /** Newest first, optionally in one state only. */
  list(state: TaskState | null, limit: number, after: { created_at: string; id: string } | null = null): TaskSummary[] {
    const rows = after
      ? state
        ? this.selectTasksByStateAfter.all(state, after.created_at, after.created_at, after.id, limit)
        : this.selectTasksAfter.all(after.created_at, after.created_at, after.id, limit)
      : state
        ? this.selectTasksByState.all(state, limit)
        : this.selectTasks.all(limit);
    return (rows as TaskRow[]).map((row) => this.summary(row));
  }

  /** Conversations, the most recently active first. */
  conversations(limit: number): ConversationSummary[] {
    const groups = this.selectConversations.all(limit) as Array<{ conversation: string; session_id: string | null; tasks: number; started_at: string; updated_at: string }>;
    return groups.map((group) => {
      const tasks = group.session_id === null ? [this.selectTask.get(group.conversation) as TaskRow] : (this.selectSessionTasks.all(group.session_id, 100_000) as TaskRow[]);
      const first = tasks[0]!;
      const latest = tasks.at(-1)!;
      return { id: group.conversation, session_id: group.session_id, title: first.text, tasks: group.tasks, latest_task_id: latest.id, state: latest.state, started_at: group.started_at, updated_at: group.updated_at };
    });
  }

  /** The tasks of one conversation (a session id, or the id of a task with none), oldest first. */
  conversationTasks(id: string, limit: number): TaskSummary[] {
    const inSession = this.selectSessionTasks.all(id, limit) as TaskRow[];
    if (inSession.length > 0) return inSession.map((row) => this.summary(row));
    const lone = this.selectTask.get(id) as TaskRow | undefined;
    return lone && lone.session_id === null ? [this.summary(lone)] : [];
  }

  /** Tasks not finished and not waiting for a person (received, queued, running), oldest first. */
  unfinished(): TaskSummary[] {
    return (this.selectUnfinished.all() as TaskRow[]).map((row) => this.summary(row));
  }

  /** Completed tasks of a conversation before the given one, oldest first. */
  session(sessionId: string, beforeTaskId: string, limit: number): TaskSummary[] {
    const rows = this.selectSession.all(sessionId, beforeTaskId, limit) as TaskRow[];
    return rows.reverse().map((row) => this.summary(row));
  }

  /** The row as a summary; an answer whose blob is missing becomes a note saying so, so one row cannot fail a listing. */
  private summary(row: TaskRow): TaskSummary {
    let answer: string | null;
    try {
      answer = this.blobs.unpackText(row.answer);
    } catch (error) {
      answer = `[the stored answer cannot be read: ${(error as Error).message}]`;
    }
    return { ...row, answer, model_work: parsedModelWork(row.model_work) };
  }
}

function modelWorkOf(projection: TaskProjection): string | null {
  return projection.model_work ? JSON.stringify(projection.model_work) : null;
}

/** The stored totals; a value that does not read back as JSON is left out rather than failing a listing. */
function parsedModelWork(stored: string | null): ModelWork | null {
  if (stored === null) return null;
  try {
    return JSON.parse(stored) as ModelWork;
  } catch {
    return null;
  }
}

/** The task row's `error` column: the code and message of the task's failure, if it failed. */
function errorTextOf(projection: TaskProjection): string | null {
  return projection.error ? `${projection.error.code}: ${projection.error.message}` : null;
}
