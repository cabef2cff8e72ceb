import type { Command } from "commander";
import { withDuckLM, type GlobalOptions } from "../with-ducklm.js";

/** `ducklm replay ID` or `ducklm replay --file F`: re-drives a task from its log; exit 1 when it differs. */
export function registerReplay(program: Command): void {
  program
    .command("replay")
    .description("re-drive a task from its recorded events (no model, no tool) and say whether it matches")
    .argument("[id]", "task id")
    .option("--file <events.jsonl>", "a recording: `ducklm events --json` output or an archive file")
    .option("--json", "print the report as JSON")
    .action(async (id: string | undefined, options: { file?: string; json?: boolean }, command: Command) => {
      if ((id === undefined) === (options.file === undefined)) command.error(id === undefined ? "error: give a task id or --file <events.jsonl>" : "error: give a task id or --file, not both");
      return withDuckLM(program.opts<GlobalOptions>(), async (ducklm) => {
        const { readRecording } = await import("../../replay/recording-file.js");
        const { replayTask } = await import("../../replay/replay-task.js");
        const events = options.file !== undefined ? readRecording(options.file) : ducklm.events(id!);
        const report = await replayTask(events, ducklm.config);
        if (options.json) {
          console.log(JSON.stringify(report));
        } else if (report.matches) {
          console.log(`replayed ${report.replayed} events of task ${report.task_id}: identical to the recording (no model loaded, no tool run)`);
        } else {
          const difference = report.first_difference!;
          console.log(`task ${report.task_id}: the replay differs at event #${difference.seq}`);
          console.log(`  recorded: ${difference.expected ? `${difference.expected.type} ${JSON.stringify(difference.expected.payload).slice(0, 400)}` : "(nothing: the recording ends)"}`);
          console.log(`  replayed: ${difference.actual ? `${difference.actual.type} ${JSON.stringify(difference.actual.payload).slice(0, 400)}` : "(nothing: the replay stopped)"}`);
        }
        return report.matches ? 0 : 1;
      });
    });
}
