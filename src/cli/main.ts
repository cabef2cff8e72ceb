import { Command, CommanderError } from "commander";
import type { Runtime } from "../runtime/create-runtime.js";
import { openRuntime, reportError, type GlobalOptions } from "./cli-runtime.js";
import { doctorCommand } from "./doctor-command.js";
import { memoryCommand } from "./memory-command.js";
import { replayCommand } from "./replay-command.js";
import { loginCommand, serveCommand } from "./serve-command.js";
import { feedbackCommand, permissionsListCommand, permissionsRevokeCommand } from "./permissions-command.js";
import { modelsBenchCommand, modelsListCommand, modelsPullCommand } from "./models-command.js";
import { runCommand } from "./run-command.js";
import { telegramCommand } from "./telegram-command.js";
import { eventsCommand, tasksCancelCommand, tasksCommand, tasksPruneCommand, tasksResumeCommand } from "./tasks-command.js";

/** What a command that runs tasks needs: the models and the integrations' tools. */
const TASK_RUNNER = { models: true, integrations: true } as const;

/** Opens a runtime for one command, runs it and closes the runtime, turning errors into exit codes. */
async function withRuntime(
  globals: GlobalOptions,
  action: (runtime: Runtime) => Promise<number> | number,
  settings: { models?: boolean; integrations?: boolean } = { models: false },
) {
  let code: number;
  let runtime: Runtime | undefined;
  try {
    runtime = await openRuntime(globals, settings);
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
    .option("--home <dir>", "data directory (default: $DUCKLM_HOME, else $XDG_DATA_HOME/ducklm, i.e. ~/.local/share/ducklm)")
    .option("--config <dir>", "your config directory, over the bundled defaults (default: $DUCKLM_CONFIG, else ~/.config/ducklm)")
    .option("--workspace <dir>", "directory the tools work in (default: runtime.json workspace)")
    .showHelpAfterError();

  program
    .command("run")
    .description("run one task and print its events as they happen")
    .argument("<task...>", "what to do, in your own words")
    .option("--json", "print one JSON event per line")
    .option("--session <id>", "conversation id: earlier tasks of it become history")
    .option("--yes", "run commands that no rule covers without asking (no_always is still asked, hard_stop never runs)")
    .option("--allow-network", "let commands that need the network use it without asking (never DuckLM's own API)")
    .action(async (words: string[], options: { json?: boolean; session?: string; yes?: boolean; allowNetwork?: boolean }) =>
      withRuntime(program.opts(), (runtime) => runCommand(runtime, words.join(" "), options), TASK_RUNNER),
    );

  const tasks = program
    .command("tasks")
    .description("list tasks with their state, newest first")
    .option("--state <state>", "only tasks in this state")
    .option("--limit <n>", "at most this many", "50")
    .option("--json", "one JSON object per line")
    .action(async (options: { state?: string; limit?: string; json?: boolean }) =>
      withRuntime(program.opts(), (runtime) => tasksCommand(runtime, options)),
    );
  tasks
    .command("resume")
    .description("drive an unfinished task on, answering what it waits for at the terminal")
    .argument("<id>", "task id")
    .option("--json", "print one JSON event per line")
    .action(async (id: string, options: { json?: boolean }) => withRuntime(program.opts(), (runtime) => tasksResumeCommand(runtime, id, options), TASK_RUNNER));
  tasks
    .command("prune")
    .description("remove finished tasks with their events and checkpoints (memory stays)")
    .option("--older-than <days>", "finished longer ago than this (default: runtime.json retention)")
    .option("--keep <n>", "keep only the newest n finished tasks")
    .option("--delete", "delete instead of archiving to <home>/archive")
    .action(async (options: { olderThan?: string; keep?: string; delete?: boolean }) => withRuntime(program.opts(), (runtime) => tasksPruneCommand(runtime, options)));
  tasks
    .command("cancel")
    .description("cancel an unfinished task")
    .argument("<id>", "task id")
    .action(async (id: string) => withRuntime(program.opts(), (runtime) => tasksCancelCommand(runtime, id)));

  program
    .command("events")
    .description("list a task's stored events")
    .requiredOption("--task <id>", "task id (see `ducklm tasks`)")
    .option("--since <seq>", "from this event number", "1")
    .option("--json", "one JSON event per line")
    .action(async (options: { task: string; since?: string; json?: boolean }) =>
      withRuntime(program.opts(), (runtime) => eventsCommand(runtime, options)),
    );

  program
    .command("serve")
    .description("serve the HTTP API, live streaming and the web chat (default http://127.0.0.1:8000/)")
    .option("--host <host>", "address to bind (default 127.0.0.1; anything else is reachable from other machines)")
    .option("--port <port>", "port (default 8000; 0 picks a free one)")
    .option("--open", "open the one-time login link in the browser")
    .action(async (options: { host?: string; port?: string; open?: boolean }) => withRuntime(program.opts(), (runtime) => serveCommand(runtime, options), TASK_RUNNER));

  program
    .command("login")
    .description("print a new one-time link that logs a browser into the running `ducklm serve`")
    .option("--open", "open it in the browser")
    .action(async (options: { open?: boolean }) => withRuntime(program.opts(), (runtime) => loginCommand(runtime, options)));

  program
    .command("telegram")
    .description("run a Telegram bot for this DuckLM (token from $DUCKLM_TELEGRAM_TOKEN; users from integrations.json)")
    .option("--allow <ids...>", "also allow these Telegram user ids")
    .option("--api-root <url>", "Bot API root (a self-hosted Bot API server)")
    .action(async (options: { allow?: string[]; apiRoot?: string }) => withRuntime(program.opts(), (runtime) => telegramCommand(runtime, options), TASK_RUNNER));

  program
    .command("replay")
    .description("re-drive a task from its recorded events (no model, no tool) and say whether it matches")
    .argument("[id]", "task id")
    .option("--file <events.jsonl>", "a recording: `ducklm events --json` output or an archive file")
    .option("--json", "print the report as JSON")
    .action(async (id: string | undefined, options: { file?: string; json?: boolean }) =>
      withRuntime(program.opts(), (runtime) => replayCommand(runtime, id, options)),
    );

  program
    .command("doctor")
    .description("check node, config, database, shell parser, confinement, models and plugins")
    .action(async () => runPlain(() => doctorCommand(program.opts())));

  program
    .command("memory")
    .description("long-term memory: search <words> | list | add <text> | rm <id> | pin <id> | unpin <id> | cleanup | reindex | stats")
    .argument("<action>", "search, list, add, rm, pin, unpin, cleanup, reindex or stats")
    .argument("[words...]", "the query, the text, or the entry id")
    .option("--kind <kind>", "for add: fact, procedure, outcome or note", "fact")
    .option("--limit <n>", "for search and list", "10")
    .option("--json", "print JSON")
    .action(async (action: string, words: string[], options: { json?: boolean; kind?: string; limit?: string }) =>
      withRuntime(program.opts(), (runtime) => memoryCommand(runtime, action, words, options), { models: true }),
    );

  const permissions = program.command("permissions").description("remembered approvals");
  permissions
    .command("list")
    .description("every remembered approval: command, directory, state")
    .option("--json", "one JSON object per line")
    .action(async (options: { json?: boolean }) => withRuntime(program.opts(), (runtime) => permissionsListCommand(runtime, options)));
  permissions
    .command("revoke")
    .description("stop a remembered approval from applying")
    .argument("<id>", "approval id (see `ducklm permissions list`)")
    .action(async (id: string) => withRuntime(program.opts(), (runtime) => permissionsRevokeCommand(runtime, id)));

  program
    .command("feedback")
    .description("rate a task's answer, or one of its steps, for the critic's calibration")
    .argument("<rating>", "up or down")
    .argument("[comment...]", "why")
    .requiredOption("--task <id>", "task id")
    .option("--step <id>", "a step of the task, instead of its answer")
    .action(async (rating: string, comment: string[], options: { task: string; step?: string }) =>
      withRuntime(program.opts(), (runtime) => feedbackCommand(runtime, rating, comment, options)),
    );

  const models = program.command("models").description("local GGUF models: list, download, measure");
  models
    .command("list")
    .description("roles, their files, present or missing, size, and which model serves each")
    .option("--json", "one JSON object per line")
    .action(async (options: { json?: boolean }) => runPlain(() => modelsListCommand(program.opts(), options)));
  models
    .command("pull")
    .description("download a GGUF file (resumable) into <home>/models and optionally assign it to a role")
    .argument("<source>", "an http(s) URL or hf:user/repo/file.gguf")
    .option("--role <role>", "point this role at the file in config/models.json")
    .option("--sha256 <hex>", "refuse the file unless its SHA-256 matches")
    .option("--size <bytes>", "refuse the file unless it has this size")
    .action(async (source: string, options: { role?: string; sha256?: string; size?: string }) =>
      runPlain(() => modelsPullCommand(program.opts(), source, options)),
    );
  models
    .command("bench")
    .description("prompt and generation tokens per second of a role's model")
    .argument("<role>", "thinker, json_compiler, critic, coder, sys_util")
    .option("--tokens <n>", "tokens to generate", "128")
    .action(async (role: string, options: { tokens?: string }) => runPlain(() => modelsBenchCommand(program.opts(), role, options)));

  return program;
}

/** Runs a command that needs no runtime, turning errors into exit codes. */
async function runPlain(action: () => Promise<number> | number): Promise<void> {
  try {
    process.exitCode = await action();
  } catch (error) {
    process.exitCode = reportError(error);
  }
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
