import { hostname } from "node:os";
import type { Logger } from "pino";
import type { DuckConfig } from "../config/config-schemas.js";
import type { ConversationSummary, DuckEvent, EventPayloads, EventTypeName, MemoryEntry, MemoryHit, MemoryKind, PreApproval, TaskState, TaskSummary } from "../contracts/index.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import type { Approval } from "../permissions/approval-store.js";
import type { PruneResult } from "../state/task-retention.js";
import { pruneOptionsFrom } from "../state/task-retention.js";
import type { Runtime, StartOptions, StartReport } from "./create-runtime.js";
import { checkCommand, type CommandVerdict } from "./check-command.js";
import { undoPoints, undoTask, type UndoPoint, type UndoResult } from "../undo/undo-task.js";
import { editMemory, type MemoryEditResult } from "./edit-memory.js";
import type { PermissionAnswer, SubmitOptions, TaskHandle } from "./runtime-loop.js";
import type { Feedback } from "./task-requests.js";
import { outcomeOf, type TaskOutcome } from "./task-outcome.js";

/** An event with its payload typed by its `type`: switch on `type` and the payload follows. */
export type TypedEvent = { [T in EventTypeName]: Omit<DuckEvent, "type" | "payload"> & { type: T; payload: EventPayloads[T] } }[EventTypeName];

/** A task to run: the request in the user's words, and what it may do without asking. */
export interface TaskInput {
  text: string;
  /** Groups tasks of one conversation: earlier tasks of the session become history. */
  session_id?: string;
  /** Where the tools work, relative to the runtime's workspace. Defaults to it. */
  workspace?: string;
  /** What is approved in advance: `unknown` commands, `network` use. Never no_always or hard_stop. */
  auto_approve?: PreApproval[];
}

/** A task as stored, with what it waits for. */
export interface TaskView extends TaskOutcome {
  task: TaskSummary;
  /** Where a queued task stands in line in the process that holds it (1: next); null otherwise. */
  queue_position: number | null;
}

/** What the runtime can do here: tools, and whether commands are confined. */
export interface RuntimeStatus {
  tools: string[];
  sandbox: { confined: boolean; note: string; warning: string | null };
  /**
   * Whether the store takes writes (while it does not, a full disk say, since when and why), and which
   * store it is: SQLite (its file) or PostgreSQL (its server and database, without a password).
   */
  storage: ({ ok: true } | { ok: false; failing_since: string; message: string }) & { backend: "sqlite" | "postgres"; location: string };
  /** This process as a driver of tasks: its lease owner id (which /tasks and other workers' leases name), PID and host. */
  worker: { id: string; pid: number; host: string };
  /** Tasks this process runs now, and those waiting in its line. */
  tasks: { running: number; queued: number };
}

/**
 * DuckLM as its surfaces see it — the HTTP server, the CLI, the Telegram bot and programs embedding
 * it: commands and queries, never the database. Every change goes through the RuntimeLoop or an
 * executor and leaves events.
 */
export interface DuckLM {
  /** DuckLM's data folder (database, token, logs, models). */
  readonly home: string;
  /** Where tasks work unless they name another folder. */
  readonly workspace: string;
  /** The settings in force (read-only). */
  readonly config: DuckConfig;
  readonly logger: Logger;
  /**
   * Start-up work: checks, retention, the memory cleanup schedule, resuming unfinished tasks no other
   * live process drives; with `adoptOrphans`, also those whose process stops later.
   */
  start(options?: StartOptions): Promise<StartReport>;
  /** Stops driving tasks (they resume at the next start), releases models and closes the store. */
  close(): Promise<void>;

