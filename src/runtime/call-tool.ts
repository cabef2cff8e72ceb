import { randomUUID } from "node:crypto";
import type { ToolCall, ToolResult } from "../contracts/index.js";
import { isShutdown } from "../errors/duck-error.js";
import { openSudoRelay } from "../permissions/sudo-relay.js";
import type { StepProjection, TaskProjection } from "../state/task-projection.js";
import { commandEnvironment } from "../tools/command-environment.js";
import { withScopedSignal } from "../utils/scoped-signal.js";
import { inTurn, type ExecutorContext } from "./executor-context.js";
import { classifyCall, commandOf, permitCall } from "./permit-call.js";
import type { CommandClassification } from "../permissions/command-classifier.js";
import { TaskLocks } from "../utils/task-locks.js";
import { workspaceRepositoryPaths } from "../permissions/git-repository.js";
import { egressVerdict, hostApproved } from "../permissions/egress-policy.js";

/** How a call's turn ended: its result is recorded, or it waits for the user. */
export type CallTurn = "done" | "waiting";

/**
 * Permission, secret and the run of one call, each step of the way recorded so that it resumes:
 * a side-effecting call is on disk before it runs, so after a crash a recorded start without a
 * result means "may have happened" and the user is asked. `shownCall` is what people see and events
 * record (a coder step's file names instead of their contents).
 */
export async function callTool(context: ExecutorContext, projection: TaskProjection, step: StepProjection, call: ToolCall, shownCall: ToolCall, signal: AbortSignal): Promise<CallTurn> {
  const command = commandOf(call);
  const classification = command !== null ? await classifyCall(context, projection, call, command) : null;
  // A command bound to files it runs is judged and run while no other step of the task runs a tool,
  // so that none can rewrite those files between the check and the end of the run.
  const exclusive = (classification?.ran_files?.length ?? 0) > 0;
  return TOOL_LOCKS.run(projection.task_id, exclusive, signal, () => permitAndRun(context, projection, step, call, shownCall, signal, exclusive ? null : classification));
}

/** The tools that change the workspace: a snapshot of it is kept before each of their calls, for undo. */
const WORKSPACE_WRITERS: ReadonlySet<string> = new Set(["shell_exec", "file_write", "code_apply"]);

/**
 * Keeps a snapshot of the workspace before a step changes it. Undo is a convenience, not the
 * boundary: a snapshot that fails is logged and the step runs.
 */
async function keepCheckpoint(context: ExecutorContext, workspace: string, taskId: string, seq: number, label: string): Promise<void> {
  if (!context.checkpoints || context.checkpoints.unavailable()) return;
  try {
    const { leftOut } = await context.checkpoints.snapshot(workspace, taskId, seq, label);
    if (leftOut.length > 0) context.logger.info({ task_id: taskId, seq, left_out: leftOut.slice(0, 20), count: leftOut.length }, "files over undo.max_file_bytes are not kept for undo");
  } catch (error) {
    context.logger.warn({ err: error, task_id: taskId, seq }, "the workspace could not be kept for undo before this step");
  }
}

/** The locks of the tasks of this process (task ids are unique, whichever runtime holds them). */
export const TOOL_LOCKS = new TaskLocks();

