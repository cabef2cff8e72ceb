import { statSync } from "node:fs";
import { availableParallelism } from "node:os";
import { resolve } from "node:path";
import { UserTaskSchema, isTerminalTaskState, type UserTask } from "../contracts/index.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { scopedSignal } from "../utils/scoped-signal.js";
import type { ExecutorContext } from "./executor-context.js";
import { cacheKeyOf } from "./model-call.js";
import { composeAnswer, finishTask } from "./finish-task.js";
import { routeTask } from "./route-task.js";
import { acceptPlan, failWithStep, runPlan } from "./run-plan.js";
import { afterSteps, loopLimits, recordedSettings } from "./next-iteration.js";
import { recordFeedback, recordPermissionAnswer, recordSecret, revokeApproval, type Feedback, type PermissionAnswer } from "./task-requests.js";
import { outcomeOf, type TaskOutcome } from "./task-outcome.js";
import { isFenced, recordEnding, StorageRetries } from "./task-endings.js";
import { WaitingLine } from "./waiting-line.js";
import { workspaceRefusal } from "./workspace-refusal.js";
import { ownedElsewhereError, type TaskLeases } from "../state/task-leases.js";

/** Tasks that run at once unless runtime.json says: one per core, at least two (asked once; it costs a system call). */
const DEFAULT_MAX_RUNNING = Math.max(2, availableParallelism());

export type { PermissionAnswer } from "./task-requests.js";

/** What a refused submission is told to wait before trying again. */
const QUEUE_FULL_RETRY_AFTER_S = 5;
/** How often a waiter for a task another worker took looks at its state, besides hearing its events. */
const OUTCOME_ELSEWHERE_POLL_MS = 2_000;

export interface RuntimeLoopOptions {
  /** Where tools work when a task names no workspace. */
  workspace: string;
  /** Settles when the shell parser is loaded and permissions.json's examples are checked. */
  ready: Promise<void>;
  /** Which process drives which task: the loop drives only tasks whose lease it holds. */
  leases: TaskLeases;
  /**
   * Whether a task about to be driven waits in line, instead of "while `scheduler.max_running_tasks`
   * run"; a replay follows its recording, and lets the task in (`admit`) where the recording did.
   */
  admission?: (taskId: string) => "run" | "queue";
  /**
   * Workers sharing one PostgreSQL database share their lines: a task waiting here may be taken by a
   * worker with a free place, and this one takes what others offer when its own line is empty.
   * `watch` follows a task another worker drives (its events reach this process's bus).
   */
  sharedLine?: { enabled: () => boolean; watch: (taskId: string, onEvent: () => void) => () => void };
  /** Whether the store's disk has room: a task cut off by a full disk is driven again once it has. Defaults to always. */
  roomToWrite?: () => boolean;
}

export interface TaskHandle {
  taskId: string;
  /** Settles when the loop stops driving the task: finished, failed, cancelled or awaiting permission. */
  done: Promise<TaskOutcome>;
}

export interface SubmitOptions {
  /** Cancels the task. */
  signal?: AbortSignal;
  /**
   * Commit the new task before returning, for callers that hand its id to someone outside this
   * process (the HTTP API). Defaults to false: it commits with the task's first batch.
   */
  durable?: boolean;
  /**
   * Put the task in line even when `max_queued_tasks` wait already: for a CLI run, whose own task is
   * what the process is for (the tasks it resumed at start must not crowd it out).
   */
  evenWhenLineIsFull?: boolean;
}

interface ActiveTask {
  controller: AbortController;
  done: Promise<TaskOutcome>;
}

/** A task as a user hands it over, checked: throws DuckError(INVALID_INPUT) naming each field that is wrong. */
export function checkedUserTask(input: unknown): UserTask {
  const parsed = UserTaskSchema.safeParse(input);
  if (!parsed.success) {
    const message = parsed.error.issues.map((issue) => `${issue.path.join(".") || "task"}: ${issue.message}`).join("; ");
    throw new DuckError(ErrorCode.InvalidInput, message);
  }
  return parsed.data;
}

