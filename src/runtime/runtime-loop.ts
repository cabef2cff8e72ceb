import { resolve } from "node:path";
import { statSync } from "node:fs";
import { setTimeout as delay } from "node:timers/promises";
import type { Logger } from "pino";
import {
  RecallDecisionSchema,
  UserTaskSchema,
  isTerminalTaskState,
  type ExecutionDirective,
  type MemoryEntry,
  type MemoryHit,
  type ModelRole,
  type PlanStep,
  type RecallDecision,
} from "../contracts/index.js";
import type { DuckConfig } from "../config/config-schemas.js";
import { buildContext } from "../context/context-builder.js";
import { decideMemoryWrites } from "../decisions/memory-write-policy.js";
import { reportedModelCall, type ModelStreamSink } from "../decisions/model-stream-sink.js";
import { orderPlan, scheduleSteps, type StepView } from "../decisions/plan-scheduler.js";
import { heuristicRecall } from "../decisions/recall-policy.js";
import type { Router } from "../decisions/router.js";
import { describeError, DuckError, ErrorCode, isShutdown } from "../errors/duck-error.js";
import type { MemoryService, PreparedMemoryWrite } from "../memory/memory-service.js";
import type { ModelProvider } from "../models/model-provider.js";
import { estimateTokens } from "../models/model-provider.js";
import type { ApprovalStore } from "../permissions/approval-store.js";
import { approvalSubjectOf } from "../permissions/permission-policy.js";
import { SecretVault } from "../permissions/secret-vault.js";
import type { CommandClassifier } from "../permissions/command-classifier.js";
import type { StepProjection, TaskProjection } from "../state/task-projection.js";
import type { TaskStore } from "../state/task-store.js";
import type { ShellSandbox } from "../tools/shell-sandbox.js";
import type { ToolRegistry } from "../tools/tool-registry.js";
import { StepRunner, type StepTurn } from "./step-runner.js";
import { outcomeOf, type TaskOutcome } from "./task-outcome.js";
import { scopedSignal, withScopedSignal } from "../utils/scoped-signal.js";

export interface RuntimeLoopDeps {
  store: TaskStore;
  tools: ToolRegistry;
  memory: MemoryService;
  models: ModelProvider | null;
  router: Router;
  classifier: CommandClassifier;
  approvals: ApprovalStore;
  sandbox: ShellSandbox;
  /** DuckLM's own state: refused to file tools, hidden from commands. */
  protectedPaths?: readonly string[];
  config: DuckConfig;
  logger: Logger;
  /** Where tools work when a task names no workspace. */
  workspace: string;
  /** Settles when the shell parser is loaded and permissions.json's examples are checked. */
  ready: Promise<void>;
  /** How memory is searched for a task. Defaults to the memory store's keyword search. */
  memorySearch?: MemorySearch;
  /** The wait before a retry. Defaults to a real, cancellable timer. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

export type MemorySearch = (query: string, limit: number, taskId: string) => Promise<MemoryHit[]> | MemoryHit[];

export interface TaskHandle {
  taskId: string;
  /** Settles when the loop stops driving the task: finished, failed, cancelled or awaiting permission. */
  done: Promise<TaskOutcome>;
}

export interface SubmitOptions {
  /** Cancels the task. */
  signal?: AbortSignal;
  /**
   * Commit the new task before returning, for callers that hand its id to someone outside this
   * process (the HTTP API). Defaults to false: it commits with the task's first batch.
   */
  durable?: boolean;
}

export type PermissionAnswer = "allow" | "allow_always" | "deny";

interface ActiveTask {
  controller: AbortController;
  done: Promise<TaskOutcome>;
}

function planFromDirective(directive: ExecutionDirective): PlanStep[] {
  switch (directive.kind) {
    case "plan":
      return directive.steps;
    case "tool":
      return [{ id: "step-1", kind: "tool", description: directive.reason, depends_on: [], tool: directive.tool, arguments: directive.arguments }];
    case "coder":
      return [{ id: "step-1", kind: "coder", description: "coder", depends_on: [], coder: directive.coder }];
    default:
      return [];
  }
}