async function permitAndRun(context: ExecutorContext, projection: TaskProjection, step: StepProjection, call: ToolCall, shownCall: ToolCall, signal: AbortSignal, classified: CommandClassification | null): Promise<CallTurn> {
  const { store, config } = context;
  const taskId = projection.task_id;
  const stepId = step.step.id;
  // Judged again under the lock when it was taken alone: the files may have changed while it waited.
  const permit = await permitCall(context, projection, step, call, shownCall, signal, classified);
  if (permit.kind === "refused") return "done";
  if (permit.kind === "waiting") return "waiting";

  // sudo asks for a password: it comes from the user through the secrets API, never from a store.
  const usesSudo = permit.classification?.commands.some((simple) => simple === "sudo" || simple.startsWith("sudo ")) ?? false;
  let secret: string | null = null;
  if (usesSudo) {
    secret = context.secrets.get(taskId, stepId);
    if (secret === null) {
      await inTurn(context, taskId, { type: "secret-requested", step_id: stepId }, signal);
      store.append(taskId, "secret-requested", { request_id: randomUUID(), step_id: stepId, kind: "sudo_password", prompt: `sudo password to run: ${permit.command ?? ""}` });
      return "waiting";
    }
  }

  const effect = context.tools.get(call.tool)?.effect ?? "side-effecting";
  await inTurn(context, taskId, { type: "tool-called", step_id: stepId }, signal);
  const called = store.append(taskId, "tool-called", { step_id: stepId, attempt: step.attempt, call: shownCall, effect }, { durable: effect === "side-effecting" });
  // The command line runs confined as any other; only its `sudo` runs outside, through the relay,
  // and only with the argument vectors the approved text contains.
  const relay = secret !== null ? openSudoRelay({ password: secret, allowed: permit.classification?.sudo ?? [], workspace: projection.workspace, env: commandEnvironment(process.env, context.sandbox.environment) }) : null;
  let result: ToolResult;
  let protectedForThisRun: string[] | undefined;
  // What the sandbox hides is searched for once, before the first command's time limit starts.
  if (commandOf(call) !== null) await context.sandbox.prepare?.();
  if (WORKSPACE_WRITERS.has(call.tool)) {
    // Only while this process still drives the task: an owner thawed after losing it keeps nothing.
    store.assertStillWriter(taskId);
    await keepCheckpoint(context, projection.workspace, taskId, called.seq, `step ${stepId}, attempt ${step.attempt}: ${call.tool}`);
  }
  // The last look before the tool starts: an owner paused past its lease and thawed runs nothing more.
  store.assertStillWriter(taskId);
  try {
    result = await withScopedSignal([signal], config.runtime.timeouts.step_ms, `step ${stepId}`, (stepSignal) =>
      context.tools.run(call.tool, call.arguments, {
        signal: stepSignal,
        workspace: projection.workspace,
        timeoutMs: config.runtime.timeouts.step_ms,
        outputCapBytes: config.runtime.tools.output_cap_bytes,
        fileReadMaxBytes: config.runtime.tools.file_read_max_bytes,
        taskId,
        stepId,
        attempt: step.attempt,
        network: permit.network,
        mayGoTo: (url) => redirectRefusal(context, taskId, url),
        writableRunLater: permit.writableRunLater,
        ...(permit.writableOutside.length > 0 ? { extraWritable: permit.writableOutside } : {}),
        // A hooks folder the repository names inside the workspace is as out of reach as .git. Read
        // from disk when a tool first asks (most never touch the file system), then kept for this run.
        get protectedPaths() {
          return (protectedForThisRun ??= [...context.protectedPaths, ...workspaceRepositoryPaths(projection.workspace)]);
        },
        readOnlyPaths: context.readOnlyPaths,
        sandbox: context.sandbox,
        ...(relay ? { extraEnv: { PATH: `${relay.binDir}:${process.env.PATH ?? ""}` }, extraReadable: [relay.folder], sudoRelaySocket: relay.socketPath, redact: [secret!] } : {}),
      }),
    );
  } finally {
    relay?.dispose();
    // A password serves one run; a retry asks again.
    if (secret !== null) context.secrets.forget(taskId, stepId);
  }
  // Stopped by a shutdown: like a crash, the outcome stays unknown, and the next start decides.
  if (signal.aborted && isShutdown(signal.reason)) throw signal.reason;
  store.append(taskId, "tool-result", { step_id: stepId, attempt: step.attempt, result });
  // The run is recorded; a cancelled task stops here rather than scoring a half-run step.
  signal.throwIfAborted();
  return "done";
}

/**
 * Why a tool may not follow a redirect to `url`: a denied host, or, once the task has read data of
 * this machine, a host not approved (asking in the middle of a call is not possible; the model can
 * fetch the address itself, and that is asked). Null when it may.
 */
function redirectRefusal(context: ExecutorContext, taskId: string, url: string): string | null {
  const verdict = egressVerdict(context.config.permissions.hosts, [url], context.store.projection(taskId).read_local, (host) => hostApproved(context.approvals, host));
  if (verdict.kind === "deny") return `${verdict.host} is in permissions.json hosts.deny`;
  if (verdict.kind === "ask") return `${verdict.reason}; fetch that address itself to be asked`;
  return null;
}
