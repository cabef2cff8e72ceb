import type { WorkspaceCheckpoints } from "../undo/workspace-checkpoints.js";
import type { Logger } from "pino";
import type { z } from "zod";
import type { EventTypeName, ExecutionDirective, MemoryHit } from "../contracts/index.js";
import type { DuckConfig } from "../config/config-schemas.js";
import type { HistoryTurn } from "../context/context-builder.js";
import type { ModelStreamSink } from "./model-stream-sink.js";
import type { MemoryService } from "../memory/memory-service.js";
import type { ModelProvider } from "../models/model-provider.js";
import type { ApprovalStore } from "../permissions/approval-store.js";
import type { CommandClassifier } from "../permissions/command-classifier.js";
import type { SecretVault } from "../permissions/secret-vault.js";
import type { TaskStore } from "../state/task-store.js";
import type { ShellSandbox } from "../tools/shell-sandbox.js";
import type { ToolRegistry } from "../tools/tool-registry.js";

export type MemorySearch = (query: string, limit: number, taskId: string) => Promise<MemoryHit[]> | MemoryHit[];

/** The earlier turns of a task's conversation, oldest first. */
export type SessionHistory = (sessionId: string, beforeTaskId: string, limit: number) => HistoryTurn[];

/**
 * What every executor works with: the stores it writes through, the adapters it calls, and the
 * settings it follows. The composition root builds one; executors never reach for anything else.
 */
export interface ExecutorContext {
  store: TaskStore;
  tools: ToolRegistry;
  memory: MemoryService;
  models: ModelProvider | null;
  classifier: CommandClassifier;
  approvals: ApprovalStore;
  /** Passwords handed over for one step; memory only. */
  secrets: SecretVault;
  sandbox: ShellSandbox;
  /** Snapshots of workspaces before each step that can change them (null: undo is off, as in a replay). */
  checkpoints: WorkspaceCheckpoints | null;
  /** DuckLM's own state: refused to file tools, hidden from commands. */
  protectedPaths: readonly string[];
  /** DuckLM's own program: readable, never written by file tools, read-only to commands. */
  readOnlyPaths: readonly string[];
  config: DuckConfig;
  logger: Logger;
  /** How memory is searched for a task (replay serves recorded hits). */
  memorySearch: MemorySearch;
  /**
   * Whether memory holds anything the task might use, looked up before a model is asked whether to
   * recall: with nothing to decide about, no model call is made.
   */
  recallCandidates: (query: string, taskId: string) => Promise<boolean> | boolean;
  /** How a conversation's earlier turns are read (replay stands in what the recording summarised). */
  sessionHistory: SessionHistory;
  /**
   * Tasks taken over from a holder that may only be paused (alive on this machine, or on another):
   * a side-effecting call it started may still be running there, so it is in doubt until the call's
   * own time limit has passed, and only then asked about.
   */
  strandedTools: Map<string, { pid: number; host: string }>;
  /** Whether `task-started` records the settings its decisions follow (a replay of a log without them does not). */
  recordSettings: boolean;
  /** Settings recorded as they are instead of read from the config (a replay's, as its recording had them). */
  settingsAsRecorded?: Record<string, unknown>;
  /** The wait before a retry (replay passes none). */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
  /** The directive schema with the registered tool names, built once so a provider can cache its grammar. */
  directiveSchema: z.ZodType<ExecutionDirective>;
  /** A folded decision's output: the thought, then a directive of `directiveSchema`. */
  decisionSchema: z.ZodType<{ thought: string; directive: ExecutionDirective }>;
  /**
   * Waits until the recording's next event of this kind is due (replay only). Steps run side by
   * side, and what one of them writes without a model or a tool in between (a refusal, a score, the
   * start of a call) would otherwise land wherever the event loop puts it.
   */
  recordedTurn?: RecordedTurn;
}

/** Which of the task's next recorded events a write is waiting for. */
export interface TurnOf {
  type: EventTypeName;
  step_id?: string;
  purpose?: string;
  /**
   * The write may be missing from a recording whose task went on (a model call refused before it
   * started): then it goes at once. Otherwise a write the recording lacks was never made — the task
   * was stopped first — and the replay waits for that stop.
   */
  mayBeAbsent?: boolean;
  /**
   * A step's retry after its back-off: it is due where the recording has the step's next event, or,
   * when it has none (the plan ended meanwhile), where the plan's end is.
   */
  retryOf?: string;
}

export type RecordedTurn = (taskId: string, next: TurnOf, signal: AbortSignal) => Promise<void>;

/** Live work writes at once; a replay waits for the write's recorded position. */
export async function inTurn(context: ExecutorContext, taskId: string, next: TurnOf, signal: AbortSignal): Promise<void> {
  if (context.recordedTurn) await context.recordedTurn(taskId, next, signal);
}

/** Where a model call's output goes: events of the task it serves. */
export function sinkFor(store: TaskStore, taskId: string): ModelStreamSink {
  return {
    started: (role, purpose, promptTokens) => store.append(taskId, "model-output-started", { role, purpose, ...(promptTokens !== undefined ? { prompt_tokens: promptTokens } : {}) }),
    delta: (role, purpose, text) => store.append(taskId, "model-output-delta", { role, purpose, text }),
    completed: (role, purpose, text, usage) => store.append(taskId, "model-output-completed", { role, purpose, text, ...(usage ? { usage } : {}) }),
    failed: (role, purpose, error) => store.append(taskId, "model-output-failed", { role, purpose, code: error.code, message: error.message }),
  };
}