function composeAnswer(projection: TaskProjection): string {
  const order = projection.plan_order ?? [];
  const steps = order.map((id) => projection.steps[id]!);
  if (steps.length === 1) {
    const only = steps[0]!;
    if (only.status === "succeeded") return only.result?.output ?? "";
    return `${only.step.id} did not succeed: ${only.failure_reason ?? only.result?.error?.message ?? "unknown reason"}`;
  }
  const lines = steps.map((step) => {
    const mark = step.status === "succeeded" ? "✓" : step.status === "skipped" ? "–" : "✗";
    const detail = step.status === "succeeded" ? (step.result?.output ?? "").split("\n")[0] : step.failure_reason ?? "";
    return `${mark} ${step.step.id}: ${detail}`;
  });
  const last = [...steps].reverse().find((step) => step.status === "succeeded");
  return last ? `${lines.join("\n")}\n\n${last.result?.output ?? ""}`.trimEnd() : lines.join("\n");
}

/**
 * The centre of DuckLM: the only place that executes. Each call to `drive` reads the task's projection
 * and takes the next transition, so a task picks up where its events leave it: after a permission
 * answer, after a restart, or from scratch.
 */
export class RuntimeLoop {
  private readonly active = new Map<string, ActiveTask>();
  /** Passwords handed over for one step; memory only. */
  private readonly secrets = new SecretVault();
  private readonly steps: StepRunner;
  private readonly catalogue;

  constructor(private readonly deps: RuntimeLoopDeps) {
    this.catalogue = deps.tools.catalogue();
    this.steps = new StepRunner({
      store: deps.store,
      tools: deps.tools,
      models: deps.models,
      classifier: deps.classifier,
      approvals: deps.approvals,
      secrets: this.secrets,
      sandbox: deps.sandbox,
      protectedPaths: deps.protectedPaths ?? [],
      config: deps.config,
      logger: deps.logger,
      sinkFor: (taskId) => this.sinkFor(taskId),
      sleep: deps.sleep ?? ((ms, signal) => (ms > 0 ? delay(ms, undefined, { signal }) : Promise.resolve())),
    });
  }

  /** Records a new task and starts driving it. Throws DuckError(INVALID_INPUT) on a bad task. */
  submit(input: unknown, options: SubmitOptions = {}): TaskHandle {
    const parsed = UserTaskSchema.safeParse(input);
    if (!parsed.success) {
      const message = parsed.error.issues.map((issue) => `${issue.path.join(".") || "task"}: ${issue.message}`).join("; ");
      throw new DuckError(ErrorCode.InvalidInput, message);
    }
    const workspace = resolve(this.deps.workspace, parsed.data.workspace ?? ".");
    if (!statSync(workspace, { throwIfNoEntry: false })?.isDirectory()) {
      throw new DuckError(ErrorCode.InvalidInput, `workspace ${workspace} is not a directory`);
    }
    const projection = this.deps.store.createTask(
      { text: parsed.data.text, session_id: parsed.data.session_id, workspace, auto_approve: parsed.data.auto_approve },
      { durable: options.durable === true },
    );
    return { taskId: projection.task_id, done: this.drive(projection.task_id, options) };
  }

  /** Drives a stored task on from its current state. Returns the running drive if there is one. */
  drive(taskId: string, options: SubmitOptions = {}): Promise<TaskOutcome> {
    const running = this.active.get(taskId);
    if (running) return running.done;
    const controller = new AbortController();
    const done = this.execute(taskId, controller, options.signal).finally(() => this.active.delete(taskId));
    this.active.set(taskId, { controller, done });
    return done;
  }