/**
 * The centre of DuckLM: the only place that executes, through its executors (route the task, run
 * the plan and its steps, finish). Each `drive` takes the task's state as its events leave it and
 * carries it on, so a task picks up where it stopped: after a permission answer, after a restart, or
 * from scratch.
 */
export class RuntimeLoop {
  private readonly active = new Map<string, ActiveTask>();
  /** Tasks waiting for a place among the `max_running_tasks` being driven. */
  private readonly line = new WaitingLine((taskId) => this.context.store.projection(taskId).session_id ?? taskId);
  /** Tasks whose events could not be stored, driven again when the store may take them. */
  private readonly storageRetries: StorageRetries;

  constructor(
    private readonly context: ExecutorContext,
    private readonly options: RuntimeLoopOptions,
  ) {
    this.storageRetries = new StorageRetries(context, (taskId) => this.active.has(taskId), (taskId, reason) => this.resume(taskId, reason), options.roomToWrite);
    // A task this process finds another has taken over (it was paused past its lease): its run stops
    // at once, its tools are killed, and nothing more of it is written here.
    options.leases.onLost = (taskId) => {
      this.active.get(taskId)?.controller.abort(new DuckError(ErrorCode.TaskFenced, `another process took task ${taskId} over while this one was paused`));
      context.logger.warn({ task_id: taskId }, "another process took this task over while this one was paused; its run here stops");
    };
  }

  /** Records a new task and starts driving it. Throws DuckError(INVALID_INPUT) on a bad task. */
  submit(input: unknown, options: SubmitOptions = {}): TaskHandle {
    const task = checkedUserTask(input);
    const workspace = resolve(this.options.workspace, task.workspace ?? ".");
    if (!statSync(workspace, { throwIfNoEntry: false })?.isDirectory()) {
      throw new DuckError(ErrorCode.InvalidInput, `workspace ${workspace} is not a directory`);
    }
    const refusal = workspaceRefusal(workspace, this.context.protectedPaths, this.context.readOnlyPaths);
    if (refusal) throw new DuckError(ErrorCode.InvalidInput, refusal);
    if (!options.evenWhenLineIsFull) this.refuseIfLineIsFull();
    const projection = this.context.store.createTask(
      { text: task.text, session_id: task.session_id, workspace, auto_approve: task.auto_approve },
      { durable: options.durable === true },
    );
    // A new task is this process's from the start: its lease commits with it.
    this.options.leases.claimNew(projection.task_id);
    return { taskId: projection.task_id, done: this.drive(projection.task_id, options) };
  }

  /** Drives a stored task on from its current state. Returns the running drive if there is one. */
  drive(taskId: string, options: SubmitOptions = {}): Promise<TaskOutcome> {
    const running = this.active.get(taskId);
    if (running) return running.done;
    const waiting = this.line.get(taskId);
    if (waiting) return waiting.done;
    if (!this.options.leases.holds(taskId)) {
      let cancelRequested: string | undefined;
      try {
        cancelRequested = this.takeLease(taskId);
      } catch (error) {
        return Promise.reject(error);
      }
      if (cancelRequested) return Promise.resolve(this.cancelNotDriven(taskId, cancelRequested));
    }
    const wait = this.options.admission ? this.options.admission(taskId) === "queue" : this.active.size >= this.maxRunning();
    return wait ? this.queue(taskId, options) : this.start(taskId, options);
  }

  /** Lets a waiting task in now (a replay does where its recording did); false when it is not waiting. */
  admit(taskId: string): boolean {
    const entry = this.line.take(taskId);
    if (!entry) return false;
    entry.begin(this.start(taskId, entry.options));
    return true;
  }

  /** Where a waiting task stands in line (1: next), or null when it is not waiting here. */
  queuePosition(taskId: string): number | null {
    return this.line.position(taskId, this.active.keys());
  }

  private maxRunning(): number {
    return this.context.config.runtime.scheduler.max_running_tasks ?? DEFAULT_MAX_RUNNING;
  }

