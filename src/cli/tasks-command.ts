import { TaskStateSchema } from "../contracts/index.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import type { Runtime } from "../runtime/create-runtime.js";
import { createEventPrinter } from "./run-command.js";

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
    console.log(`${task.id}  ${task.state.padEnd(19)}  ${task.updated_at}  ${text}`);
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
