import { isTerminalTaskState } from "../contracts/index.js";
import { describeError, DuckError, ErrorCode, isShutdown } from "../errors/duck-error.js";
import type { ExecutorContext } from "./executor-context.js";
import { outcomeOf, type TaskOutcome } from "./task-outcome.js";

/** The first pause before a task whose events could not be stored is driven again, and the longest. */
const STORAGE_RETRY_FIRST_MS = 1_000;
const STORAGE_RETRY_MAX_MS = 60_000;
/** How often the disk is looked at while a task waits for space (a look costs one statfs). */
const DISK_FULL_PROBE_MS = 500;

/**
 * How a task that stopped with an error ends: failed, cancelled or timed out — or, when the store
 * could not take its events (a full disk, another writer), left as it is: nothing is wrong with the
 * task, so it is not failed (the error is thrown on, for `StorageRetries`).
 */
export function recordEnding(context: ExecutorContext, taskId: string, error: unknown, signal: AbortSignal, timedOut: boolean): void {
  const { store, config } = context;
  // A damaged database file is a storage failure too, one that waiting does not mend (StorageRetries leaves it).
  if (DuckError.isInstance(error) && (error.code === ErrorCode.StorageFailed || error.code === ErrorCode.DiskFull || error.code === ErrorCode.SeqConflict || error.code === ErrorCode.DatabaseCorrupt)) throw error;
  if (isShutdown(signal.reason) || isShutdown(error)) return; // left as it is, to be resumed by the next process
  // Another process drives the task now, or it has ended: this run records nothing more of it.
  if (isFenced(error) || isFenced(signal.reason)) return;
  const projection = store.projection(taskId);
  if (isTerminalTaskState(projection.state)) return;
  // A replay meets the recorded time-out as the error of the call it cut short.
  const taskTimeout = (reason: unknown) => DuckError.isInstance(reason) && reason.code === ErrorCode.TaskTimeout;
  if (timedOut || taskTimeout(signal.reason) || taskTimeout(error)) {
    // Said the same way in a replay: whether it was resumed is in its events, how long each run took is not.
    const resumed = store.listEvents(taskId).some((event) => event.type === "task-resumed");
    store.append(taskId, "task-failed", { code: ErrorCode.TaskTimeout, message: `the task ran longer than ${config.runtime.timeouts.task_ms} ms (runtime.json timeouts.task_ms)${resumed ? ", counting what it ran before it was resumed" : ""}` });
  } else if (signal.aborted) {
    store.append(taskId, "task-cancelled", { reason: signal.reason instanceof Error ? signal.reason.message : String(signal.reason ?? "cancelled") });
  } else {
    context.logger.error({ err: error, task_id: taskId }, "task failed");
    store.append(taskId, "task-failed", describeError(error));
  }
}

function unrefTimeout(fn: () => void, ms: number): NodeJS.Timeout {
  const timer = setTimeout(fn, ms);
  timer.unref();
  return timer;
}

/** True when the error says this process lost the task to another, or tried to record after its end. */
export function isFenced(error: unknown): boolean {
  return DuckError.isInstance(error) && (error.code === ErrorCode.TaskFenced || error.code === ErrorCode.TaskFinished);
}

/**
 * Tasks whose events could not be stored. Their state stays as the disk has it. A storage failure
 * (a full disk) may pass, so such a task is driven again after a growing pause while this process
 * runs; a task another writer changed is that writer's, and is left alone.
 */
export class StorageRetries {
  private readonly attempts = new Map<string, number>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private closed = false;

  constructor(
    private readonly context: ExecutorContext,
    private readonly isActive: (taskId: string) => boolean,
    private readonly driveAgain: (taskId: string, reason: string) => Promise<TaskOutcome>,
    /** Whether the store's disk has room again; a task cut off by a full disk waits for it, looked at often, not for a backoff. */
    private readonly roomToWrite: () => boolean = () => true,
  ) {}

  /** The outcome to report for a task whose ending could not be stored, with a retry arranged when one may help. */
  leftForLater(taskId: string, error: unknown): TaskOutcome {
    const { store, logger } = this.context;
    store.evict(taskId);
    const diskFull = DuckError.isInstance(error) && error.code === ErrorCode.DiskFull;
    const storageFailed = diskFull || (DuckError.isInstance(error) && error.code === ErrorCode.StorageFailed);
    if (storageFailed && !this.closed) {
      const attempt = (this.attempts.get(taskId) ?? 0) + 1;
      this.attempts.set(taskId, attempt);
      const delayMs = diskFull ? DISK_FULL_PROBE_MS : Math.min(STORAGE_RETRY_MAX_MS, STORAGE_RETRY_FIRST_MS * 2 ** (attempt - 1));
      if (attempt === 1 || !diskFull) logger.error({ err: error, task_id: taskId, retry_in_ms: delayMs }, diskFull ? "the disk is full: the task carries on once there is room" : "could not store the task's events; it will be driven again");
      const driveAgain = () => {
        this.timers.delete(taskId);
        if (this.closed || this.isActive(taskId)) return;
        // A full disk is looked at until it has room, without driving the task (and failing) meanwhile.
        if (diskFull && !this.roomToWrite()) {
          this.timers.set(taskId, unrefTimeout(driveAgain, DISK_FULL_PROBE_MS));
          return;
        }
        // Reading the task back may itself fail while the disk is still full: then it waits again.
        Promise.resolve()
          .then(() => this.driveAgain(taskId, "its events could not be stored earlier (storage failed); driving it again"))
          .catch((again: unknown) => this.leftForLater(taskId, again));
      };
      this.timers.set(taskId, unrefTimeout(driveAgain, delayMs));
    } else {
      logger.error({ err: error, task_id: taskId }, "could not record how the task ended; it is left as stored");
    }
    let stored: TaskOutcome | null = null;
    try {
      stored = outcomeOf(store.projection(taskId));
    } catch {
      // The disk cannot even be read: say so with the task's id.
    }
    return { ...(stored ?? { task_id: taskId, state: "running", answer: null, pending_permissions: [], pending_secrets: [] }), error: describeError(error) };
  }

  /** Whether the task waits here to be driven again once its events can be stored. */
  waiting(taskId: string): boolean {
    return this.timers.has(taskId);
  }

  /** The task's events are stored again: its count of failures starts over. */
  succeeded(taskId: string): void {
    this.attempts.delete(taskId);
  }

  close(): void {
    this.closed = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }
}
