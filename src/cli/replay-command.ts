import type { Runtime } from "../runtime/create-runtime.js";
import { readRecording } from "../replay/recording-file.js";
import { replayTask } from "../replay/replay-task.js";

/** `ducklm replay ID` or `ducklm replay --file F`: re-drives a task from its log; exit 1 when it differs. */
export async function replayCommand(runtime: Runtime, taskId: string | undefined, options: { file?: string; json?: boolean }): Promise<number> {
  const events = options.file ? readRecording(options.file) : runtime.store.listEvents(runtime.store.requireTask(taskId ?? "").id);
  const report = await replayTask(events, runtime.config);
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
}