  /** Marks a task left unfinished by an earlier process as resumed and drives it on. */
  resume(taskId: string, reason: string): Promise<TaskOutcome> {
    const projection = this.deps.store.projection(taskId);
    if (isTerminalTaskState(projection.state)) return Promise.resolve(outcomeOf(projection));
    if (!this.active.has(taskId)) this.deps.store.append(taskId, "task-resumed", { from_seq: projection.seq, reason, ...this.confinementMark() });
    return this.drive(taskId);
  }

  /**
   * Answers an open permission request and drives the task on. "allow_always" also remembers the
   * approval for this exact command and directory (optionally until `expiresAt`); for a no_always
   * command it counts as "allow" and nothing is remembered. A second answer to the same request is a
   * no-op; an unknown request is refused.
   */
  resolvePermission(taskId: string, requestId: string, answer: PermissionAnswer, by = "user", options: { expiresAt?: Date } = {}): TaskHandle {
    const { store } = this.deps;
    const projection = store.projection(taskId);
    const open = this.openRequest(taskId, requestId, "permission");
    if ("answered" in open) return open.answered;
    const request = open.step.permission_request!;
    const subject = approvalSubjectOf(request.call);
    // A tool without a permission category of its own was asked about for another reason (an
    // interrupted run): that answer is not an approval of the tool.
    const rememberable = !subject.startsWith("tool:") || this.deps.tools.get(request.call.tool)?.permission !== undefined;
    const remember = answer === "allow_always" && rememberable && request.category !== "no_always" && request.category !== "hard_stop";
    const decision = answer === "allow_always" && !remember ? "allow" : answer;
    store.transaction(() => {
      store.append(taskId, "permission-resolved", { request_id: requestId, step_id: request.step_id, decision, by });
      if (remember) {
        const approval = this.deps.approvals.grant({ command: subject, cwd: projection.workspace, category: request.category, grantedByTask: taskId, expiresAt: options.expiresAt ?? null });
        store.append(taskId, "approval-granted", { approval_id: approval.id, command: approval.command, cwd: approval.cwd, category: request.category, expires_at: approval.expires_at });
      }
    });
    return { taskId, done: this.drive(taskId) };
  }

  /**
   * Hands over the secret a step asked for (a sudo password). It stays in this process's memory for that
   * one run and is never stored; only the fact that it was provided becomes an event.
   */
  provideSecret(taskId: string, requestId: string, secret: string, by = "user"): TaskHandle {
    const { store } = this.deps;
    const open = this.openRequest(taskId, requestId, "secret");
    if ("answered" in open) return open.answered;
    const step = open.step;
    if (typeof secret !== "string" || secret.length === 0 || secret.length > 4096) {
      throw new DuckError(ErrorCode.InvalidInput, "the secret must be 1 to 4096 characters");
    }
    this.secrets.set(taskId, step.step.id, secret);
    store.append(taskId, "secret-provided", { request_id: requestId, step_id: step.step.id, by }, { durable: true });
    return { taskId, done: this.drive(taskId) };
  }

  /**
   * The step whose open request (permission or secret) has this id. A request answered before gives
   * the task's current handle, so a repeated answer is harmless; anything else is refused.
   */
  private openRequest(taskId: string, requestId: string, kind: "permission" | "secret"): { step: StepProjection } | { answered: TaskHandle } {
    const { store } = this.deps;
    const projection = store.projection(taskId);
    const step = Object.values(projection.steps).find((candidate) => (kind === "permission" ? candidate.permission_request : candidate.secret_request)?.request_id === requestId);
    if (step) return { step };
    const answerType = kind === "permission" ? "permission-resolved" : "secret-provided";
    if (store.listEvents(taskId).some((event) => event.type === answerType && event.payload.request_id === requestId)) {
      return { answered: { taskId, done: this.active.get(taskId)?.done ?? Promise.resolve(outcomeOf(projection)) } };
    }
    throw new DuckError(ErrorCode.PermissionRequestUnknown, `task ${taskId} has no open ${kind} request ${requestId}`, {
      details: { task_id: taskId, request_id: requestId },
    });
  }

