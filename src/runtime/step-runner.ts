import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import type { Logger } from "pino";
import { CoderProposalSchema, CriticScoreSchema, type CommandCategory, type CoderPlanStep, type CoderProposal, type CriticScore, type ToolCall, type ToolResult } from "../contracts/index.js";
import type { DuckConfig } from "../config/config-schemas.js";
import { criticPrompt, heuristicScore } from "../decisions/critic-policy.js";
import { decideRecovery } from "../decisions/recovery-policy.js";
import { reportedModelCall, type ModelStreamSink } from "../decisions/model-stream-sink.js";
import { describeError, ErrorCode, isShutdown } from "../errors/duck-error.js";
import type { ModelProvider } from "../models/model-provider.js";
import type { ApprovalStore } from "../permissions/approval-store.js";
import { openSudoRelay } from "../permissions/sudo-relay.js";
import { scrubEnvironment } from "../tools/builtin/shell-exec.js";
import type { SecretVault } from "../permissions/secret-vault.js";
import type { CommandClassifier } from "../permissions/command-classifier.js";
import { approvalSubjectOf, CODE_APPLY_TOOL, decidePermission } from "../permissions/permission-policy.js";
import type { TaskStore } from "../state/task-store.js";
import type { StepProjection } from "../state/task-projection.js";
import type { ShellSandbox } from "../tools/shell-sandbox.js";
import type { ToolRegistry } from "../tools/tool-registry.js";
import { resolveInWorkspace } from "../tools/workspace-paths.js";
import { withScopedSignal } from "../utils/scoped-signal.js";

export interface StepRunnerDeps {
  store: TaskStore;
  tools: ToolRegistry;
  models: ModelProvider | null;
  classifier: CommandClassifier;
  approvals: ApprovalStore;
  secrets: SecretVault;
  sandbox: ShellSandbox;
  protectedPaths: readonly string[];
  config: DuckConfig;
  logger: Logger;
  sinkFor(taskId: string): ModelStreamSink;
  sleep(ms: number, signal: AbortSignal): Promise<void>;
}

/** How a step's turn ended, for the plan loop. */
export type StepTurn = "settled" | "waiting" | "retry";

/** A file's text as the coder should see it, bounded; a missing file is said to be new. */
async function currentContent(workspace: string, path: string, protectedPaths: readonly string[]): Promise<string> {
  try {
    const text = await readFile(resolveInWorkspace(workspace, path, protectedPaths), "utf8");
    return text.length > 20_000 ? `${text.slice(0, 20_000)}\n[…cut]` : text;
  } catch {
    return "(does not exist yet)";
  }
}

function deniedResult(tool: string, code: string, message: string): ToolResult {
  return { tool, ok: false, output: "", error: { code, message }, truncated: false, duration_ms: 0 };
}

/**
 * Executes one plan step for the RuntimeLoop: permission, tool or coder, critic, recovery. It picks up
 * wherever the step's projection stands, which is what makes a paused or crashed step resumable.
 */
export class StepRunner {
  constructor(private readonly deps: StepRunnerDeps) {}

  /** Starts a new attempt of a pending step and runs it. */
  async start(taskId: string, stepId: string, signal: AbortSignal): Promise<StepTurn> {
    const attempt = this.step(taskId, stepId).attempt + 1;
    this.deps.store.append(taskId, "step-started", { step_id: stepId, attempt });
    return this.advance(taskId, stepId, signal);
  }

  /** Carries a started step on from where its events leave it. */
  async advance(taskId: string, stepId: string, signal: AbortSignal): Promise<StepTurn> {
    let step = this.step(taskId, stepId);
    if (step.result === null) {
      const turn = await this.produceResult(taskId, step, signal);
      if (turn === "waiting") return "waiting";
      step = this.step(taskId, stepId);
    }
    if (step.score === null) {
      const { score, source } = await this.score(taskId, step, signal);
      this.deps.store.append(taskId, "critic-scored", { step_id: stepId, attempt: step.attempt, score, source });
      step = this.step(taskId, stepId);
    }
    return this.recover(taskId, step, signal);
  }

  private step(taskId: string, stepId: string): StepProjection {
    const step = this.deps.store.projection(taskId).steps[stepId];
    if (!step) throw new Error(`step ${stepId} is not in task ${taskId}`);
    return step;
  }

