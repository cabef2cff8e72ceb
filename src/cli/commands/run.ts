import type { Command } from "commander";
import { followTask, startAndResume } from "../follow-task.js";
import { TASK_RUNNER, withDuckLM, type GlobalOptions } from "../with-ducklm.js";

/** `ducklm run "<task>"`: runs one task, printing its events; asks for permission at the terminal. */
export function registerRun(program: Command): void {
  program
    .command("run")
    .description("run one task and print its events as they happen")
    .argument("<task...>", "what to do, in your own words")
    .option("--json", "print one JSON event per line")
    .option("--session <id>", "conversation id: earlier tasks of it become history")
    .option("--yes", "run commands that no rule covers without asking (no_always is still asked, hard_stop never runs)")
    .option("--allow-network", "let commands that need the network use it without asking (never DuckLM's own API)")
    .action(async (words: string[], options: { json?: boolean; session?: string; yes?: boolean; allowNetwork?: boolean }) =>
      withDuckLM(
        program.opts<GlobalOptions>(),
        async (ducklm) => {
          const leftovers = await startAndResume(ducklm);
          const handle = ducklm.submit({
            text: words.join(" "),
            ...(options.session ? { session_id: options.session } : {}),
            auto_approve: [...(options.yes ? (["unknown"] as const) : []), ...(options.allowNetwork ? (["network"] as const) : [])],
          }, { evenWhenLineIsFull: true });
          const code = await followTask(ducklm, handle.taskId, handle.done, options);
          // Closing now would only interrupt them again.
          await Promise.allSettled(leftovers);
          return code;
        },
        TASK_RUNNER,
      ),
    );
}
