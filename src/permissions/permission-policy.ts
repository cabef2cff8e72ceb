import type { CommandCategory, PermissionDecisionKind, ToolCall, ToolEffect } from "../contracts/index.js";
import type { CommandClassifier } from "./command-classifier.js";

export interface PermissionDecision {
  decision: PermissionDecisionKind;
  category: CommandCategory;
  reason: string;
  commands: string[];
}

/**
 * Decides whether a tool call may run: read-only tools run; shell commands by their category;
 * other side-effecting tools are confined to the workspace and run.
 */
export function decidePermission(
  call: ToolCall,
  effect: ToolEffect,
  classifier: CommandClassifier,
  unknownDecision: "ask" | "deny",
): PermissionDecision {
  if (call.tool === "shell_exec") {
    const command = typeof call.arguments.command === "string" ? call.arguments.command : "";
    const classification = classifier.classify(command);
    const decision: PermissionDecisionKind =
      classification.category === "hard_stop"
        ? "deny"
        : classification.category === "normal" || classification.category === "read_only"
          ? "allow"
          : classification.category === "no_always"
            ? "ask"
            : unknownDecision;
    return { decision, category: classification.category, reason: classification.reason, commands: classification.commands };
  }
  if (effect === "read-only") return { decision: "allow", category: "read_only", reason: "read-only tool", commands: [] };
  return { decision: "allow", category: "normal", reason: "side-effecting tool confined to the workspace", commands: [] };
}
