import type { CommandCategory, PermissionDecisionKind, PreApproval, ToolCall, ToolEffect } from "../contracts/index.js";
import type { Approval } from "./approval-store.js";
import type { CommandClassification } from "./command-classifier.js";
import { stricterCategory } from "./judgement.js";

export interface PermissionDecision {
  decision: PermissionDecisionKind;
  category: CommandCategory;
  reason: string;
  commands: string[];
  /** Set when a remembered approval allowed the call. */
  approval_id?: string;
  /** The command may use the network when it runs (it needs it, and that was allowed). */
  network: boolean;
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
  /** What the user pre-approved for this task: `unknown` commands, `network` use (never no_always or hard_stop). */
  preApproved: readonly PreApproval[];
  /** The category a tool other than shell_exec declares for its calls (MCP tools, per server). */
  toolCategory?: CommandCategory;
  /**
   * How shell commands run here. `confined`: in the sandbox. `none`: no sandbox could be started, so
   * nothing runs unattended. `off`: runtime.json turned confinement off.
   */
  confinement: "confined" | "none" | "off";
  /**
   * What a command no rule covers gets. `run`: confined, it runs unasked (the sandbox is the boundary);
   * unconfined, it is asked every time, without "always". `ask`: it is asked (tasks started before).
   */
  confinedCommands?: "run" | "ask";
  /** runtime.json lets confined commands use the network without asking. */
  networkAllowed: boolean;
  /**
   * The run-later entries of the workspace (`.git`, `.envrc`…) the call writes: an escalation the
   * sandbox would refuse, asked every time (a blanket approval covers commands, not what the user's
   * own tools will run).
   */
  writesRunLater?: readonly string[];
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
  const decided = decideWithinSandbox(input);
  const writes = input.writesRunLater ?? [];
  if (writes.length === 0) return decided;
  const reason = `it writes ${writes.join(", ")}, which your own tools (git, direnv, your editor, your agents) run later, outside the sandbox`;
  // Asked anyway: the question says what else it is about, and its answer is not remembered.
  if (decided.decision === "ask") return { ...decided, category: stricterCategory(decided.category, "no_always"), reason: `${decided.reason}; ${reason}` };
  if (decided.decision !== "allow") return decided;
  return { ...decideCategory(input, { category: "no_always", reason, commands: decided.commands }), network: decided.network };
}

function decideWithinSandbox(input: PermissionInput): PermissionDecision {
  const { call, classification } = input;
  if (call.tool === "shell_exec" || (call.tool === CODE_APPLY_TOOL && classification)) {
    const c = classification ?? { category: "unknown" as const, reason: "not classified", commands: [], network: false };
    return decideCommand(input, { category: c.category, reason: c.reason, commands: c.commands }, c.network);
  }
  if (input.toolCategory) return decideCategory(input, { category: input.toolCategory, reason: `${call.tool} is ${input.toolCategory.replace("_", " ")} by configuration`, commands: [] });
  if (input.effect === "read-only") return { decision: "allow", category: "read_only", reason: "read-only tool", commands: [], network: false };
  return { decision: "allow", category: "normal", reason: "side-effecting tool confined to the workspace", commands: [], network: false };
}

/**
 * A shell command: its category decides first; then a command that needs the network runs with it
 * only when the user allowed that (a remembered approval of the exact command, the task's
 * pre-approval, or runtime.json), else it is asked; and where commands cannot be confined, nothing
 * runs without the user's say, however safe its shape.
 */
function decideCommand(input: PermissionInput, base: { category: CommandCategory; reason: string; commands: string[] }, needsNetwork: boolean): PermissionDecision {
  if (input.confinedCommands === "run") return decideBySandbox(input, base, needsNetwork);
  const decided = decideCategory(input, base);
  if (decided.decision !== "allow") return { ...decided, network: needsNetwork };
  const remembered = decided.approval_id !== undefined;
  if (needsNetwork) {
    // A remembered approval gives the network only where the question it answered said so.
    const networkGiven = (remembered && input.approval?.network === true) || input.networkAllowed || input.preApproved.includes("network");
    if (!networkGiven) return { ...base, decision: "ask", reason: `${base.reason}; it needs the network, which is a permission of its own`, network: true };
  }
  if (input.confinement === "none" && !remembered) {
    return { ...base, decision: "ask", reason: `commands cannot be confined here (no bubblewrap), so every command is asked: ${base.reason}`, network: needsNetwork };
  }
  return { ...decided, network: needsNetwork };
}

function decideCategory(input: PermissionInput, base: { category: CommandCategory; reason: string; commands: string[] }): PermissionDecision {
  switch (base.category) {
    case "hard_stop":
      return { ...base, decision: "deny", network: false };
    case "no_always":
      return { ...base, decision: "ask", network: false };
    case "normal":
    case "read_only":
      return { ...base, decision: "allow", network: false };
    default:
      if (input.approval) {
        return { ...base, decision: "allow", reason: `remembered approval ${input.approval.id} (${input.approval.created_at})`, approval_id: input.approval.id, network: false };
      }
      if (input.preApproved.includes("unknown")) return { ...base, decision: "allow", reason: `pre-approved for this task: ${base.reason}`, network: false };
      return { ...base, decision: input.unknownDecision, network: false };
  }
}

/**
 * The sandbox is the boundary. Confined, a command no rule covers runs unasked: it cannot write
 * outside the workspace, read what is hidden or reach the network, so only escalations are asked —
 * the network (per command, unless given), sudo and the rules' always-asked commands (no_always),
 * and run-later files (decided by the caller). Unconfined, nothing holds it, so every command
 * without a safe shape is asked every time, and an earlier "always" does not answer for it.
 */
function decideBySandbox(input: PermissionInput, base: { category: CommandCategory; reason: string; commands: string[] }, needsNetwork: boolean): PermissionDecision {
  const confined = input.confinement === "confined";
  if (base.category === "unknown" && !confined) {
    const why = input.confinement === "none" ? "no sandbox could be started here (no bubblewrap)" : "confinement is off (runtime.json sandbox.mode)";
    return { ...base, category: "no_always", decision: input.unknownDecision === "deny" ? "deny" : "ask", reason: `${why}, so a command without a safe shape is asked every time: ${base.reason}`, network: needsNetwork };
  }
  const where = needsNetwork ? "confined to the workspace, its network through the proxy" : "confined to the workspace without the network";
  const decided =
    base.category === "unknown" && !input.approval && !input.preApproved.includes("unknown")
      ? { ...base, decision: "allow" as const, reason: `it runs in the sandbox, ${where}; no rule asks about it (${base.reason})`, network: false }
      : decideCategory(input, base);
  if (decided.decision !== "allow" || !needsNetwork) return { ...decided, network: needsNetwork };
  const remembered = decided.approval_id !== undefined;
  const networkGiven = (remembered && input.approval?.network === true) || input.networkAllowed || input.preApproved.includes("network");
  if (!networkGiven) return { ...base, decision: "ask", reason: `${base.reason}; it needs the network, which is a permission of its own`, network: true };
  return { ...decided, network: true };
}