  private async produceResult(taskId: string, step: StepProjection, signal: AbortSignal): Promise<"done" | "waiting"> {
    const { store } = this.deps;
    const plan = step.step;
    let call: ToolCall;
    // What the user is shown and what events record; for a coder step, file names instead of contents.
    let shownCall: ToolCall;
    if (plan.kind === "coder") {
      if (!step.proposal) {
        const proposed = await this.proposeCode(taskId, step, signal);
        if ("failure" in proposed) {
          store.append(taskId, "tool-result", { step_id: plan.id, attempt: step.attempt, result: proposed.failure });
          return "done";
        }
        store.append(taskId, "coder-proposed", { step_id: plan.id, attempt: step.attempt, proposal: proposed.proposal });
        step = this.step(taskId, plan.id);
      }
      const testCommand = plan.coder.test_command ? { test_command: plan.coder.test_command } : {};
      call = { tool: CODE_APPLY_TOOL, arguments: { files: step.proposal!.files, ...testCommand } };
      shownCall = { tool: CODE_APPLY_TOOL, arguments: { files: step.proposal!.files.map((file) => file.path), ...testCommand } };
    } else {
      if (this.deps.tools.isInternal(plan.tool)) {
        // Reached only through a coder step, which decides its files and its test command itself.
        store.append(taskId, "tool-result", { step_id: plan.id, attempt: step.attempt, result: deniedResult(plan.tool, ErrorCode.ToolNotFound, `${plan.tool} is not a tool a plan can call`) });
        return "done";
      }
      call = { tool: plan.tool, arguments: plan.arguments };
      shownCall = call;
    }
    return this.runCall(taskId, step, call, shownCall, signal);
  }

  /** Permission, secret, and the run of one call, each step of the way recorded so that it resumes. */
  private async runCall(taskId: string, step: StepProjection, call: ToolCall, shownCall: ToolCall, signal: AbortSignal): Promise<"done" | "waiting"> {
    const { store } = this.deps;
    const plan = { id: step.step.id, tool: call.tool, arguments: call.arguments };
    const tool = this.deps.tools.get(plan.tool);
    const effect = tool?.effect ?? "side-effecting";

    if (step.permission_denied) {
      const result = deniedResult(plan.tool, ErrorCode.PermissionDenied, "the user denied permission");
      store.append(taskId, "tool-result", { step_id: plan.id, attempt: step.attempt, result });
      return "done";
    }
    const projection = store.projection(taskId);
    const command =
      plan.tool === "shell_exec" && typeof plan.arguments.command === "string"
        ? plan.arguments.command
        : plan.tool === CODE_APPLY_TOOL && typeof plan.arguments.test_command === "string"
          ? plan.arguments.test_command
          : null;
    const classification =
      command !== null
        ? await this.deps.classifier.classify(command, { workspace: projection.workspace })
        : plan.tool === "shell_exec"
          ? { category: "unknown" as const, reason: "no command given", commands: [], network: false, sudo: [] }
          : null;
    let network = step.permission_granted && (classification?.network ?? false);
    if (!step.permission_granted) {
      if (step.tool_called && effect === "side-effecting") {
        // Started before a crash and no result was recorded: it may or may not have happened.
        this.requestPermission(taskId, plan.id, shownCall, "unknown", "its earlier run was interrupted and its outcome is unknown; run it again?", [], classification?.network ?? false);
        return "waiting";
      }
      if (step.ask_before_retry) {
        this.requestPermission(taskId, plan.id, shownCall, "unknown", "its previous attempt timed out and may have done part of its work; run it again?", classification?.commands ?? [], classification?.network ?? false);
        return "waiting";
      }
      const subject = approvalSubjectOf(call);
      // Only a command or a tool with a permission category can be covered by a remembered approval:
      // other calls (file reads, memory) skip the lookup.
      const approval = command !== null || tool?.permission !== undefined ? this.deps.approvals.findActive(subject, projection.workspace) : null;
      const decision = decidePermission({
        call,
        effect,
        classification,
        ...(tool?.permission ? { toolCategory: tool.permission } : {}),
        approval,
        unknownDecision: this.deps.config.permissions.unknown,
        preApproved: projection.auto_approve,
        confinement: projection.confinement,
        networkAllowed: this.deps.config.runtime.sandbox.network,
      });
      if (decision.approval_id) {
        store.append(taskId, "approval-used", { approval_id: decision.approval_id, step_id: plan.id, command: subject });
      }
      if (decision.decision === "deny") {
        const code = decision.category === "hard_stop" ? ErrorCode.HardStop : ErrorCode.PermissionDenied;
        const result = deniedResult(plan.tool, code, `refused: ${decision.reason}`);
        store.append(taskId, "tool-result", { step_id: plan.id, attempt: step.attempt, result });
        return "done";
      }
      if (decision.decision === "ask") {
        this.requestPermission(taskId, plan.id, shownCall, decision.category, decision.reason, decision.commands, decision.network);
        return "waiting";
      }
      network = decision.network;
    }

    // sudo asks for a password: it comes from the user through the secrets API, never from a store.
    const usesSudo = classification?.commands.some((simple) => simple === "sudo" || simple.startsWith("sudo ")) ?? false;
    let secret: string | null = null;
    if (usesSudo) {
      secret = this.deps.secrets.get(taskId, plan.id);
      if (secret === null) {
        store.append(taskId, "secret-requested", { request_id: randomUUID(), step_id: plan.id, kind: "sudo_password", prompt: `sudo password to run: ${command ?? ""}` });
        return "waiting";
      }
    }

    // A side-effecting call is on disk before it runs: after a crash, a recorded start without a
    // result means "may have happened", and the user is asked. A read-only call may simply run again.
    store.append(taskId, "tool-called", { step_id: plan.id, attempt: step.attempt, call: shownCall, effect }, { durable: effect === "side-effecting" });
    const { runtime } = this.deps.config;
    // The command line runs confined as any other; only its `sudo` runs outside, through the relay,
    // and only with the argument vectors the approved text contains.
    const relay =
      secret !== null ? openSudoRelay({ password: secret, allowed: classification?.sudo ?? [], workspace: projection.workspace, env: scrubEnvironment(process.env) }) : null;
    let result: ToolResult;
    try {
      result = await withScopedSignal([signal], runtime.timeouts.step_ms, `step ${plan.id}`, (stepSignal) =>
        this.deps.tools.run(plan.tool, plan.arguments, {
          signal: stepSignal,
          workspace: projection.workspace,
          timeoutMs: runtime.timeouts.step_ms,
          outputCapBytes: runtime.tools.output_cap_bytes,
          fileReadMaxBytes: runtime.tools.file_read_max_bytes,
          taskId,
          stepId: plan.id,
          attempt: step.attempt,
          network,
          protectedPaths: this.deps.protectedPaths,
          sandbox: this.deps.sandbox,
          ...(relay ? { extraEnv: { PATH: `${relay.binDir}:${process.env.PATH ?? ""}` }, extraReadable: [relay.folder], redact: [secret!] } : {}),
        }),
      );
    } finally {
      relay?.dispose();
      // A password serves one run; a retry asks again.
      if (secret !== null) this.deps.secrets.forget(taskId, plan.id);
    }
    // Stopped by a shutdown: like a crash, the outcome stays unknown, and the next start decides.
    if (signal.aborted && isShutdown(signal.reason)) throw signal.reason;
    store.append(taskId, "tool-result", { step_id: plan.id, attempt: step.attempt, result });
    // The run is recorded; a cancelled task stops here rather than scoring a half-run step.
    signal.throwIfAborted();
    return "done";
  }

