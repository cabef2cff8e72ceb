import { resolve } from "node:path";
import { statSync } from "node:fs";
import type { CommandCategory } from "../contracts/index.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { decidePermission } from "../permissions/permission-policy.js";
import { runLaterWrites } from "../permissions/run-later-writes.js";
import type { ExecutorContext } from "./executor-context.js";
import { workspaceRefusal } from "./workspace-refusal.js";

/**
 * What a shell command would get if a task ran it now: `run` unasked, `ask` the user (with or without
 * an "always"), `hard_stop` never, or `deny` (permissions.json `unknown: "deny"`, unconfined).
 */
export interface CommandVerdict {
  decision: "run" | "ask" | "hard_stop" | "deny";
  category: CommandCategory;
  reason: string;
  /** What it needs beyond the sandbox's bounds, each asked: `network`, `sudo`, `writes <entry>`. */
  escalations: string[];
  /** Whether an ask may be answered "always". */
  always_offered: boolean;
  /** How commands run here: in the sandbox, or not (no bubblewrap, or turned off). */
  confinement: "confined" | "none" | "off";
  /** Every simple command found, as the words that would run. */
  commands: string[];
  workspace: string;
  /** A remembered approval that would let it run. */
  approval_id?: string;
}

/**
 * Judges a command as a new task in `workspace` would, without running it: the same classifier,
 * remembered approvals, confinement and run-later files; no pre-approval (a task can be given some).
 */
export async function checkCommand(context: ExecutorContext, command: string, workspace: string): Promise<CommandVerdict> {
  const where = resolve(workspace);
  if (!statSync(where, { throwIfNoEntry: false })?.isDirectory()) throw new DuckError(ErrorCode.InvalidInput, `workspace ${where} is not a directory`);
  const refusal = workspaceRefusal(where, context.protectedPaths, context.readOnlyPaths);
  if (refusal) throw new DuckError(ErrorCode.InvalidInput, refusal);
  if (command.trim() === "") throw new DuckError(ErrorCode.InvalidInput, "give the command to check after `--`, e.g. `ducklm permissions check -- npm test`");
  const call = { tool: "shell_exec", arguments: { command } };
  const classification = await context.classifier.classify(command, { workspace: where });
  const writesRunLater = runLaterWrites(call, classification.commands, where, context.config.runtime.sandbox.run_later_files);
  const approval = context.approvals.findActive(command, where, classification.content_digest ?? null);
  const confinement = context.sandbox.confinement;
  const decided = decidePermission({
    call,
    effect: "side-effecting",
    classification,
    approval,
    unknownDecision: context.config.permissions.unknown,
    preApproved: [],
    confinement,
    confinedCommands: context.config.permissions.confined,
    networkAllowed: context.config.runtime.sandbox.network,
    writesRunLater,
  });
  const escalations = [
    ...(decided.network && !context.config.runtime.sandbox.network ? ["network"] : []),
    ...(classification.sudo.length > 0 || classification.commands.some((words) => /^(sudo|doas|pkexec|su|runuser)(\s|$)/.test(words)) ? ["sudo"] : []),
    ...writesRunLater.map((entry) => `writes ${entry}`),
  ];
  const decision = decided.decision === "allow" ? "run" : decided.decision === "ask" ? "ask" : decided.category === "hard_stop" ? "hard_stop" : "deny";
  return {
    decision,
    category: decided.category,
    reason: decided.reason,
    escalations,
    always_offered: decision === "ask" && decided.category !== "no_always",
    confinement,
    commands: classification.commands,
    workspace: where,
    ...(decided.approval_id ? { approval_id: decided.approval_id } : {}),
  };
}
