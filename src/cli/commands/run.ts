import type { Command } from "commander";
import { DuckError, ErrorCode } from "../../errors/duck-error.js";
import { finishLeftovers, followTask, startAndResume } from "../follow-task.js";
import { TASK_RUNNER, withDuckLM, type GlobalOptions } from "../with-ducklm.js";

/** `ducklm run "<task>"`: runs one task, printing its events; asks for permission at the terminal. */
export function registerRun(program: Command): void {
  program
    .command("run")
    .description("run one task and print its events as they happen")
    .argument("<task...>", "what to do, in your own words; `-` reads it from standard input")
    .option("--json", "print one JSON event per line")
    .option("--verbose", "print the JSON the models write for DuckLM too (recall decisions, directives, critic scores)")
    .option("--session <id>", "conversation id: earlier tasks of it become history")
    .option("--yes", "run commands that no rule covers without asking (no_always is still asked, hard_stop never runs)")
    .option("--allow-network", "let commands that need the network use it without asking (never DuckLM's own API)")
    .option("--no-resume", "leave tasks an earlier run left unfinished as they are (they are listed; `ducklm tasks resume ID` takes one on)")
    .action(async (words: string[], options: { json?: boolean; verbose?: boolean; session?: string; yes?: boolean; allowNetwork?: boolean; resume: boolean }, command: Command) => {
      if (words[0] === "-" && words.length > 1) command.error("error: `-` reads the task from standard input and takes no other words: give `-` alone, or the task as words");
      return withDuckLM(
        program.opts<GlobalOptions>(),
        async (ducklm) => {
          const text = words.length === 1 && words[0] === "-" ? await taskTextFromStdin() : checkedText(words.join(" "));
          const task = {
            text,
            ...(options.session ? { session_id: options.session } : {}),
            auto_approve: [...(options.yes ? (["unknown"] as const) : []), ...(options.allowNetwork ? (["network"] as const) : [])],
          };
          // Refused before anything starts: a bad task must not first resume what other runs left.
          const { checkedUserTask } = await import("../../runtime/runtime-loop.js");
          checkedUserTask(task);
          const leftovers = await startAndResume(ducklm, options.resume ? {} : { resume: "never" });
          const handle = ducklm.submit(task, { evenWhenLineIsFull: true });
          const code = await followTask(ducklm, handle.taskId, handle.done, options);
          // Closing now would only interrupt them again.
          await finishLeftovers(leftovers);
          return code;
        },
        TASK_RUNNER,
      );
    });
}

/** The task text piped in (`ducklm run -`), refused when it is not UTF-8 rather than changed. */
async function taskTextFromStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(chunks)).trim();
  } catch {
    throw new DuckError(ErrorCode.InvalidInput, "the task text on standard input is not valid UTF-8: convert it first (for example with iconv)");
  }
}

/**
 * Arguments arrive decoded, with each byte that was not UTF-8 turned into U+FFFD: a task is refused
 * rather than run with text the user did not write.
 */
function checkedText(text: string): string {
  if (text.includes("\uFFFD")) throw new DuckError(ErrorCode.InvalidInput, "the task text is not valid UTF-8 (it holds U+FFFD where other bytes were): convert it first, or pipe it in with `ducklm run -`");
  return text;
}
