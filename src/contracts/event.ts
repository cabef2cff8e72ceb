import { z } from "zod";
import { ALL_EVENT_TYPES, type EventTypeName } from "./event-types.js";
import type { CriticScore, RecoveryAction, StepReview } from "./critic.js";
import type { CoderProposal, ExecutionDirective, PlanStep } from "./directive.js";
import type { MemoryHit, RecallDecision } from "./memory.js";
import type { ToolCall, ToolResult } from "./tool.js";
import type { ModelCallUsage, ModelWork } from "./model-work.js";

export const EventTypeSchema = z.enum(ALL_EVENT_TYPES as [EventTypeName, ...EventTypeName[]]);

/** One recorded transition. `seq` counts 1, 2, 3… per task with no gaps. */
export const EventSchema = z.object({
  task_id: z.string(),
  seq: z.number().int().positive(),
  type: EventTypeSchema,
  time: z.string(),
  payload: z.record(z.string(), z.unknown()),
});
export type DuckEvent = z.infer<typeof EventSchema>;

/** What bounds one task's agent loop: decisions, and prompt plus generated tokens. */
export interface AgentLoopLimits {
  max_iterations: number;
  token_budget: number;
}

export type ModelRole = "thinker" | "json_compiler" | "critic" | "coder" | "sys_util" | "orchestrator" | "embeddings";

export type PermissionDecisionKind = "allow" | "ask" | "deny";
export type CommandCategory = "read_only" | "normal" | "no_always" | "hard_stop" | "unknown";
/** What a user may approve in advance for a task: commands no rule covers, and network use. */
export type PreApproval = "unknown" | "network";

