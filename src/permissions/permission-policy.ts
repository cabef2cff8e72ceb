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
}

/**
 * Decides whether a tool call may run. Shell commands: hard_stop is denied and can never be
 * approved; no_always is always asked and never remembered; normal runs; anything else runs only
 * with a remembered or pre-given approval, else it is asked (or denied, if configured so).
 * Other side-effecting tools are confined to the workspace and run; read-only tools run.
 */
export function decidePermission(input: PermissionInput): PermissionDecision {
  const { call, classification } = input;
  if (call.tool === "shell_exec") {
    const c = classification ?? { category: "unknown" as const, reason: "not classified", commands: [] };
    const base = { category: c.category, reason: c.reason, commands: c.commands };
    switch (c.category) {
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
        if (input.preApproved.includes(c.category)) return { ...base, decision: "allow", reason: `pre-approved for this task: ${c.reason}` };
        return { ...base, decision: input.unknownDecision };
    }
  }
  if (input.effect === "read-only") return { decision: "allow", category: "read_only", reason: "read-only tool", commands: [] };
  return { decision: "allow", category: "normal", reason: "side-effecting tool confined to the workspace", commands: [] };
}
