import type { Command } from "commander";
import { withDuckLM, type GlobalOptions } from "../with-ducklm.js";
import { oneLine } from "../terminal-text.js";

/** `ducklm permissions list|check|revoke` and `ducklm feedback`. */
export function registerPermissions(program: Command): void {
  const globals = () => program.opts<GlobalOptions>();
  const permissions = program.command("permissions").description("remembered approvals, and what a command would be asked");
  permissions
    .command("list")
    .description("every remembered approval: command and directory, or host; state")
    .option("--json", "one JSON object per line")
    .action(async (options: { json?: boolean }) =>
      withDuckLM(globals(), (ducklm) => {
        const approvals = ducklm.approvals.list();
        if (options.json) for (const approval of approvals) console.log(JSON.stringify(approval));
        else if (approvals.length === 0) console.log("no remembered approvals");
        const now = new Date().toISOString();
        if (!options.json) {
          for (const approval of approvals) {
            const state = approval.revoked_at ? `revoked ${approval.revoked_at}` : approval.expires_at && approval.expires_at <= now ? `expired ${approval.expires_at}` : approval.expires_at ? `until ${approval.expires_at}` : "active";
            const scope = [approval.content_digest ? "while the files it runs are unchanged" : "", approval.network ? "with the network" : ""].filter(Boolean).join(", ");
            const what = approval.command.startsWith("host:") ? `requests to ${oneLine(approval.command.slice(5))}, in every task` : `in ${oneLine(approval.cwd)}:  ${oneLine(approval.command)}`;
            console.log(`${approval.id}  ${state.padEnd(32)}  ${what}${scope ? `  (${scope})` : ""}`);
          }
        }
        return 0;
      }),
    );
  permissions
    .command("check")
    .description("the decision a shell command would get (run, ask, hard_stop), and why, without running it")
    .argument("<command...>", "the command, after `--` (ducklm permissions check -- npm test)")
    .option("--json", "the verdict as one JSON object")
    .addHelpText("after", "\nThe workspace is the global --workspace, else runtime.json's; put it before `check`:\n  ducklm --workspace ~/project permissions check -- git clean -fdx")
    .action(async (words: string[], options: { json?: boolean }) =>
      withDuckLM(globals(), async (ducklm) => {
        const command = words.join(" ");
        const verdict = await ducklm.checkCommand(command, globals().workspace ? { workspace: globals().workspace } : {});
        if (options.json) {
          console.log(JSON.stringify({ command, ...verdict }));
          return 0;
        }
        const question = verdict.decision === "ask" ? (verdict.always_offered ? " (\"always\" may be answered)" : " (every time)") : "";
        console.log(`${verdict.decision}${question}: ${oneLine(command)}`);
        console.log(`  why: ${oneLine(verdict.reason)}`);
        if (verdict.escalations.length > 0) console.log(`  needs: ${verdict.escalations.join(", ")}`);
        console.log(`  in ${oneLine(verdict.workspace)}, ${verdict.confinement === "confined" ? "confined by the sandbox" : verdict.confinement === "off" ? "unconfined (sandbox.mode off)" : "unconfined (no sandbox here)"}`);
        return 0;
      }),
    );
  permissions
    .command("revoke")
    .description("stop a remembered approval from applying")
    .argument("<id>", "approval id (see `ducklm permissions list`)")
    .action(async (id: string) =>
      withDuckLM(globals(), (ducklm) => {
        ducklm.approvals.revoke(id, "cli");
        console.log(`revoked ${id}`);
        return 0;
      }),
    );

  program
    .command("feedback")
    .description("rate a task's answer, or one of its steps, for the critic's calibration")
    .argument("<rating>", "up or down")
    .argument("[comment...]", "why")
    .requiredOption("--task <id>", "task id")
    .option("--step <id>", "a step of the task, instead of its answer")
    .option("--iteration <n>", "the decision the step belongs to, when the task took a step of that id in more than one")
    .action(async (rating: string, comment: string[], options: { task: string; step?: string; iteration?: string }) =>
      withDuckLM(globals(), (ducklm) => {
        if (rating !== "up" && rating !== "down") {
          console.error("error DUCK_ERR_INVALID_INPUT: the rating is `up` or `down`");
          return 2;
        }
        const iteration = options.iteration === undefined ? null : Number(options.iteration);
        if (iteration !== null && (!Number.isInteger(iteration) || iteration < 1)) {
          console.error(`error DUCK_ERR_INVALID_INPUT: --iteration is a decision's number (1, 2, …), not ${JSON.stringify(options.iteration)}`);
          return 2;
        }
        if (iteration !== null && !options.step) {
          console.error("error DUCK_ERR_INVALID_INPUT: --iteration names the decision of a step: give the step with --step");
          return 2;
        }
        ducklm.feedback(options.task, { target: options.step ? "step" : "answer", step_id: options.step ?? null, iteration, rating, comment: comment.join(" ") }, "cli");
        console.log(`feedback recorded on task ${options.task}${options.step ? `, step ${options.step}${iteration !== null ? ` of decision ${iteration}` : ""}` : ""}`);
        return 0;
      }),
    );
}
