import type { Command } from "commander";
import { isTerminalTaskState, TaskStateSchema, type DuckEvent } from "../../contracts/index.js";
import { DuckError, ErrorCode } from "../../errors/duck-error.js";
import { createEventPrinter, followTask, modelWorkBrief } from "../follow-task.js";
import { wholeNumberOption } from "../cli-numbers.js";
import { formatEvent } from "../format-event.js";
import { oneLine } from "../terminal-text.js";
import { TASK_RUNNER, withDuckLM, withTaskStore, type GlobalOptions } from "../with-ducklm.js";

/** `ducklm tasks` with `resume`, `cancel` and `prune`, and `ducklm events`. */
export function registerTasks(program: Command): void {
  const globals = () => program.opts<GlobalOptions>();
  const tasks = program
    .command("tasks")
    .description("list tasks with their state, newest first")
    .option("--state <state>", "only tasks in this state")
    .option("--limit <n>", "at most this many", "50")
    .option("--json", "one JSON object per line")
    .action(async (options: { state?: string; limit?: string; json?: boolean }) =>
      withTaskStore(globals(), (store) => {
        const state = options.state === undefined ? undefined : TaskStateSchema.safeParse(options.state);
        if (state && !state.success) throw new DuckError(ErrorCode.InvalidInput, `--state must be one of ${TaskStateSchema.options.join(", ")}`);
        const listed = store.listTasks({ ...(state?.data ? { state: state.data } : {}), limit: wholeNumberOption(options.limit, 50, "--limit") });
        if (options.json) for (const task of listed) console.log(JSON.stringify(task));
        else if (listed.length === 0) console.log(state?.data ? `no ${state.data} tasks` : 'no tasks yet: try  ducklm run "read file README.md"');
        else for (const task of listed) console.log(`${task.id}  ${task.state.padEnd(19)}  ${task.updated_at}  ${oneLine(task.text.length > 60 ? `${task.text.slice(0, 57)}…` : task.text)}${task.model_work ? `  (${modelWorkBrief(task.model_work)})` : ""}`);
        return 0;
      }),
    );
  tasks
    .command("resume")
    .description("drive an unfinished task on, answering what it waits for at the terminal")
    .argument("<id>", "task id")
    .option("--json", "print one JSON event per line")
    .action(async (id: string, options: { json?: boolean }) =>
      withDuckLM(
        globals(),
        (ducklm) => {
          const view = ducklm.getTask(id);
          const fromSeq = view.task.last_seq + 1;
          if (view.state === "awaiting_permission") return followTask(ducklm, id, Promise.resolve(view), { ...options, fromSeq });
          if (isTerminalTaskState(view.state)) throw new DuckError(ErrorCode.TaskNotActive, `task ${id} is ${view.state}; there is nothing to resume`);
          return followTask(ducklm, id, ducklm.resume(id, "resumed from the command line"), { ...options, fromSeq });
        },
        TASK_RUNNER,
      ),
    );
  tasks
    .command("cancel")
    .description("cancel an unfinished task")
    .argument("<id>", "task id")
    .action(async (id: string) =>
      withDuckLM(globals(), (ducklm) => {
        const how = ducklm.cancel(id, "cancelled from the command line");
        console.log(how === "cancelled" ? `cancelled ${id}` : `asked the DuckLM process that holds ${id} to cancel it; \`ducklm events --task ${id}\` shows when it has`);
        return 0;
      }),
    );
  tasks
    .command("prune")
    .description("remove finished tasks with their events and checkpoints (memory stays)")
    .option("--older-than <days>", "finished longer ago than this (default: runtime.json retention)")
    .option("--keep <n>", "keep only the newest n finished tasks")
    .option("--delete", "delete instead of archiving to <home>/archive")
    .action(async (options: { olderThan?: string; keep?: string; delete?: boolean }) =>
      withDuckLM(globals(), (ducklm) => {
        const days = options.olderThan === undefined ? undefined : Number(options.olderThan);
        if (days !== undefined && !(days >= 0)) throw new DuckError(ErrorCode.InvalidInput, "--older-than must be a number of days");
        const keep = options.keep === undefined ? undefined : wholeNumberOption(options.keep, 0, "--keep", 0);
        const result = ducklm.pruneTasks({ ...(days !== undefined ? { olderThanDays: days } : {}), ...(keep !== undefined ? { keep } : {}), ...(options.delete ? { delete: true } : {}) });
        console.log(`pruned ${result.pruned.length} finished task(s)${result.archivedTo ? `, archived to ${result.archivedTo}` : ""}; memory is kept`);
        return 0;
      }),
    );

  program
    .command("events")
    .description("list a task's stored events")
    .requiredOption("--task <id>", "task id (see `ducklm tasks`)")
    .option("--since <seq>", "from this event number", "1")
    .option("--json", "one JSON event per line")
    .action(async (options: { task: string; since?: string; json?: boolean }) =>
      withDuckLM(globals(), (ducklm) => {
        const events = ducklm.events(options.task, { since: wholeNumberOption(options.since, 1, "--since", 0) });
        const print = createEventPrinter(true);
        for (const event of events) {
          if (options.json) print(event);
          else process.stdout.write(`#${String(event.seq).padStart(3)} ${event.time} ${event.type}${eventSummary(event)}\n`);
        }
        return 0;
      }),
    );
}

/** Longest account of an event on its line of `ducklm events`; `--json` has the whole of it. */
const EVENT_SUMMARY_CHARS = 160;

/** What an event says (a decision's number and reason, a failure's code and message), on the event's line. */
function eventSummary(event: DuckEvent): string {
  const text = formatEvent(event);
  if (!text) return "";
  const line = oneLine(text.trim().replace(/^[▸↻▶✓✗✔✘⊘←]\s*/u, ""));
  return `  ${line.length > EVENT_SUMMARY_CHARS ? `${line.slice(0, EVENT_SUMMARY_CHARS)}…` : line}`;
}
