import type { Command } from "commander";
import { withDuckLM, type GlobalOptions } from "../with-ducklm.js";
import { oneLine } from "../terminal-text.js";

/** `ducklm undo <task>`: put a finished task's workspace back as it was before it, or before one of its steps. */
export function registerUndo(program: Command): void {
  const globals = () => program.opts<GlobalOptions>();
  program
    .command("undo")
    .description("put the workspace back as it was before a finished task (or one of its steps) changed it")
    .argument("<task>", "task id (see `ducklm tasks`)")
    .option("--step <id>", "undo from this step on, instead of the whole task")
    .option("--list", "list the steps it can be put back before, and change nothing")
    .option("--redo", "take the latest undo of this task back")
    .option("--dry-run", "say which files would change, and change nothing")
    .option("--json", "the result as one JSON object")
    .action(async (taskId: string, options: { step?: string; list?: boolean; dryRun?: boolean; redo?: boolean; json?: boolean }) =>
      withDuckLM(globals(), async (ducklm) => {
        if (options.list) {
          const points = await ducklm.undoPoints(taskId);
          if (options.json) console.log(JSON.stringify({ task_id: taskId, points }));
          else if (points.length === 0) console.log(`task ${taskId} has nothing to undo`);
          else for (const point of points) console.log(`step ${point.step_id.padEnd(8)} ${point.at}  ${point.tool}  ${oneLine(point.summary)}`);
          return 0;
        }
        const result = await ducklm.undo(taskId, { ...(options.step !== undefined ? { step: options.step } : {}), dryRun: options.dryRun === true, redo: options.redo === true, by: "cli" });
        if (options.json) {
          console.log(JSON.stringify(result));
          return 0;
        }
        const verb = result.dry_run ? "would put" : "put";
        const point = result.before ? `before step ${result.before.step_id} (${result.before.tool}: ${oneLine(result.before.summary)})` : "before the latest undo";
        console.log(`${verb} ${oneLine(result.workspace)} back as it was ${point}`);
        if (result.changes.length === 0) console.log("  nothing differs");
        for (const change of result.changes) console.log(`  ${change.change.padEnd(9)} ${oneLine(change.path)}`);
        if (result.saved_as) console.log(`what it replaced is kept: \`ducklm undo ${taskId} --redo\` puts it back`);
        return 0;
      }),
    );
}