  private requestPermission(
    taskId: string,
    stepId: string,
    call: { tool: string; arguments: Record<string, unknown> },
    category: CommandCategory,
    reason: string,
    commands: string[],
    network: boolean,
  ): void {
    this.deps.store.append(taskId, "permission-requested", { request_id: randomUUID(), step_id: stepId, call, category, reason, commands, ...(network ? { network: true } : {}) });
  }

  /**
   * Asks the coder model for the step's files under the proposal's grammar, giving it the files as they
   * are now and, on a retry, what went wrong last time (the test output), so recovery can send a
   * failure back to the coder.
   */
  private async proposeCode(taskId: string, step: StepProjection, signal: AbortSignal): Promise<{ proposal: CoderProposal } | { failure: ToolResult }> {
    const started = performance.now();
    const plan = step.step as CoderPlanStep;
    const models = this.deps.models;
    if (!models?.hasRole("coder")) {
      return { failure: deniedResult(CODE_APPLY_TOOL, ErrorCode.ModelUnavailable, "no coder model is configured (config/models.json, role coder)") };
    }
    const projection = this.deps.store.projection(taskId);
    const current = await Promise.all(plan.coder.files.map(async (path) => `### ${path}\n${await currentContent(projection.workspace, path, this.deps.protectedPaths)}`));
    const previous = this.deps.store
      .listEvents(taskId)
      .filter((event) => event.type === "tool-result" && event.payload.step_id === plan.id && (event.payload.attempt as number) < step.attempt)
      .at(-1)?.payload.result as ToolResult | undefined;
    const prompt = [
      `Task: ${projection.text}`,
      `## Specification\n${plan.coder.specification}`,
      current.length > 0 ? `## Files now\n${current.join("\n\n")}` : "",
      plan.coder.test_command ? `## Test\nAfter your files are written, this command must succeed: ${plan.coder.test_command}` : "",
      previous ? `## Your previous attempt failed\n${previous.error ? `${previous.error.code}: ${previous.error.message}\n` : ""}${previous.output.slice(-4000)}` : "",
      "Reply with JSON: files (each with its path relative to the workspace and its whole new content) and notes.",
    ].filter(Boolean).join("\n\n");
    try {
      const proposed = await withScopedSignal([signal], this.deps.config.runtime.timeouts.model_call_ms, "coder model call", (callSignal) =>
        reportedModelCall(
          this.deps.sinkFor(taskId),
          "coder",
          plan.id,
          (onDelta) => models.generateJson({ role: "coder", purpose: plan.id, system: this.deps.config.prompts.coder, prompt, schema: CoderProposalSchema, onDelta, signal: callSignal }),
          (output) => output.raw,
        ),
      );
      return { proposal: proposed.value };
    } catch (error) {
      signal.throwIfAborted();
      const described = describeError(error);
      return { failure: { tool: CODE_APPLY_TOOL, ok: false, output: "", error: described, truncated: false, duration_ms: performance.now() - started } };
    }
  }