  private refuseIfLineIsFull(): void {
    const { max_queued_tasks } = this.context.config.runtime.scheduler;
    if (this.options.admission || this.active.size < this.maxRunning() || this.line.size < max_queued_tasks) return;
    throw new DuckError(
      ErrorCode.QueueFull,
      `DuckLM is running as many tasks as it may (${this.active.size}) and as many wait in line as may (${this.line.size}; runtime.json scheduler.max_running_tasks and max_queued_tasks): submit the task again in a little while`,
      { details: { running: this.active.size, queued: this.line.size, retry_after_s: QUEUE_FULL_RETRY_AFTER_S } },
    );
  }

  /** Puts the task in line, recorded as `task-queued`; it runs when a place comes free. */
  private queue(taskId: string, options: SubmitOptions): Promise<TaskOutcome> {
    const entry = this.line.add(taskId, options);
    try {
      this.context.store.append(taskId, "task-queued", { position: this.line.position(taskId, this.active.keys()) ?? this.line.size, running: this.active.size, limit: this.maxRunning() });
    } catch (error) {
      this.line.take(taskId);
      throw error;
    }
    if (this.options.sharedLine?.enabled()) this.options.leases.offer(taskId);
    options.signal?.addEventListener("abort", () => void (this.line.get(taskId) && this.cancel(taskId, "cancelled while it waited to run")), { once: true });
    return entry.done;
  }

  /**
   * Lets tasks in, fairly between conversations (see WaitingLine), while places are free; with a
   * shared line, a task another worker took meanwhile is followed there instead, and places still
   * free once this line is empty go to tasks other workers offer.
   */
  private admitWaiting(): void {
    if (this.options.admission) return;
    for (let next = this.line.next(this.active.keys()); next !== undefined && this.active.size < this.maxRunning(); next = this.line.next(this.active.keys())) {
      let kept: boolean;
      try {
        kept = this.options.leases.takeBack(next);
      } catch (error) {
        // The store cannot say whose the task is now: it waits, and the next place or renewal tries again.
        this.context.logger.warn({ err: error, task_id: next }, "could not withdraw a waiting task's offer");
        return;
      }
      if (kept) this.admit(next);
      else this.takenElsewhere([next]);
    }
    this.claimShared();
  }

  /** Takes tasks other workers offer, for the places free here (none while this line has tasks of its own). */
  claimShared(): void {
    if (!this.options.sharedLine?.enabled() || this.line.size > 0) return;
    const free = this.maxRunning() - this.active.size;
    if (free <= 0) return;
    let claimed: string[];
    try {
      claimed = this.options.leases.claimOffered(free);
    } catch (error) {
      this.context.logger.warn({ err: error }, "could not take tasks other workers offered");
      return;
    }
    for (const taskId of claimed) {
      this.context.store.forgetIfChangedElsewhere(taskId);
      this.context.store.writableAgain(taskId);
      this.drive(taskId).catch((error: unknown) => this.context.logger.warn({ err: error, task_id: taskId }, "a task taken from another worker's line failed to run"));
    }
  }

  /**
   * Tasks of this line that another worker took: whoever waits for one here learns its outcome when
   * that worker's events say it stopped (finished, or waiting for a person).
   */
  takenElsewhere(taskIds: readonly string[]): void {
    for (const taskId of taskIds) {
      const entry = this.line.take(taskId);
      if (!entry) continue;
      entry.begin(this.outcomeElsewhere(taskId));
    }
  }

  private outcomeElsewhere(taskId: string): Promise<TaskOutcome> {
    const { store } = this.context;
    return new Promise((resolve) => {
      let stop: (() => void) | null = null;
      let poll: ReturnType<typeof setInterval> | null = null;
      const check = () => {
        let projection;
        try {
          store.forgetIfChangedElsewhere(taskId);
          projection = store.projection(taskId);
        } catch {
          return false; // The store is out of reach for now: the next event or look tries again.
        }
        if (projection.state === "received" || projection.state === "queued" || projection.state === "running") return false;
        stop?.();
        if (poll) clearInterval(poll);
        resolve(outcomeOf(projection));
        return true;
      };
      if (check()) return;
      stop = this.options.sharedLine?.watch(taskId, check) ?? null;
      // Notices are hints: one lost while a connection was down would leave the waiter waiting, so it also looks now and then.
      poll = setInterval(check, OUTCOME_ELSEWHERE_POLL_MS);
      poll.unref();
    });
  }