  /** Records a task and starts running it; `done` settles when it finishes or waits for the user. */
  submit(task: TaskInput, options?: SubmitOptions): TaskHandle;
  /**
   * Cancels a task. One that another DuckLM process drives is cancelled there, within a few seconds
   * ("asked-owner"); the events show when.
   */
  cancel(taskId: string, reason?: string): "cancelled" | "asked-owner";
  /** Drives a stored, unfinished task on (after a restart, or when resumption was set to `ask`). */
  resume(taskId: string, reason?: string): Promise<TaskOutcome>;
  /** Answers a permission request; `allow_always` remembers the exact command in that directory. */
  answerPermission(taskId: string, requestId: string, answer: PermissionAnswer, options?: { by?: string; expiresAt?: Date }): TaskHandle;
  /** Hands over a password a step asked for; it serves that one run and is never stored. */
  provideSecret(taskId: string, requestId: string, secret: string, by?: string): TaskHandle;
  feedback(taskId: string, feedback: Feedback, by?: string): void;

  getTask(taskId: string): TaskView;
  /** Newest first; `after` continues past a task of the previous page (see `GET /tasks?cursor=`). */
  listTasks(options?: { state?: TaskState; limit?: number; after?: { created_at: string; id: string } }): TaskSummary[];
  /** Conversations — a session's tasks, or a task sent without one — the most recently active first. */
  listConversations(limit?: number): ConversationSummary[];
  /** One conversation's tasks, oldest first; DUCK_ERR_TASK_NOT_FOUND when there is none by that id. */
  conversation(id: string): TaskSummary[];
  events(taskId: string, options?: { since?: number; limit?: number }): TypedEvent[];
  recentEvents(limit?: number): TypedEvent[];
  /** A task's stored events from `fromSeq`, then live ones, in order, with no gap or duplicate. */
  subscribe(taskId: string, handler: (event: TypedEvent) => void, options?: { fromSeq?: number }): () => void;
  subscribeAll(handler: (event: TypedEvent) => void): () => void;
  pruneTasks(options?: { olderThanDays?: number; keep?: number; delete?: boolean }): PruneResult;

  memory: {
    recall(query: string, limit?: number): Promise<MemoryHit[]>;
    list(limit?: number): MemoryEntry[];
    stats(): ReturnType<Runtime["memory"]["stats"]>;
    /** Stores a memory (a near-duplicate reinforces the entry it repeats); recorded as a memory-edit task. */
    remember(text: string, kind?: MemoryKind, by?: string): Promise<MemoryEditResult>;
    forget(id: number, by?: string): Promise<MemoryEditResult>;
    pin(id: number, pinned: boolean, by?: string): Promise<MemoryEditResult>;
    cleanup(): ReturnType<Runtime["memory"]["cleanup"]>;
    reindex(): Promise<number>;
  };
  /**
   * Puts a finished task's workspace back as it was before `step` (its first change when no step is
   * named), or with `redo` as it was before the latest undo; `dryRun` only lists the files that would
   * change. Recorded as `workspace-restored`.
   */
  undo(taskId: string, options?: { step?: string; dryRun?: boolean; redo?: boolean; by?: string }): Promise<UndoResult>;
  /** The steps of a task whose workspace can be put back as it was before them, oldest first. */
  undoPoints(taskId: string): Promise<UndoPoint[]>;
  /** The decision a shell command would get in `workspace` (the default one if not given), without running it. */
  checkCommand(command: string, options?: { workspace?: string }): Promise<CommandVerdict>;
  approvals: {
    list(): Approval[];
    revoke(approvalId: string, by?: string): void;
  };
  /** One-time login codes and browser sessions (the web chat's). */
  logins: Pick<Runtime["logins"], "issueCode" | "redeemCode" | "checkSession" | "endSession">;
  status(): RuntimeStatus;
}