  /** Stores a person's judgement of an answer or a step, for later calibration of the critic. */
  recordFeedback(taskId: string, feedback: { target: "answer" | "step"; step_id?: string | null; rating: "up" | "down"; comment?: string }, by = "user"): void {
    const { store } = this.deps;
    store.requireTask(taskId);
    const stepId = feedback.step_id ?? null;
    if (feedback.target === "step" && (!stepId || !store.projection(taskId).steps[stepId])) {
      throw new DuckError(ErrorCode.InvalidInput, `task ${taskId} has no step ${stepId ?? "(none given)"}`, { details: { task_id: taskId, step_id: stepId } });
    }
    store.append(taskId, "feedback-received", { target: feedback.target, step_id: stepId, rating: feedback.rating, comment: (feedback.comment ?? "").slice(0, 4000), by }, { durable: true });
  }

  /** Revokes a remembered approval; the revocation is recorded on the task that granted it. */
  revokeApproval(approvalId: string, by = "user"): void {
    const approval = this.deps.approvals.get(approvalId);
    if (!approval) throw new DuckError(ErrorCode.InvalidInput, `no approval with id ${approvalId}`, { details: { approval_id: approvalId } });
    const { store } = this.deps;
    store.transaction(() => {
      if (!this.deps.approvals.revoke(approvalId)) return;
      if (approval.granted_by_task && store.getTask(approval.granted_by_task)) {
        store.append(approval.granted_by_task, "approval-revoked", { approval_id: approvalId, command: approval.command, by });
      }
    });
  }

  /** Cancels a task: a running one is stopped, a waiting one is closed. */
  cancel(taskId: string, reason = "cancelled by the user"): void {
    const running = this.active.get(taskId);
    if (running) {
      running.controller.abort(new DuckError(ErrorCode.Cancelled, reason));
      return;
    }
    const projection = this.deps.store.projection(taskId);
    if (!isTerminalTaskState(projection.state)) this.deps.store.append(taskId, "task-cancelled", { reason }, { durable: true });
  }

  /** Ends a running task as if its time limit had passed (replay reproduces recorded time-outs with it). */
  expire(taskId: string): void {
    this.active.get(taskId)?.controller.abort(new DuckError(ErrorCode.TaskTimeout, "the task's time limit passed"));
  }

  isActive(taskId: string): boolean {
    return this.active.has(taskId);
  }

  /** Stops every running task (recorded as cancelled) and waits for them to settle. */
  /**
   * Stops driving every task without ending it: their state stays as their events left it, and the
   * next start resumes them (a command killed half-way counts as "outcome unknown").
   */
  async close(): Promise<void> {
    const running = [...this.active.values()];
    for (const task of running) task.controller.abort(new DuckError(ErrorCode.Shutdown, "DuckLM is shutting down"));
    await Promise.allSettled(running.map((task) => task.done));
    this.secrets.clear();
  }

  private async execute(taskId: string, controller: AbortController, external?: AbortSignal): Promise<TaskOutcome> {
    const scope = scopedSignal([controller.signal, external], this.deps.config.runtime.timeouts.task_ms, "task");
    const signal = scope.signal;
    const { store } = this.deps;
    try {
      await this.advance(taskId, signal);
    } catch (error) {
      const projection = store.projection(taskId);
      if (!isTerminalTaskState(projection.state)) {
        if (isShutdown(signal.reason) || isShutdown(error)) {
          // Left as it is, to be resumed by the next process.
        } else if (scope.timedOut || (DuckError.isInstance(signal.reason) && signal.reason.code === ErrorCode.TaskTimeout)) {
          store.append(taskId, "task-failed", {
            code: ErrorCode.TaskTimeout,
            message: `the task ran longer than ${this.deps.config.runtime.timeouts.task_ms} ms (runtime.json timeouts.task_ms)`,
          });
        } else if (signal.aborted) {
          const reason = signal.reason instanceof Error ? signal.reason.message : String(signal.reason ?? "cancelled");
          store.append(taskId, "task-cancelled", { reason });
        } else {
          this.deps.logger.error({ err: error, task_id: taskId }, "task failed");
          store.append(taskId, "task-failed", describeError(error));
        }
      }
    } finally {
      scope.dispose();
    }
    // Whoever awaits the outcome may read the task back at once: its events must be on disk.
    store.flush();
    return outcomeOf(store.projection(taskId));
  }

