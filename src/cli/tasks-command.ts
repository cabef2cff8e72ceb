import { safeForTerminal } from "./terminal-text.js";
import { isTerminalTaskState, TaskStateSchema } from "../contracts/index.js";
import { outcomeOf } from "../runtime/task-outcome.js";
import { pruneOptionsFrom } from "../state/task-retention.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import type { Runtime } from "../runtime/create-runtime.js";
import { createEventPrinter, followTask } from "./run-command.js";

export function tasksCommand(runtime: Runtime, options: { state?: string; limit?: string; json?: boolean }): number {
  const state = options.state === undefined ? undefined : TaskStateSchema.safeParse(options.state);
  if (state && !state.success) {
    throw new DuckError(ErrorCode.InvalidInput, `--state must be one of ${TaskStateSchema.options.join(", ")}`);
  }
  const limit = options.limit === undefined ? 50 : Number(options.limit);
  if (!Number.isInteger(limit) || limit <= 0) throw new DuckError(ErrorCode.InvalidInput, "--limit must be a positive whole number");
  const tasks = runtime.store.listTasks({ ...(state?.data ? { state: state.data } : {}), limit });
  if (options.json) {
    for (const task of tasks) console.log(JSON.stringify(task));
    return 0;
  }
  if (tasks.length === 0) {
    console.log("no tasks yet: try  ducklm run \"read file README.md\"");
    return 0;
  }
  for (const task of tasks) {
    const text = task.text.length > 60 ? `${task.text.slice(0, 57)}…` : task.text;
    console.log(`${task.id}  ${task.state.padEnd(19)}  ${task.updated_at}  ${safeForTerminal(text)}`);
  }
  return 0;
}

export function eventsCommand(runtime: Runtime, options: { task: string; since?: string; json?: boolean }): number {
  runtime.store.requireTask(options.task);
  const since = options.since === undefined ? 1 : Number(options.since);
  if (!Number.isInteger(since) || since < 1) throw new DuckError(ErrorCode.InvalidInput, "--since must be a whole number from 1");
  const print = createEventPrinter(options.json === true);
  for (const event of runtime.store.listEvents(options.task, since)) {
    if (options.json) print(event);
    else {
      process.stdout.write(`#${String(event.seq).padStart(3)} ${event.time} ${event.type}\n`);
    }
  }
  return 0;
}

/** `ducklm tasks resume ID`: drives a task on (asking at the terminal for what it waits on). */
export async function tasksResumeCommand(runtime: Runtime, taskId: string, options: { json?: boolean }): Promise<number> {
  const task = runtime.store.requireTask(taskId);
  const fromSeq = task.last_seq + 1;
  if (task.state === "awaiting_permission") {
    return followTask(runtime, taskId, Promise.resolve(outcomeOf(runtime.store.projection(taskId))), { ...options, fromSeq });
  }
  if (isTerminalTaskState(task.state)) throw new DuckError(ErrorCode.TaskNotActive, `task ${taskId} is ${task.state}; there is nothing to resume`);
  return followTask(runtime, taskId, runtime.loop.resume(taskId, "resumed from the command line"), { ...options, fromSeq });
}

/** `ducklm tasks cancel ID`. */
export function tasksCancelCommand(runtime: Runtime, taskId: string): number {
  const task = runtime.store.requireTask(taskId);
  if (isTerminalTaskState(task.state)) throw new DuckError(ErrorCode.TaskNotActive, `task ${taskId} is already ${task.state}`);
  runtime.loop.cancel(taskId, "cancelled from the command line");
  console.log(`cancelled ${taskId}`);
  return 0;
}

/** `ducklm tasks prune [--older-than DAYS] [--keep N] [--delete]`: retention on demand. */
export function tasksPruneCommand(runtime: Runtime, options: { olderThan?: string; keep?: string; delete?: boolean }): number {
  const base = pruneOptionsFrom(runtime.config.runtime.retention, runtime.home);
  const days = options.olderThan === undefined ? undefined : Number(options.olderThan);
  if (days !== undefined && !(days >= 0)) throw new DuckError(ErrorCode.InvalidInput, "--older-than must be a number of days");
  const keep = options.keep === undefined ? undefined : Number(options.keep);
  if (keep !== undefined && !(Number.isInteger(keep) && keep >= 0)) throw new DuckError(ErrorCode.InvalidInput, "--keep must be a whole number");
  const result = runtime.store.prune({
    ...base,
    ...(days !== undefined ? { olderThan: new Date(Date.now() - days * 86_400_000) } : {}),
    ...(keep !== undefined ? { keepNewest: keep } : {}),
    ...(options.delete ? { action: "delete" as const } : {}),
  });
  console.log(`pruned ${result.pruned.length} finished task(s)${result.archivedTo ? `, archived to ${result.archivedTo}` : ""}; memory is kept`);
  return 0;
}
