import type { CommandCategory, PermissionDecisionKind, ToolCall, ToolEffect } from "../contracts/index.js";
import type { Approval } from "./approval-store.js";
import type { CommandClassification } from "./command-classifier.js";

export interface PermissionDecision {
  decision: PermissionDecisionKind;
  category: CommandCategory;
  reason: string;
  commands: string[];
  /** Set when a remembered approval allowed the call. */
  approval_id?: string;
}

export interface PermissionInput {
  call: ToolCall;
  effect: ToolEffect;
  /** The classification of a shell command (shell_exec only). */
  classification: CommandClassification | null;
  /** A remembered approval for this exact command and directory, if one is active. */
  approval: Approval | null;
  /** What config/permissions.json says for commands no rule covers. */
  unknownDecision: "ask" | "deny";
  /** Categories the user pre-approved for this task (never no_always or hard_stop). */
  preApproved: readonly CommandCategory[];
  /** The category a tool other than shell_exec declares for its calls (MCP tools, per server). */
  toolCategory?: CommandCategory;
}

/**
 * What an "always" approval of a call is remembered by: a shell command by its exact text (with the
 * working directory beside it); a code step by its test command; a fetch by its site; any other tool
 * that asks by its name.
 */
export function approvalSubjectOf(call: ToolCall): string {
  const args = call.arguments;
  if (call.tool === "shell_exec" && typeof args.command === "string") return args.command;
  if (call.tool === CODE_APPLY_TOOL && typeof args.test_command === "string") return args.test_command;
  // A fetch is approved per site: "always" for one site is not "always" for every URL a page suggests.
  if (call.tool === "web_fetch" && typeof args.url === "string") {
    const host = URL.canParse(args.url) ? new URL(args.url).host : null;
    if (host) return `tool:web_fetch@${host}`;
  }
  return `tool:${call.tool}`;
}

/** The internal tool a coder step's files and test command run through. */
export const CODE_APPLY_TOOL = "code_apply";

/**
 * Decides whether a tool call may run. Shell commands: hard_stop is denied and can never be
 * approved; no_always is always asked and never remembered; normal runs; anything else runs only
 * with a remembered or pre-given approval, else it is asked (or denied, if configured so).
 * A coder step's test command is decided the same way. Other tools get the category they declare
 * (an MCP server's, from its configuration) under the same rules; without one, side-effecting tools
 * are confined to the workspace and run, and read-only tools run.
 */
export function decidePermission(input: PermissionInput): PermissionDecision {
  const { call, classification } = input;
  if (call.tool === "shell_exec" || (call.tool === CODE_APPLY_TOOL && classification)) {
    const c = classification ?? { category: "unknown" as const, reason: "not classified", commands: [] };
    return decideCategory(input, { category: c.category, reason: c.reason, commands: c.commands });
  }
  if (input.toolCategory) return decideCategory(input, { category: input.toolCategory, reason: `${call.tool} is ${input.toolCategory.replace("_", " ")} by configuration`, commands: [] });
  if (input.effect === "read-only") return { decision: "allow", category: "read_only", reason: "read-only tool", commands: [] };
  return { decision: "allow", category: "normal", reason: "side-effecting tool confined to the workspace", commands: [] };
}

function decideCategory(input: PermissionInput, base: { category: CommandCategory; reason: string; commands: string[] }): PermissionDecision {
  switch (base.category) {
    case "hard_stop":
      return { ...base, decision: "deny" };
    case "no_always":
      return { ...base, decision: "ask" };
    case "normal":
    case "read_only":
      return { ...base, decision: "allow" };
    default:
      if (input.approval) {
        return { ...base, decision: "allow", reason: `remembered approval ${input.approval.id} (${input.approval.created_at})`, approval_id: input.approval.id };
      }
      if (input.preApproved.includes(base.category)) return { ...base, decision: "allow", reason: `pre-approved for this task: ${base.reason}` };
      return { ...base, decision: input.unknownDecision };
  }
}