  private async advance(taskId: string, signal: AbortSignal): Promise<void> {
    const { store } = this.deps;
    let projection = store.projection(taskId);
    if (isTerminalTaskState(projection.state)) return;
    if (!projection.started) {
      await this.deps.ready;
      const hardStop = await this.deps.classifier.findHardStop(projection.text, projection.workspace);
      if (hardStop) {
        store.append(taskId, "task-failed", {
          code: ErrorCode.HardStop,
          message: `the task contains a command that is never run: ${hardStop}`,
        });
        return;
      }
      store.append(taskId, "task-started", this.confinementMark());
    }
    signal.throwIfAborted();
    projection = store.projection(taskId);
    if (!projection.directive) await this.route(projection, signal);
    projection = store.projection(taskId);
    const directive = projection.directive!;
    if (directive.kind === "respond") return await this.finish(taskId, directive.answer);
    if (directive.kind === "fail") {
      store.append(taskId, "task-failed", { code: ErrorCode.StepFailed, message: directive.reason });
      return;
    }
    if (!projection.plan_order) {
      const steps = planFromDirective(directive);
      let order: string[];
      try {
        order = orderPlan(steps);
      } catch (error) {
        store.append(taskId, "task-failed", describeError(error));
        return;
      }
      store.append(taskId, "plan-accepted", { steps, order });
    }
    const ending = await this.runPlan(taskId, signal);
    if (ending === "waiting" || ending === "failed") return;
    await this.finish(taskId, composeAnswer(store.projection(taskId)));
  }

  /** Recall, context, Router: everything up to `directive-decided`. Read-only, so safe to repeat. */
  private async route(projection: TaskProjection, signal: AbortSignal): Promise<void> {
    const { store, config, models, memory } = this.deps;
    const taskId = projection.task_id;
    const decision = await this.decideRecall(projection, signal);
    const search = this.deps.memorySearch ?? ((query: string, limit: number) => memory.recall(query, limit));
    const hits: MemoryHit[] = decision.recall && decision.query ? await search(decision.query, config.runtime.retrieval_top_k, taskId) : [];
    if (hits.length > 0) memory.store.markUsed(hits.map((hit) => hit.entry.id));
    store.append(taskId, "memory-recalled", { decision, hits });

    const history = projection.session_id ? store.sessionHistory(projection.session_id, taskId, 10) : [];
    const countRole: ModelRole = models?.hasRole("thinker") ? "thinker" : "json_compiler";
    // Budgets are counted with the model's own tokenizer, which needs the model loaded.
    if (models?.hasRole(countRole)) await models.ensureLoaded?.(countRole);
    const count = models?.hasRole(countRole) ? (text: string) => models.countTokens(countRole, text) : estimateTokens;
    const context = buildContext(
      {
        systemPrompt: config.prompts.system,
        taskText: projection.text,
        memory: hits,
        tools: this.catalogue,
        history: history.map((task) => ({ text: task.text, answer: task.answer })),
      },
      config.runtime.context_budgets,
      count,
    );
    store.append(taskId, "context-built", { sections: context.sections, total_tokens: context.total_tokens });
    signal.throwIfAborted();
    const routed = this.deps.router.usesModels
      ? await withScopedSignal([signal], config.runtime.timeouts.model_call_ms, "router model calls", (callSignal) =>
          this.deps.router.decide(projection.text, context, { sink: this.sinkFor(taskId), signal: callSignal }),
        )
      : await this.deps.router.decide(projection.text, context, { sink: this.sinkFor(taskId), signal });
    store.append(taskId, "directive-decided", { directive: routed.directive, source: routed.source });
  }