  private start(taskId: string, options: SubmitOptions): Promise<TaskOutcome> {
    const { leases } = this.options;
    this.line.started(taskId, this.active.keys());
    const controller = new AbortController();
    const stopped = (finished: boolean) => {
      this.active.delete(taskId);
      // A task waiting to be stored again stays this process's; any other is free for whoever carries it on.
      if (!this.storageRetries.waiting(taskId)) leases.release(taskId, { finished });
      this.admitWaiting();
    };
    const done = this.execute(taskId, controller, options.signal).then(
      (outcome) => {
        stopped(isTerminalTaskState(outcome.state));
        return outcome;
      },
      (error: unknown) => {
        stopped(false);
        throw error;
      },
    );
    this.active.set(taskId, { controller, done });
    return done;
  }

  /** Marks a task left unfinished by an earlier process as resumed and drives it on. */
  resume(taskId: string, reason: string): Promise<TaskOutcome> {
    return this.withLease(taskId, (cancelRequested) => {
      if (cancelRequested) return Promise.resolve(this.cancelNotDriven(taskId, cancelRequested));
      const projection = this.context.store.projection(taskId);
      if (isTerminalTaskState(projection.state)) return Promise.resolve(outcomeOf(projection));
      if (!this.active.has(taskId)) this.context.store.append(taskId, "task-resumed", { from_seq: projection.seq, reason, ...this.confinementMark() });
      return this.drive(taskId);
    });
  }

  /** Answers an open permission request (see `recordPermissionAnswer`) and drives the task on. */
  resolvePermission(taskId: string, requestId: string, answer: PermissionAnswer, by = "user", options: { expiresAt?: Date } = {}): TaskHandle {
    return this.withLease(taskId, () => this.answered(taskId, recordPermissionAnswer(this.context, taskId, requestId, answer, by, options)));
  }

  /** Hands over the secret a step asked for (a sudo password; never stored) and drives the task on. */
  provideSecret(taskId: string, requestId: string, secret: string, by = "user"): TaskHandle {
    return this.withLease(taskId, () => this.answered(taskId, recordSecret(this.context, taskId, requestId, secret, by)));
  }

  private answered(taskId: string, record: "recorded" | "answered-before"): TaskHandle {
    if (record === "recorded") return { taskId, done: this.drive(taskId) };
    return { taskId, done: this.active.get(taskId)?.done ?? Promise.resolve(outcomeOf(this.context.store.projection(taskId))) };
  }

  recordFeedback(taskId: string, feedback: Feedback, by = "user", options: { asRecorded?: boolean } = {}): void {
    recordFeedback(this.context, taskId, feedback, by, options);
  }

  revokeApproval(approvalId: string, by = "user"): void {
    revokeApproval(this.context, approvalId, by);
  }

  /**
   * Cancels a task: a running one is stopped, a waiting one is closed. One that another DuckLM process
   * drives is cancelled by that process, which is asked through the task's lease ("asked-owner").
   */
  cancel(taskId: string, reason = "cancelled by the user"): "cancelled" | "asked-owner" {
    const running = this.active.get(taskId);
    if (running) {
      running.controller.abort(new DuckError(ErrorCode.Cancelled, reason));
      return "cancelled";
    }
    const waiting = this.line.get(taskId);
    if (waiting) {
      // A task another worker took from this line meanwhile is that worker's to cancel.
      if (!this.options.leases.takeBack(taskId)) {
        this.takenElsewhere([taskId]);
        return this.options.leases.requestCancel(taskId, reason) ? "asked-owner" : this.cancel(taskId, reason);
      }
      this.line.take(taskId)!.begin(Promise.resolve(this.cancelNotDriven(taskId, reason)));
      return "cancelled";
    }
    if (this.options.leases.requestCancel(taskId, reason)) return "asked-owner";
    this.withLease(taskId, () => this.cancelNotDriven(taskId, reason));
    return "cancelled";
  }