/** The API over a runtime (the composition root builds the runtime; this is what surfaces get). */
export function ducklmOf(runtime: Runtime): DuckLM {
  const { loop, store, memory, approvals, logins } = runtime;
  const typed = (events: DuckEvent[]) => events as TypedEvent[];
  return {
    home: runtime.home,
    workspace: runtime.workspace,
    config: runtime.config,
    logger: runtime.logger,
    start: (options) => runtime.start(options),
    close: () => runtime.close(),
    submit: (task, options) => loop.submit(task, options),
    cancel(taskId, reason) {
      const task = store.requireTask(taskId);
      if (["completed", "failed", "cancelled"].includes(task.state)) throw new DuckError(ErrorCode.TaskNotActive, `task ${taskId} is already ${task.state}`);
      return loop.cancel(taskId, reason);
    },
    resume: (taskId, reason = "resumed on request") => {
      store.requireTask(taskId);
      return loop.resume(taskId, reason);
    },
    answerPermission: (taskId, requestId, answer, options = {}) => {
      store.requireTask(taskId);
      return loop.resolvePermission(taskId, requestId, answer, options.by ?? "user", options.expiresAt ? { expiresAt: options.expiresAt } : {});
    },
    provideSecret: (taskId, requestId, secret, by = "user") => {
      store.requireTask(taskId);
      return loop.provideSecret(taskId, requestId, secret, by);
    },
    feedback: (taskId, feedback, by = "user") => loop.recordFeedback(taskId, feedback, by),
    getTask(taskId) {
      const task = store.requireTask(taskId);
      return { task, ...outcomeOf(store.projection(task.id)), queue_position: loop.queuePosition(task.id) };
    },
    listTasks: (options = {}) => store.listTasks(options),
    listConversations: (limit) => store.listConversations(limit),
    conversation(id) {
      const tasks = store.conversationTasks(id);
      if (tasks.length === 0) throw new DuckError(ErrorCode.TaskNotFound, `no conversation with id ${id}`, { details: { conversation_id: id } });
      return tasks;
    },
    events: (taskId, options = {}) => {
      store.requireTask(taskId);
      return typed(store.listEvents(taskId, options.since ?? 1, options.limit));
    },
    recentEvents: (limit = 100) => typed(store.recentEvents(limit)),
    subscribe: (taskId, handler, options = {}) => runtime.bus.subscribe(taskId, (event) => handler(event as TypedEvent), options),
    subscribeAll: (handler) => runtime.bus.subscribeAll((event) => handler(event as TypedEvent)),
    pruneTasks(options = {}) {
      const defaults = pruneOptionsFrom(runtime.config.runtime.retention, runtime.home);
      return store.prune({
        ...defaults,
        ...(options.olderThanDays !== undefined ? { olderThan: new Date(Date.now() - options.olderThanDays * 86_400_000) } : {}),
        ...(options.keep !== undefined ? { keepNewest: options.keep } : {}),
        ...(options.delete ? { action: "delete" as const } : {}),
      });
    },
    memory: {
      recall: (query, limit = 5) => memory.recall(query, limit),
      list: (limit = 50) => memory.store.list(limit),
      stats: () => memory.stats(),
      remember: (text, kind = "fact", by = "user") => editMemory(runtime.context, runtime.workspace, { action: "add", text, kind }, by),
      forget: (id, by = "user") => editMemory(runtime.context, runtime.workspace, { action: "forget", id }, by),
      pin: (id, pinned, by = "user") => editMemory(runtime.context, runtime.workspace, { action: "pin", id, pinned }, by),
      cleanup: () => memory.cleanup(),
      reindex: () => memory.reindex(),
    },
    undo: (taskId, options = {}) => undoTask(runtime.context, taskId, options),
    undoPoints: (taskId) => undoPoints(runtime.context, taskId),
    checkCommand: (command, options = {}) => checkCommand(runtime.context, command, options.workspace ?? runtime.workspace),
    approvals: {
      list: () => approvals.list(),
      revoke: (approvalId, by = "user") => loop.revokeApproval(approvalId, by),
    },
    logins: {
      issueCode: () => logins.issueCode(),
      redeemCode: (code) => logins.redeemCode(code),
      checkSession: (session) => logins.checkSession(session),
      endSession: (session) => logins.endSession(session),
    },
    status: () => ({
      tools: runtime.tools.names(),
      sandbox: { confined: runtime.sandbox.kind === "bwrap", note: runtime.sandbox.note, warning: runtime.sandboxWarning },
      storage: {
        ...((failing) => (failing ? { ok: false as const, failing_since: failing.since, message: failing.message } : { ok: true as const }))(store.writeHealth()),
        backend: runtime.storage.backend,
        location: runtime.storage.location,
      },
      worker: { id: runtime.leases.owner, pid: process.pid, host: hostname() },
      tasks: loop.load(),
    }),
  };
}