  private async decideRecall(projection: TaskProjection, signal: AbortSignal): Promise<RecallDecision> {
    const models = this.deps.models;
    const role: ModelRole | null = models?.hasRole("sys_util") ? "sys_util" : models?.hasRole("json_compiler") ? "json_compiler" : null;
    if (!models || !role) return heuristicRecall(projection.text);
    try {
      const result = await withScopedSignal([signal], this.deps.config.runtime.timeouts.model_call_ms, "recall model call", (callSignal) =>
        reportedModelCall(
          this.sinkFor(projection.task_id),
          role,
          "recall",
          (onDelta) =>
            models.generateJson({
              role,
              purpose: "recall",
              system: this.deps.config.prompts.sys_util,
              prompt: `Should long-term memory be searched for this task, and with which query?\n\nTask: ${projection.text}`,
              schema: RecallDecisionSchema,
              onDelta,
              signal: callSignal,
            }),
          (output) => output.raw,
        ),
      );
      return result.value;
    } catch (error) {
      signal.throwIfAborted();
      this.deps.logger.warn({ err: error, task_id: projection.task_id }, "recall model failed; using the heuristic");
      return heuristicRecall(projection.text);
    }
  }

  /**
   * Runs ready steps (independent ones in parallel, up to the configured limit) until the plan is
   * over, a step fails the task, or every open step waits for the user.
   */
  private async runPlan(taskId: string, signal: AbortSignal): Promise<"done" | "waiting" | "failed" | "respond"> {
    const planController = new AbortController();
    // Only a plan with siblings needs its own signal, to stop the others when one fails the task.
    if ((this.deps.store.projection(taskId).plan_order?.length ?? 0) <= 1) {
      return this.runSteps(taskId, signal, planController, signal);
    }
    const planScope = scopedSignal([signal, planController.signal]);
    try {
      return await this.runSteps(taskId, signal, planController, planScope.signal);
    } finally {
      planScope.dispose();
    }
  }