  /** Records the cancel of a task nobody drives (its lease held here), and its outcome. */
  private cancelNotDriven(taskId: string, reason: string): TaskOutcome {
    let projection = this.context.store.projection(taskId);
    if (!isTerminalTaskState(projection.state)) projection = this.context.store.append(taskId, "task-cancelled", { reason }, { durable: true });
    this.options.leases.release(taskId, { finished: true });
    return outcomeOf(projection);
  }

  /**
   * Runs `work` holding the task's lease, taken before anything is written: another process that
   * drives the task meanwhile makes it throw DUCK_ERR_TASK_OWNED_ELSEWHERE with nothing recorded. A
   * lease taken here for work that started no drive is given back. `work` learns of a cancel another
   * process asked of a previous holder that stopped before carrying it out.
   */
  private withLease<T>(taskId: string, work: (cancelRequested: string | undefined) => T): T {
    if (this.active.has(taskId) || this.line.get(taskId)) return work(undefined);
    const heldBefore = this.options.leases.holds(taskId);
    const cancelRequested = heldBefore ? undefined : this.takeLease(taskId);
    try {
      return work(cancelRequested);
    } finally {
      if (!heldBefore && !this.active.has(taskId) && !this.line.get(taskId)) this.options.leases.release(taskId);
    }
  }

  /**
   * Takes the task's lease, or throws DUCK_ERR_TASK_OWNED_ELSEWHERE; returns a cancel another process
   * asked of a previous holder that stopped before carrying it out.
   */
  private takeLease(taskId: string): string | undefined {
    const lease = this.options.leases.acquire(taskId);
    if (!lease.acquired) throw ownedElsewhereError(taskId, lease.holder);
    // Another process may have carried the task on since this one last read it.
    this.context.store.forgetIfChangedElsewhere(taskId);
    this.context.store.writableAgain(taskId);
    // Taken from a holder that may only be paused: a tool it started may still run there.
    if (lease.previous && this.options.leases.mayStillRun(lease.previous)) this.context.strandedTools.set(taskId, lease.previous);
    else this.context.strandedTools.delete(taskId);
    return lease.cancelRequested;
  }

  /** Ends a running task as if its time limit had passed (replay reproduces recorded time-outs with it). */
  expire(taskId: string): void {
    this.active.get(taskId)?.controller.abort(new DuckError(ErrorCode.TaskTimeout, "the task's time limit passed"));
  }

  isActive(taskId: string): boolean {
    return this.active.has(taskId);
  }

  /** Tasks this process runs now, and those waiting in its line. */
  load(): { running: number; queued: number } {
    return { running: this.active.size, queued: this.line.size };
  }

  /**
   * Stops driving every task without ending it: their state stays as their events left it, and the
   * next start resumes them (a command killed half-way counts as "outcome unknown").
   */
  async close(): Promise<void> {
    this.storageRetries.close();
    // Cancels other processes asked for since the last renewal are carried out, not left to a successor.
    for (const { taskId, reason } of this.options.leases.renew()) this.cancel(taskId, reason);
    // Waiting tasks stay queued in the store: the next start takes them on.
    for (const taskId of this.line.ids()) this.line.take(taskId)!.begin(Promise.resolve(outcomeOf(this.context.store.projection(taskId))));
    const running = [...this.active.values()];
    for (const task of running) task.controller.abort(new DuckError(ErrorCode.Shutdown, "DuckLM is shutting down"));
    await Promise.allSettled(running.map((task) => task.done));
    this.options.leases.close();
    this.context.secrets.clear();
  }

