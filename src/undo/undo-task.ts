import type { EventPayloads } from "../contracts/index.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import type { ExecutorContext } from "../runtime/executor-context.js";
import type { CheckpointChange } from "./workspace-checkpoints.js";

/** A point a task's workspace can be put back to: just before one of its steps changed it. */
export interface UndoPoint {
  /** The step's `tool-called` event. */
  seq: number;
  step_id: string;
  attempt: number;
  tool: string;
  /** What the step ran, shortened: a command, a file's path. */
  summary: string;
  /** When the snapshot was taken. */
  at: string;
}

export interface UndoResult {
  task_id: string;
  workspace: string;
  /** The point the workspace was put back to; null for a redo (back to before the latest restore). */
  before: UndoPoint | null;
  changes: CheckpointChange[];
  dry_run: boolean;
  /** The state the restore replaced, kept so that it can be taken back (null in a dry run). */
  saved_as: string | null;
}

/** Most changes an event lists; `changed` counts them all. */
const CHANGES_RECORDED = 200;

/** The points a finished task's workspace can be put back to, oldest first. */
export async function undoPoints(context: ExecutorContext, taskId: string): Promise<UndoPoint[]> {
  const task = context.store.requireTask(taskId);
  const checkpoints = checkpointsOf(context);
  const snapshots = new Map((await checkpoints.list(task.workspace, taskId)).map((checkpoint) => [checkpoint.seq, checkpoint]));
  const points: UndoPoint[] = [];
  for (const event of context.store.listEvents(taskId)) {
    if (event.type !== "tool-called") continue;
    const snapshot = snapshots.get(event.seq);
    if (!snapshot) continue;
    const called = event.payload as EventPayloads["tool-called"];
    points.push({ seq: event.seq, step_id: called.step_id, attempt: called.attempt, tool: called.call.tool, summary: summaryOf(called.call.arguments), at: snapshot.at });
  }
  return points;
}

/**
 * Puts a finished task's workspace back as it was before `step` (its first run; the task's first
 * change when no step is named), or, with `redo`, as it was before its latest restore. The restore
 * is recorded on the task (`workspace-restored`); a dry run only says which files would change.
 */
export async function undoTask(context: ExecutorContext, taskId: string, options: { step?: string; dryRun?: boolean; redo?: boolean; by?: string } = {}): Promise<UndoResult> {
  const task = context.store.requireTask(taskId);
  if (!["completed", "failed", "cancelled"].includes(task.state)) {
    throw new DuckError(ErrorCode.UndoUnavailable, `task ${taskId} is ${task.state.replace("_", " ")}: its changes can be undone once it has ended (cancel it first)`, { details: { task_id: taskId, state: task.state } });
  }
  const checkpoints = checkpointsOf(context);
  let before: UndoPoint | null = null;
  let commit: string;
  if (options.redo) {
    const replaced = await checkpoints.lastReplaced(task.workspace, taskId);
    if (!replaced) throw new DuckError(ErrorCode.UndoUnavailable, `task ${taskId} was never undone (or that was pruned): there is nothing to redo`, { details: { task_id: taskId } });
    commit = replaced;
  } else {
    const points = await undoPoints(context, taskId);
    if (points.length === 0) throw new DuckError(ErrorCode.UndoUnavailable, `task ${taskId} has nothing to undo: no step of it changed the workspace with undo on, or its checkpoints were pruned (runtime.json undo.keep_days)`, { details: { task_id: taskId } });
    before = options.step === undefined ? points[0]! : (points.find((point) => point.step_id === options.step) ?? null);
    if (!before) {
      const steps = [...new Set(points.map((point) => point.step_id))];
      throw new DuckError(ErrorCode.InvalidInput, `task ${taskId} has no step ${options.step} that changed the workspace; these did: ${steps.join(", ")}`, { details: { task_id: taskId, steps } });
    }
    const seq = before.seq;
    commit = (await checkpoints.list(task.workspace, taskId)).find((candidate) => candidate.seq === seq)!.commit;
  }
  const restored = await checkpoints.restore(task.workspace, taskId, commit, { dryRun: options.dryRun === true });
  if (!options.dryRun && restored.savedAs) {
    context.store.append(
      taskId,
      "workspace-restored",
      {
        to_seq: before?.seq ?? null,
        step_id: before?.step_id ?? null,
        ...(options.redo ? { redo: true } : {}),
        changes: restored.changes.slice(0, CHANGES_RECORDED),
        changed: restored.changes.length,
        saved_as: restored.savedAs,
        by: options.by ?? "user",
      },
      { durable: true },
    );
  }
  return { task_id: taskId, workspace: task.workspace, before, changes: restored.changes, dry_run: options.dryRun === true, saved_as: restored.savedAs };
}

function checkpointsOf(context: ExecutorContext) {
  if (!context.checkpoints) throw new DuckError(ErrorCode.UndoUnavailable, "undo is off (runtime.json undo.enabled)");
  const why = context.checkpoints.unavailable();
  if (why) throw new DuckError(ErrorCode.UndoUnavailable, `undo is unavailable: ${why}`);
  return context.checkpoints;
}

function summaryOf(args: Record<string, unknown>): string {
  const text = typeof args.command === "string" ? args.command : typeof args.path === "string" ? args.path : typeof args.test_command === "string" ? args.test_command : "";
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > 120 ? `${line.slice(0, 119)}…` : line;
}
