import { Command, CommanderError } from "commander";
import { openRuntime, reportError, type GlobalOptions } from "./cli-runtime.js";
import { runCommand } from "./run-command.js";
import { eventsCommand, tasksCommand } from "./tasks-command.js";

/** Opens a runtime for one command, runs it and closes the runtime, turning errors into exit codes. */
async function withRuntime(globals: GlobalOptions, action: (runtime: ReturnType<typeof openRuntime>) => Promise<number> | number) {
  let code: number;
  let runtime: ReturnType<typeof openRuntime> | undefined;
  try {
    runtime = openRuntime(globals);
    code = await action(runtime);
  } catch (error) {
    code = reportError(error);
  } finally {
    await runtime?.close();
  }
  process.exitCode = code;
}

export function buildProgram(): Command {
  const program = new Command();
  program
    .name("ducklm")
    .description("DuckLM: a local, event-driven, multi-model AI agent runtime")
    .option("--home <dir>", "data directory (default: $DUCKLM_HOME or ./data)")
    .option("--config <dir>", "config directory (default: $DUCKLM_CONFIG, ./config, or the bundled one)")
    .option("--workspace <dir>", "directory the tools work in (default: runtime.json workspace)")
    .showHelpAfterError();

  program
    .command("run")
    .description("run one task and print its events as they happen")
    .argument("<task...>", "what to do, in your own words")
    .option("--json", "print one JSON event per line")
    .option("--session <id>", "conversation id: earlier tasks of it become history")
    .action(async (words: string[], options: { json?: boolean; session?: string }) =>
      withRuntime(program.opts(), (runtime) => runCommand(runtime, words.join(" "), options)),
    );

  program
    .command("tasks")
    .description("list tasks with their state, newest first")
    .option("--state <state>", "only tasks in this state")
    .option("--limit <n>", "at most this many", "50")
    .option("--json", "one JSON object per line")
    .action(async (options: { state?: string; limit?: string; json?: boolean }) =>
      withRuntime(program.opts(), (runtime) => tasksCommand(runtime, options)),
    );

  program
    .command("events")
    .description("list a task's stored events")
    .requiredOption("--task <id>", "task id (see `ducklm tasks`)")
    .option("--since <seq>", "from this event number", "1")
    .option("--json", "one JSON event per line")
    .action(async (options: { task: string; since?: string; json?: boolean }) =>
      withRuntime(program.opts(), (runtime) => eventsCommand(runtime, options)),
    );

  return program;
}

export async function main(argv: string[]): Promise<void> {
  const program = buildProgram().exitOverride();
  try {
    await program.parseAsync(argv);
  } catch (error) {
    if (error instanceof CommanderError) {
      process.exitCode = error.exitCode === 0 ? 0 : 2;
      return;
    }
    process.exitCode = reportError(error);
  }
}

await main(process.argv);
