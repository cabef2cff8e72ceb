import { randomUUID } from "node:crypto";
import { realpathSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { isAbsolute, resolve as resolvePath } from "node:path";
import type { CommandCategory, ToolCall, ToolResult } from "../contracts/index.js";
import { ErrorCode } from "../errors/duck-error.js";
import type { CommandClassification } from "../permissions/command-classifier.js";
import { egressVerdict, hostApproved } from "../permissions/egress-policy.js";
import { runLaterWrites } from "../permissions/run-later-writes.js";
import { physicalPath } from "../permissions/path-judge.js";
import { approvalSubjectOf, CODE_APPLY_TOOL, decidePermission } from "../permissions/permission-policy.js";
import { workspaceRefusal } from "./workspace-refusal.js";
import type { StepProjection, TaskProjection } from "../state/task-projection.js";
import { HARD_LIMIT_MARGIN_MS } from "../tools/shell-sandbox.js";
import { inTurn, type ExecutorContext } from "./executor-context.js";

/** A refusal recorded as the step's result: the tool never ran. */
export function deniedResult(tool: string, code: string, message: string): ToolResult {
  return { tool, ok: false, output: "", error: { code, message }, truncated: false, duration_ms: 0 };
}

/** What the permission check left the call with. */
export type Permit =
  | {
      kind: "run";
      network: boolean;
      classification: CommandClassification | null;
      command: string | null;
      /** Run-later entries of the workspace (`.git`, `.envrc`…) the call was allowed to write. */
      writableRunLater: string[];
      /** Folders outside the workspace the command asked to write (`write_outside`), and was allowed to. */
      writableOutside: string[];
    }
  /** Refused, recorded as the step's result. */
  | { kind: "refused" }
  /** A question for the user is recorded; the step waits. */
  | { kind: "waiting" };

/** The command a call runs, if it runs one: a shell command, or a coder step's test. */
export function commandOf(call: ToolCall): string | null {
  const args = call.arguments;
  if (call.tool === "shell_exec" && typeof args.command === "string") return args.command;
  if (call.tool === CODE_APPLY_TOOL && typeof args.test_command === "string") return args.test_command;
  return null;
}

async function ask(
  context: ExecutorContext,
  taskId: string,
  stepId: string,
  call: ToolCall,
  category: CommandCategory,
  reason: string,
  commands: string[],
  network: boolean,
  signal: AbortSignal,
  classification: CommandClassification | null,
  /** The hosts a request would go to that the question is about: "always" approves them for every task. */
  more: { hosts?: string[] } = {},
): Promise<Permit> {
  await inTurn(context, taskId, { type: "permission-requested", step_id: stepId }, signal);
  // The files the command runs, and what they hold as the question is shown: what an answer covers.
  const ran = classification?.content_digest ? { ran_files: classification.ran_files ?? [], content_digest: classification.content_digest } : {};
  context.store.append(taskId, "permission-requested", { request_id: randomUUID(), step_id: stepId, call, category, reason, commands, ...(network ? { network: true } : {}), ...ran, ...(more.hosts?.length ? { hosts: more.hosts } : {}) });
  return { kind: "waiting" };
}

/**
 * How long after a call's own time limit (and the hard limit beside it, HARD_LIMIT_MARGIN_MS) a
 * call started by a paused owner is taken to have surely ended: clocks of two machines may differ a little.
 */
export const STRANDED_TOOL_GRACE_MS = 3_000;

/**
 * A call whose start is recorded but not its end, in a task taken over from an owner that may only be
 * paused: that owner's command may still be running, so nothing is asked (and nothing run again)
 * before the command is surely over — its own time limit, enforced beside it, has passed since it started.
 */
async function waitWhileItMayStillRun(context: ExecutorContext, taskId: string, stepId: string, signal: AbortSignal): Promise<void> {
  if (!context.strandedTools.has(taskId)) return;
  const started = context.store.listEvents(taskId).filter((event) => event.type === "tool-called" && event.payload.step_id === stepId).at(-1);
  if (!started) return;
  const surelyOver = Date.parse(started.time) + context.config.runtime.timeouts.step_ms + HARD_LIMIT_MARGIN_MS + STRANDED_TOOL_GRACE_MS;
  const left = surelyOver - Date.now();
  if (left > 0) {
    context.logger.info({ task_id: taskId, step_id: stepId, wait_ms: left }, "the process this task was taken from may still be running the step's command; waiting until it has surely ended");
    await context.sleep(left, signal);
  }
}

/**
 * The files a coder step writes before its test command runs, by absolute path: the command is judged
 * against what they will hold.
 */
function pendingFilesOf(call: ToolCall, workspace: string): Map<string, string> | undefined {
  if (call.tool !== CODE_APPLY_TOOL || !Array.isArray(call.arguments.files)) return undefined;
  const files = new Map<string, string>();
  for (const file of call.arguments.files as Array<{ path?: unknown; content?: unknown }>) {
    if (typeof file?.path !== "string" || typeof file.content !== "string") continue;
    // By its name and by where the kernel will put it (a link on the way), as a command may name either.
    const named = resolvePath(workspace, file.path);
    files.set(named, file.content);
    files.set(physicalPath(named, workspace), file.content);
  }
  return files;
}

/**
 * Whether a call may run now. Once granted for this attempt it runs; a side-effecting call whose
 * earlier run was cut off (a crash, a time-out part-way) is asked about first; otherwise the
 * PermissionService decides — allow, ask (recorded as a request) or deny (recorded as the result).
 */
/** A command's classification, against the files a coder step is about to write. */
export function classifyCall(context: ExecutorContext, projection: TaskProjection, call: ToolCall, command: string): Promise<CommandClassification> {
  const pendingFiles = pendingFilesOf(call, projection.workspace);
  return context.classifier.classify(command, { workspace: projection.workspace, ...(pendingFiles ? { pendingFiles } : {}) });
}

export async function permitCall(
  context: ExecutorContext,
  projection: TaskProjection,
  step: StepProjection,
  call: ToolCall,
  shownCall: ToolCall,
  signal: AbortSignal,
  /** The command's classification, when the caller has it and nothing can have changed since. */
  classified: CommandClassification | null = null,
): Promise<Permit> {
  const { store } = context;
  const taskId = projection.task_id;
  const stepId = step.step.id;
  const tool = context.tools.get(call.tool);
  const effect = tool?.effect ?? "side-effecting";
  if (step.permission_denied) {
    // Declining a rerun is not declining the work: it may already be done, and the next decision must know.
    const message = step.tool_called ? "its earlier run was interrupted and may have done its work; the user chose not to run it again" : "the user denied permission";
    await inTurn(context, taskId, { type: "tool-result", step_id: stepId }, signal);
    store.append(taskId, "tool-result", { step_id: stepId, attempt: step.attempt, result: deniedResult(call.tool, ErrorCode.PermissionDenied, message) });
    return { kind: "refused" };
  }
  const command = commandOf(call);
  const classification =
    command !== null
      ? (classified ?? (await classifyCall(context, projection, call, command)))
      : call.tool === "shell_exec"
        ? { category: "unknown" as const, reason: "no command given", commands: [], network: false, sudo: [] }
        : null;
  const needsNetwork = classification?.network ?? false;
  const writableRunLater = runLaterWrites(call, classification?.commands ?? [], projection.workspace, context.config.runtime.sandbox.run_later_files);
  const outside = writesOutside(context, call, projection.workspace);
  if ("refusal" in outside) {
    await inTurn(context, taskId, { type: "tool-result", step_id: stepId }, signal);
    store.append(taskId, "tool-result", { step_id: stepId, attempt: step.attempt, result: deniedResult(call.tool, ErrorCode.PermissionDenied, `refused: ${outside.refusal}`) });
    return { kind: "refused" };
  }
  const writableOutside = outside.paths;
  if (step.permission_granted) {
    // Allowed as the files it runs were then: changed since (by a step running beside it), it is asked again.
    if (step.granted_digest && step.granted_digest !== classification?.content_digest) {
      return ask(context, taskId, stepId, shownCall, "unknown", `the files it runs (${classification?.ran_files?.join(", ") ?? "its scripts"}) changed after it was allowed; run it as they are now?`, classification?.commands ?? [], needsNetwork, signal, classification);
    }
    return { kind: "run", network: needsNetwork, classification, command, writableRunLater, writableOutside };
  }
  // Started before a crash and no result was recorded: it may or may not have happened. A command
  // that does no more when run twice (`ls`, `sleep 5 && echo done`) simply runs again.
  const rerunSafe = () => command !== null && classification !== null && context.classifier.safeToRunAgain(command, classification);
  if (step.tool_called && effect === "side-effecting" && !rerunSafe()) {
    await waitWhileItMayStillRun(context, taskId, stepId, signal);
    return ask(context, taskId, stepId, shownCall, "unknown", "its earlier run was interrupted and its outcome is unknown; run it again?", classification?.commands ?? [], needsNetwork, signal, classification);
  }
  if (step.ask_before_retry && !rerunSafe()) {
    return ask(context, taskId, stepId, shownCall, "unknown", "its previous attempt timed out and may have done part of its work; run it again?", classification?.commands ?? [], needsNetwork, signal, classification);
  }
  const subject = approvalSubjectOf(call);
  // Only a command or a tool with a permission category can be covered by a remembered approval.
  const approval = command !== null || tool?.permission !== undefined ? context.approvals.findActive(subject, projection.workspace, classification?.content_digest ?? null) : null;
  const decision = decidePermission({
    call,
    effect,
    classification,
    ...(tool?.permission ? { toolCategory: tool.permission } : {}),
    approval,
    unknownDecision: context.config.permissions.unknown,
    preApproved: projection.auto_approve,
    confinement: projection.confinement,
    confinedCommands: projection.confined_commands,
    networkAllowed: context.config.runtime.sandbox.network,
    writesRunLater: writableRunLater,
  });
  // Where a request goes is one policy for every tool that sends one: a denied host never, and once
  // the task has read data of this machine, a host not approved before is asked.
  const egress = tool?.outbound ? egressVerdict(context.config.permissions.hosts, tool.outbound(call.arguments), projection.read_local, (host) => hostApproved(context.approvals, host)) : null;
  if (egress?.kind === "deny") {
    await inTurn(context, taskId, { type: "tool-result", step_id: stepId }, signal);
    store.append(taskId, "tool-result", { step_id: stepId, attempt: step.attempt, result: deniedResult(call.tool, ErrorCode.PermissionDenied, `refused: ${egress.host} is in permissions.json hosts.deny`) });
    return { kind: "refused" };
  }
  if (egress?.kind === "ask" && decision.decision !== "deny") {
    const reason = decision.decision === "ask" ? `${decision.reason}; ${egress.reason}` : egress.reason;
    return ask(context, taskId, stepId, shownCall, decision.decision === "ask" ? decision.category : "unknown", reason, [], false, signal, null, { hosts: egress.hosts });
  }
  if (decision.approval_id) await inTurn(context, taskId, { type: "approval-used", step_id: stepId }, signal);
  if (decision.approval_id) store.append(taskId, "approval-used", { approval_id: decision.approval_id, step_id: stepId, command: subject });
  if (decision.decision === "deny") {
    const code = decision.category === "hard_stop" ? ErrorCode.HardStop : ErrorCode.PermissionDenied;
    await inTurn(context, taskId, { type: "tool-result", step_id: stepId }, signal);
    store.append(taskId, "tool-result", { step_id: stepId, attempt: step.attempt, result: deniedResult(call.tool, code, `refused: ${decision.reason}`) });
    return { kind: "refused" };
  }
  if (writableOutside.length > 0) {
    // An escalation of its own, asked every time: what the sandbox would refuse, named by the command.
    const reason = `it asks to write outside the workspace, in ${writableOutside.join(", ")}`;
    return ask(context, taskId, stepId, shownCall, "no_always", decision.decision === "ask" ? `${decision.reason}; ${reason}` : reason, decision.commands, decision.network, signal, classification);
  }
  if (decision.decision === "ask") return ask(context, taskId, stepId, shownCall, decision.category, decision.reason, decision.commands, decision.network, signal, classification);
  return { kind: "run", network: decision.network, classification, command, writableRunLater, writableOutside };
}

/**
 * The folders outside the workspace a command names in `write_outside`, resolved; a refusal for one
 * that is not an existing folder, holds the workspace or the home, or is one no command may write (the root, a
 * system folder, DuckLM's own). Folders inside the workspace need nothing and are left out.
 */
function writesOutside(context: ExecutorContext, call: ToolCall, workspace: string): { paths: string[] } | { refusal: string } {
  const asked = call.tool === "shell_exec" ? call.arguments.write_outside : undefined;
  if (asked === undefined) return { paths: [] };
  if (!Array.isArray(asked)) return { refusal: "write_outside is a list of absolute folder paths" };
  const paths: string[] = [];
  for (const given of asked) {
    if (typeof given !== "string" || !isAbsolute(given)) return { refusal: `write_outside takes absolute folder paths, not ${JSON.stringify(given)}` };
    let real: string;
    try {
      real = realpathSync(given);
    } catch {
      return { refusal: `${given} does not exist: name a folder that does` };
    }
    if (!statSync(real).isDirectory()) return { refusal: `${given} is not a folder` };
    const realWorkspace = realpathSync(workspace);
    if (real === realWorkspace || real.startsWith(`${realWorkspace}/`)) continue;
    if (realWorkspace.startsWith(`${real}/`) || real === "/") return { refusal: `${given} holds the workspace: a command given it could move the workspace away` };
    // The whole home, writable, would give a command the dot files the user's shell and tools run.
    const home = realHome();
    if (home !== null && (real === home || home.startsWith(`${real}/`))) return { refusal: `${given} is or holds your home, whose dot files your shell and tools run: name a folder inside it` };
    const refused = workspaceRefusal(real, context.protectedPaths, context.readOnlyPaths);
    if (refused) return { refusal: `${given} may not be written by a command: ${refused}` };
    paths.push(real);
  }
  return { paths: [...new Set(paths)] };
}

/** The user's home as the file system has it; null when it does not exist (a service account's). */
function realHome(): string | null {
  try {
    return realpathSync(homedir());
  } catch {
    return null;
  }
}