  private async runSteps(
    taskId: string,
    signal: AbortSignal,
    planController: AbortController,
    planSignal: AbortSignal,
  ): Promise<"done" | "waiting" | "failed" | "respond"> {
    const { store, config } = this.deps;
    const running = new Map<string, Promise<StepTurn | undefined>>();
    const errors: unknown[] = [];
    let ending: "failed" | "respond" | null = null;
    const launch = (stepId: string, work: () => Promise<StepTurn>) => {
      const settled = work()
        .catch((error: unknown) => {
          errors.push(error);
          return undefined;
        })
        .finally(() => running.delete(stepId));
      running.set(stepId, settled);
    };

    // Steps a previous drive left half-way (a permission answer, a restart) continue where they stand.
    for (const step of Object.values(store.projection(taskId).steps)) {
      if (step.status === "running") launch(step.step.id, () => this.steps.advance(taskId, step.step.id, planSignal));
    }

    for (;;) {
      const projection = store.projection(taskId);
      if (ending === null) {
        const failed = Object.values(projection.steps).find((step) => step.status === "failed" && step.recovery !== "continue");
        if (failed) {
          ending = failed.recovery === "respond" ? "respond" : "failed";
          if (ending === "failed") planController.abort(new DuckError(ErrorCode.StepFailed, `step ${failed.step.id} failed`));
        }
      }
      if (ending === null) {
        const views = new Map<string, StepView>();
        for (const [id, step] of Object.entries(projection.steps)) {
          views.set(id, { id, depends_on: step.step.depends_on, status: running.has(id) ? "running" : step.status });
        }
        const decision = scheduleSteps(projection.plan_order ?? [], views, config.runtime.scheduler.max_parallel_steps);
        if (decision.blocked.length > 0) {
          store.appendAll(
            taskId,
            decision.blocked.map(({ id, because }) => ({ type: "step-skipped" as const, payload: { step_id: id, reason: `depends on ${because}, which did not succeed` } })),
          );
          continue;
        }
        for (const stepId of decision.ready) launch(stepId, () => this.steps.start(taskId, stepId, planSignal));
        if (running.size === 0) {
          const waiting = Object.values(projection.steps).find((step) => step.status === "awaiting_permission");
          if (waiting) {
            if (projection.state !== "awaiting_permission") {
              const requestId = waiting.permission_request?.request_id ?? waiting.secret_request?.request_id ?? "";
              store.append(taskId, "task-awaiting-permission", { request_id: requestId, step_id: waiting.step.id });
            }
            return "waiting";
          }
          return "done";
        }
      } else if (running.size === 0) {
        break;
      }
      await Promise.race(running.values());
      // A step that throws (the task was cancelled, or storage failed) ends the whole plan, unless
      // it was this loop that stopped it because another step failed the task.
      if (errors.length > 0 && !(ending === "failed" && planController.signal.aborted && !signal.aborted)) {
        planController.abort(errors[0]);
        await Promise.allSettled(running.values());
        throw errors[0];
      }
    }
    signal.throwIfAborted();
    if (ending === "failed") {
      const failed = Object.values(store.projection(taskId).steps).find((step) => step.status === "failed" && step.recovery === "fail");
      store.append(taskId, "task-failed", {
        code: failed?.result?.error?.code ?? ErrorCode.StepFailed,
        message: `step ${failed?.step.id ?? "?"} failed: ${failed?.failure_reason ?? "no reason recorded"}`,
      });
      return "failed";
    }
    return "respond";
  }

  /**
   * Final answer, memory writes and `task-completed`, in one transaction. Embeddings and the
   * near-duplicate check happen before it; the vector index is updated after it commits.
   */
  private async finish(taskId: string, answer: string): Promise<void> {
    const { store, memory } = this.deps;
    const projection = store.projection(taskId);
    const decided = decideMemoryWrites({ ...projection, answer, state: "completed" });
    const prepared = await Promise.all(decided.map(async (write) => ({ write, plan: await memory.prepare(write.text, write.kind) })));
    const applied: Array<{ entry: MemoryEntry; plan: PreparedMemoryWrite }> = [];
    store.transaction(() => {
      store.append(taskId, "answer-completed", { answer });
      for (const { write, plan } of prepared) {
        const entry = memory.applyWrite(plan, taskId);
        applied.push({ entry, plan });
        const reason = plan.action === "reinforce" ? `${write.reason}; repeats entry #${entry.id} (similarity ${plan.similarity.toFixed(2)}), so its weight was raised` : write.reason;
        store.append(taskId, "memory-written", { action: plan.action, memory_id: entry.id, kind: write.kind, text: write.text, reason });
      }
      store.append(taskId, "task-completed", { answer });
    });
    for (const { entry, plan } of applied) memory.indexWrite(entry, plan);
  }

  /** Recorded with the task when its commands are not confined, so every decision (and its replay) knows. */
  private confinementMark(): { confinement?: "none" | "off" } {
    const confinement = this.deps.sandbox.confinement;
    return confinement === "confined" ? {} : { confinement };
  }

  private sinkFor(taskId: string): ModelStreamSink {
    const store = this.deps.store;
    return {
      started: (role, purpose) => store.append(taskId, "model-output-started", { role, purpose }),
      delta: (role, purpose, text) => store.append(taskId, "model-output-delta", { role, purpose, text }),
      completed: (role, purpose, text) => store.append(taskId, "model-output-completed", { role, purpose, text }),
      failed: (role, purpose, error) => store.append(taskId, "model-output-failed", { role, purpose, code: error.code, message: error.message }),
    };
  }
}