  private async execute(taskId: string, controller: AbortController, external?: AbortSignal): Promise<TaskOutcome> {
    const { config } = this.context;
    // The limit is on the whole task: what it ran before a restart counts, what it waited does not.
    const limit = config.runtime.timeouts.task_ms;
    const ranBefore = this.context.store.projection(taskId).running_ms;
    const scope = scopedSignal([controller.signal, external], Math.max(0, limit - ranBefore), "task", ErrorCode.TaskTimeout, `the task ran longer than ${limit} ms (runtime.json timeouts.task_ms)`);
    const signal = scope.signal;
    let failure: unknown = null;
    try {
      await this.advance(taskId, signal);
    } catch (error) {
      failure = error;
    }
    // Taken over by another process meanwhile: whoever waits here learns the outcome from there.
    if (isFenced(failure) || isFenced(signal.reason) || this.options.leases.isLost(taskId)) {
      scope.dispose();
      this.context.store.evict(taskId);
      this.context.models?.releaseCache?.(cacheKeyOf(taskId, ""));
      return this.outcomeElsewhere(taskId);
    }
    // One task's trouble is that task's: whatever happens here, the process and the other tasks go on.
    try {
      // Told how the task ended while the signal is still the task's (a disposed one may serve another).
      if (failure !== null) recordEnding(this.context, taskId, failure, signal, scope.timedOut);
      // Whoever awaits the outcome may read the task back at once: its events must be on disk.
      this.context.store.flush();
      this.storageRetries.succeeded(taskId);
      const ended = this.context.store.projection(taskId);
      // A task that waits for a person keeps its model state for when it goes on; an ended one frees it.
      if (isTerminalTaskState(ended.state)) this.context.models?.releaseCache?.(cacheKeyOf(taskId, ""));
      return outcomeOf(ended);
    } catch (error) {
      return this.storageRetries.leftForLater(taskId, error);
    } finally {
      scope.dispose();
    }
  }

  /** The phases of a task, each taken when its events say it is due. */
  private async advance(taskId: string, signal: AbortSignal): Promise<void> {
    const { store } = this.context;
    let projection = store.projection(taskId);
    if (isTerminalTaskState(projection.state)) return;
    if (projection.state === "queued") projection = store.append(taskId, "task-dequeued", {});
    if (!projection.started) {
      await this.options.ready;
      const hardStop = await this.context.classifier.findHardStop(projection.text, projection.workspace);
      if (hardStop) {
        store.append(taskId, "task-failed", { code: ErrorCode.HardStop, message: `the task contains a command that is never run: ${hardStop}` });
        return;
      }
      projection = store.append(taskId, "task-started", { ...this.confinementMark(), ...(this.context.config.permissions.confined === "run" ? { confined_commands: "run" as const } : {}), ...loopLimits(this.context), ...recordedSettings(this.context) });
      this.firstSnapshotAhead(projection.workspace);
    }
    // The agent loop: decide, run the steps, let the model see what they did, decide again.
    for (;;) {
      signal.throwIfAborted();
      if (!projection.directive) projection = await routeTask(this.context, projection, signal);
      const directive = projection.directive!;
      if (directive.kind === "respond") return finishTask(this.context, taskId, directive.answer);
      if (directive.kind === "fail") {
        store.append(taskId, "task-failed", { code: ErrorCode.StepFailed, message: directive.reason });
        return;
      }
      if (!projection.plan_order && !acceptPlan(this.context, projection)) return;
      const ending = await runPlan(this.context, taskId, signal);
      if (ending === "waiting") return;
      projection = store.projection(taskId);
      const next = afterSteps(this.context, projection);
      if (next.kind === "decide-again") {
        projection = store.append(taskId, "iteration-started", { iteration: projection.iteration + 1, reason: next.reason });
        continue;
      }
      if (next.kind === "out-of-budget") store.append(taskId, "task-failed", { code: next.code, message: next.message });
      else if (ending === "failed") failWithStep(this.context, taskId);
      else await finishTask(this.context, taskId, composeAnswer(projection));
      return;
    }
  }

  /** Recorded with the task when its commands are not confined, so every decision (and its replay) knows. */
  /**
   * A workspace never snapshotted is hashed whole at its first change, which takes seconds in a large
   * one: begun while the model makes its first decision, the step that changes it finds it done.
   */
  private firstSnapshotAhead(workspace: string): void {
    const checkpoints = this.context.checkpoints;
    if (!checkpoints || checkpoints.unavailable() || checkpoints.hasSnapshots(workspace)) return;
    checkpoints.prepare(workspace).catch((error: unknown) => this.context.logger.warn({ err: error, workspace }, "the workspace could not be read ahead for undo"));
  }

  private confinementMark(): { confinement?: "none" | "off" } {
    const confinement = this.context.sandbox.confinement;
    return confinement === "confined" ? {} : { confinement };
  }
}
