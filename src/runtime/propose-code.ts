import { readFile } from "node:fs/promises";
import { CoderProposalSchema, type CoderPlanStep, type CoderProposal, type ToolResult } from "../contracts/index.js";
import { coderPrompt } from "../decisions/coder-prompt.js";
import { describeError, ErrorCode } from "../errors/duck-error.js";
import { CODE_APPLY_TOOL } from "../permissions/permission-policy.js";
import type { StepProjection, TaskProjection } from "../state/task-projection.js";
import { resolveInWorkspace } from "../tools/workspace-paths.js";
import type { ExecutorContext } from "./executor-context.js";
import { callModelJson, servesRole } from "./model-call.js";
import { deniedResult } from "./permit-call.js";

/** A file's text as the coder should see it, bounded; a missing file is said to be new. */
async function currentContent(workspace: string, path: string, protectedPaths: readonly string[]): Promise<string> {
  try {
    const text = await readFile(resolveInWorkspace(workspace, path, protectedPaths), "utf8");
    return text.length > 20_000 ? `${text.slice(0, 20_000)}\n[…cut]` : text;
  } catch {
    return "(does not exist yet)";
  }
}

/**
 * Asks the coder model for the step's files under the proposal's grammar, giving it the files as they
 * are now and, on a retry, what went wrong last time (the test output), so recovery can send a
 * failure back to the coder. A failure of the call becomes the step's result.
 */
export async function proposeCode(context: ExecutorContext, projection: TaskProjection, step: StepProjection, signal: AbortSignal): Promise<{ proposal: CoderProposal } | { failure: ToolResult }> {
  const plan = step.step as CoderPlanStep;
  if (!servesRole(context, "coder")) {
    return { failure: deniedResult(CODE_APPLY_TOOL, ErrorCode.ModelUnavailable, "no coder model is configured (config/models.json, role coder)") };
  }
  const files = await Promise.all(plan.coder.files.map(async (path) => ({ path, content: await currentContent(projection.workspace, path, context.protectedPaths) })));
  const previous = context.store
    .listEvents(projection.task_id)
    .filter((event) => event.type === "tool-result" && event.payload.step_id === plan.id && (event.payload.attempt as number) < step.attempt)
    .at(-1)?.payload.result as ToolResult | undefined;
  try {
    const proposed = await callModelJson(
      context,
      projection.task_id,
      { role: "coder", purpose: plan.id, system: context.config.prompts.coder, prompt: coderPrompt(projection.text, plan, files, previous ?? null), schema: CoderProposalSchema },
      signal,
    );
    return { proposal: proposed.value };
  } catch (error) {
    signal.throwIfAborted();
    // Nothing was applied, so no time is counted here: the coder's own time is in its model-output
    // events, and a measured figure would make the replay of this result differ from the recording.
    return { failure: { tool: CODE_APPLY_TOOL, ok: false, output: "", error: describeError(error), truncated: false, duration_ms: 0 } };
  }
}