  private async score(taskId: string, step: StepProjection, signal: AbortSignal): Promise<{ score: CriticScore; source: "model" | "heuristic" }> {
    const result = step.result!;
    const models = this.deps.models;
    const role = models?.hasRole("critic") ? "critic" : models?.hasRole("json_compiler") ? "json_compiler" : null;
    // A refused or invalid call needs no model to judge; neither does a run without any model.
    if (!models || !role || result.error?.code === ErrorCode.PermissionDenied || result.error?.code === ErrorCode.HardStop) {
      return { score: heuristicScore(result), source: "heuristic" };
    }
    const projection = this.deps.store.projection(taskId);
    const purpose = `critic:${step.step.id}`;
    try {
      const judged = await withScopedSignal([signal], this.deps.config.runtime.timeouts.model_call_ms, "critic model call", (callSignal) =>
        reportedModelCall(
          this.deps.sinkFor(taskId),
          role,
          purpose,
          (onDelta) =>
            models.generateJson({
              role,
              purpose,
              system: this.deps.config.prompts.critic,
              prompt: criticPrompt(projection.text, step.step, result),
              schema: CriticScoreSchema,
              onDelta,
              signal: callSignal,
            }),
          (output) => output.raw,
        ),
      );
      return { score: judged.value, source: "model" };
    } catch (error) {
      signal.throwIfAborted();
      this.deps.logger.warn({ err: error, task_id: taskId, step_id: step.step.id }, "critic model failed; using the heuristic");
      return { score: heuristicScore(result), source: "heuristic" };
    }
  }

  /** A shell command whose every word is a safe shape may simply run again; anything else may not. */
  private async rerunsSafely(step: StepProjection, taskId: string): Promise<boolean> {
    const plan = step.step;
    if (plan.kind !== "tool" || plan.tool !== "shell_exec" || typeof plan.arguments.command !== "string") return false;
    const classification = await this.deps.classifier.classify(plan.arguments.command, { workspace: this.deps.store.projection(taskId).workspace });
    return classification.category === "normal";
  }

  private async recover(taskId: string, step: StepProjection, signal: AbortSignal): Promise<StepTurn> {
    const score = step.score!;
    const code = step.result?.error?.code;
    const retryable = code !== ErrorCode.PermissionDenied && code !== ErrorCode.HardStop && code !== ErrorCode.ModelUnavailable;
    const decision = decideRecovery(score, step.attempt, this.deps.config.runtime, { retryable });
    const stepId = step.step.id;
    if (decision.action === "continue" && score.verdict === "pass") {
      this.deps.store.append(taskId, "step-completed", { step_id: stepId, attempt: step.attempt });
      return "settled";
    }
    if (decision.action === "retry") {
      // A command stopped by its time limit may have done part of its work: like a crash, it is asked about.
      const askFirst = code === ErrorCode.ToolTimeout && step.tool_called && (this.deps.tools.get(step.result?.tool ?? "")?.effect ?? "side-effecting") === "side-effecting" && !(await this.rerunsSafely(step, taskId));
      this.deps.store.append(taskId, "step-retrying", { step_id: stepId, attempt: step.attempt, delay_ms: decision.delay_ms, reason: decision.reason, ...(askFirst ? { ask_first: true } : {}) });
      await this.deps.sleep(decision.delay_ms, signal);
      return "retry";
    }
    this.deps.store.append(taskId, "step-failed", { step_id: stepId, attempt: step.attempt, recovery: decision.action, reason: decision.reason });
    return "settled";
  }
}
