import { readFileSync } from "node:fs";
import { Command, CommanderError } from "commander";
import { registerChat } from "./commands/chat.js";
import { registerConfig } from "./commands/config.js";
import { registerDb } from "./commands/db.js";
import { registerDoctor } from "./commands/doctor.js";
import { registerMemory } from "./commands/memory.js";
import { registerMigrate } from "./commands/migrate.js";
import { registerModels } from "./commands/models.js";
import { registerPermissions } from "./commands/permissions.js";
import { registerReplay } from "./commands/replay.js";
import { registerRun } from "./commands/run.js";
import { registerServe } from "./commands/serve.js";
import { registerTasks } from "./commands/tasks.js";
import { registerTelegram } from "./commands/telegram.js";
import { registerUndo } from "./commands/undo.js";
import { outputClosed, reportError } from "./with-ducklm.js";

/** The `ducklm` command: each subcommand registers its own options and action (src/cli/commands/). */
export function buildProgram(): Command {
  const program = new Command();
  program
    .name("ducklm")
    .description("DuckLM: a local, event-driven, multi-model AI agent runtime")
    .version(packageVersion(), "-V, --version", "print DuckLM's version")
    .option("--home <dir>", "data directory (default: $DUCKLM_HOME, else $XDG_DATA_HOME/ducklm, i.e. ~/.local/share/ducklm)")
    .option("--config <dir>", "your config directory, over the bundled defaults (default: $DUCKLM_CONFIG, else ~/.config/ducklm)")
    .option("--workspace <dir>", "directory the tools work in (default: runtime.json workspace)")
    .showHelpAfterError()
    // Before the subcommands are added, so that they inherit it: every usage error exits 2.
    .exitOverride();
  for (const register of [registerRun, registerChat, registerTasks, registerServe, registerTelegram, registerReplay, registerDoctor, registerConfig, registerDb, registerMigrate, registerMemory, registerPermissions, registerUndo, registerModels]) register(program);
  return program;
}

/** The version in package.json, two folders up from this file in the sources and in the build alike. */
function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;
}

export async function main(argv: string[]): Promise<void> {
  // Output piped into a reader that stopped (`ducklm events … | head`) ends the command, quietly; a
  // command following a task first stops the task (see followTask), which would otherwise be left running.
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") return;
    if (!outputClosed()) process.exit(process.exitCode ?? 0);
  });
  const program = buildProgram();
  // `ducklm help bogus` would print the general help as if it had been asked for.
  const [first, second] = argv.slice(2);
  if (first === "help" && second !== undefined && !second.startsWith("-") && !program.commands.some((command) => command.name() === second || command.aliases().includes(second))) {
    console.error(`error: unknown command '${second}'\n`);
    console.error(program.helpInformation());
    process.exitCode = 2;
    return;
  }
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