/** The payload each event type carries. The event store keeps them as JSON. */
export interface EventPayloads {
  /** `kind` is `memory-edit` for a memory change made outside a task (HTTP, CLI, SDK): it is recorded, not driven. */
  "task-received": { text: string; session_id: string | null; workspace: string; auto_approve?: PreApproval[]; kind?: "memory-edit" };
  /** `confinement` is set when commands of this task are not confined (`none`: no sandbox here; `off`: turned off). */
  /** `loop`: the agent loop's limits this task runs under (absent in tasks recorded before the loop: one decision). */
  /**
   * `settings`: the runtime.json sections the task's decisions follow (timeouts, retry, recovery,
   * agent, scheduler, context budgets) as they were, so that a replay follows the same ones.
   */
  /** `confined_commands`: commands no rule covers run unasked when confined (absent: they were asked, as before). */
  "task-started": { confinement?: "none" | "off"; confined_commands?: "run"; loop?: AgentLoopLimits; settings?: Record<string, unknown> };
  "task-resumed": { from_seq: number; reason: string; confinement?: "none" | "off" };
  /** The task waits for a free place: `running` tasks run, at most `limit` (runtime.json `scheduler.max_running_tasks`); it is number `position` in line. */
  "task-queued": { position: number; running: number; limit: number };
  /** A place came free: the task runs from here. */
  "task-dequeued": Record<string, never>;
  "task-awaiting-permission": { request_id: string; step_id: string };
  /** `model_work`: what the task's model calls cost together, when they reported it. */
  "task-completed": { answer: string; model_work?: ModelWork };
  "task-failed": { code: string; message: string; model_work?: ModelWork };
  "task-cancelled": { reason: string; model_work?: ModelWork };
  /**
   * `tools`: the names of the tools offered to the model (a replay offers the same);
   * `tools_left_out`: how many of them the catalogue named without showing, for want of budget;
   * `prompts_counted`: the model calls record their own prompt tokens, so this context is not counted again.
   */
  "context-built": { sections: Record<string, { tokens: number; budget: number; truncated: boolean }>; total_tokens: number; tools?: string[]; tools_left_out?: number; prompts_counted?: boolean };
  "memory-recalled": { decision: RecallDecision; hits: MemoryHit[] };
  "memory-written": { action: "insert" | "reinforce" | "forget" | "pin" | "unpin"; memory_id: number; kind: string; text: string; reason: string };
  /** `prompt_tokens`: what the request sent (system and prompt), counted towards the task's token budget. */
  "model-output-started": { role: ModelRole; purpose: string; prompt_tokens?: number };
  "model-output-delta": { role: ModelRole; purpose: string; text: string };
  /** `usage`: what the call cost the model (tokens evaluated, reused from the cache, generated; time), where the provider measured it. */
  "model-output-completed": { role: ModelRole; purpose: string; text: string; usage?: ModelCallUsage };
  "model-output-failed": { role: ModelRole; purpose: string; code: string; message: string };
  /** `review`: the critic's verdicts on the previous decision's steps, given in this decision where one model plays both (see `agent.fold_critic`). */
  "directive-decided": { directive: ExecutionDirective; source: "model" | "intent-parser" | "no-model"; review?: StepReview[] };
  /** The JSON compiler's directive was cut off or did not validate; it is asked again with the error. */
  "directive-retried": { attempt: number; error: string };
  /**
   * A model summarised what no longer fits a section's budget: the oldest turns of the conversation
   * (`covers`: their task ids) or the earliest decisions of the agent loop (1 to `through`).
   */
  "context-summarised": { section: "history"; covers: string[]; summary: string } | { section: "observations"; through: number; summary: string };
  /** The model sees what the previous directive's steps did and decides again. */
  "iteration-started": { iteration: number; reason: string };
  "plan-accepted": { steps: PlanStep[]; order: string[] };
  "step-started": { step_id: string; attempt: number };
  "step-retrying": { step_id: string; attempt: number; delay_ms: number; reason: string; ask_first?: boolean };
  "step-completed": { step_id: string; attempt: number };
  "step-failed": { step_id: string; attempt: number; recovery: RecoveryAction; reason: string };
  "step-skipped": { step_id: string; reason: string };
  "coder-proposed": { step_id: string; attempt: number; proposal: CoderProposal };
  "tool-called": { step_id: string; attempt: number; call: ToolCall; effect: "read-only" | "side-effecting" };
  "tool-result": { step_id: string; attempt: number; result: ToolResult };
  /** `source` `deferred`: the step passed on its tool's word, and the next decision reviews it (see `directive-decided`). */
  "critic-scored": { step_id: string; attempt: number; score: CriticScore; source: "model" | "heuristic" | "deferred" };
  /** `ran_files` and `content_digest`: the workspace files the command runs (a script, a recipe) and what they held when asked. */
  /** `hosts`: where the request would send what the task read; "always" approves them for every task. */
  "permission-requested": { request_id: string; step_id: string; call: ToolCall; category: CommandCategory; reason: string; commands: string[]; network?: boolean; ran_files?: string[]; content_digest?: string; hosts?: string[] };
  "permission-resolved": { request_id: string; step_id: string; decision: PermissionDecisionKind | "allow_always"; by: string };
  /** `ran_files`: it holds while these files are as they were; `network`: it gives the command the network. */
  "approval-granted": { approval_id: string; command: string; cwd: string; category: CommandCategory; expires_at: string | null; ran_files?: string[]; network?: boolean };
  "approval-used": { approval_id: string; step_id: string; command: string };
  "approval-revoked": { approval_id: string; command: string; by: string };
  "secret-requested": { request_id: string; step_id: string; kind: "sudo_password"; prompt: string };
  "secret-provided": { request_id: string; step_id: string; by: string };
  /** `iteration`: the decision whose step was rated (a step id can recur from one decision to the next); absent on answers and in logs from before it was kept. */
  "feedback-received": { target: "answer" | "step"; step_id: string | null; iteration?: number; rating: "up" | "down"; comment: string; by: string };
  "answer-completed": { answer: string };
  /**
   * The workspace was put back as it was before the task's step whose `tool-called` event is `to_seq`
   * (`ducklm undo`), or, with `redo`, as it was before the task's latest restore (`ducklm undo --redo`,
   * `to_seq` and `step_id` null): `changes` lists the files (the first 200 of `changed`), `saved_as` keeps the state it
   * replaced, so the restore can itself be taken back.
   */
  "workspace-restored": { to_seq: number | null; step_id: string | null; redo?: boolean; changes: Array<{ path: string; change: "restored" | "removed" | "rewritten" }>; changed: number; saved_as: string; by: string };
}

export type EventPayload<T extends EventTypeName> = EventPayloads[T];
