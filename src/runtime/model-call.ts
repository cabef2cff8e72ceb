import type { z } from "zod";
import type { ModelRole } from "../contracts/index.js";
import { reportedModelCall } from "./model-stream-sink.js";
import type { CallableTool, JsonResult } from "../models/model-provider.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { ROLE_FALLBACKS } from "../models/model-roles.js";
import { scopedSignal } from "../utils/scoped-signal.js";
import { inTurn, sinkFor, type ExecutorContext } from "./executor-context.js";

/** One model call an executor wants made. */
export interface ModelCallSpec {
  role: ModelRole;
  /** What it is for, as its events record it ("draft", "directive", "recall", "critic:step-1"…). */
  purpose: string;
  system: string;
  prompt: string;
  /** Most tokens to generate, when less than the role's `max_tokens`. */
  maxTokens?: number;
  /**
   * The task's lane whose kept model state the call continues: calls of one lane lay their prompts
   * out to extend each other. Defaults to the role.
   */
  lane?: string;
}

/** The key of a task's lane in the providers' caches; a task's keys share the prefix `${taskId}/`. */
export function cacheKeyOf(taskId: string, lane: string): string {
  return `${taskId}/${lane}`;
}

/**
 * Whether any model serves a role. Providers follow the one fallback table (`ROLE_FALLBACKS`): a
 * missing critic is served by the JSON compiler's model, a missing JSON compiler by the Thinker's.
 */
export function servesRole(context: ExecutorContext, role: ModelRole): boolean {
  return context.models?.hasRole(role) ?? false;
}

/**
 * Whether one call decides and writes the directive: the role deciding and the JSON compiler run on
 * one model, and runtime.json does not ask for two calls.
 */
export function foldsDecision(context: ExecutorContext, role: "thinker" | "orchestrator"): boolean {
  if (context.config.runtime.agent.fold_decision === "never" || !servesRole(context, "json_compiler")) return false;
  return context.models?.sharesModel?.(role, "json_compiler") ?? false;
}

/**
 * Whether the next decision gives the critic's verdict on the steps that ran before it, in the same
 * call: the critic runs on the model that decides, decisions are folded, and the loop decides again.
 */
export function foldsCritic(context: ExecutorContext, iteration: number, maxIterations: number): boolean {
  if (context.config.runtime.agent.fold_critic === "never" || iteration >= maxIterations || !servesRole(context, "critic")) return false;
  return foldsDecision(context, "orchestrator") && (context.models?.sharesModel?.("critic", "json_compiler") ?? false);
}

/**
 * Whether the next decision is made by native tool calls: it has no place for verdicts, so a step
 * deferred to it passes on its tool's word, as in a ReAct loop (the model sees the result and acts on it).
 */
export function decidesByToolCalls(context: ExecutorContext): boolean {
  return context.models?.callsTools?.("json_compiler") ?? false;
}

/** The most tokens a role's calls generate (its own `max_tokens`, or that of the role serving it). */
function maxTokensOf(context: ExecutorContext, role: ModelRole): number {
  for (let candidate: ModelRole | undefined = role; candidate; candidate = ROLE_FALLBACKS[candidate]) {
    const configured = context.config.models.roles[candidate]?.max_tokens;
    if (configured) return configured;
  }
  return 1024;
}

/**
 * A model call within the task's token budget and the call's time limit, and cut off when the model
 * writes far past what was asked (a server that ignores `max_tokens`): what it sent is counted
 * first, and a task that has used its budget makes no more calls.
 */
async function limited<T>(
  context: ExecutorContext,
  taskId: string,
  spec: ModelCallSpec,
  signal: AbortSignal,
  work: (signal: AbortSignal, onText: (text: string) => void, promptTokens: number | undefined, stopped: (error: unknown) => never) => Promise<T>,
): Promise<T> {
  // Judged where the recording made the call, so that the tokens used so far are the same.
  await inTurn(context, taskId, { type: "model-output-started", purpose: spec.purpose, mayBeAbsent: true }, signal);
  const projection = context.store.projection(taskId);
  const budget = projection.loop.token_budget;
  if (projection.tokens_used >= budget) {
    throw new DuckError(ErrorCode.TokenBudget, `the task's model calls used ${projection.tokens_used} tokens, over runtime.json's agent.token_budget of ${budget}`);
  }
  const models = context.models!;
  const request = { role: spec.role, purpose: spec.purpose, system: spec.system, prompt: spec.prompt };
  const promptTokens = models.promptTokens ? models.promptTokens(request) : models.countTokens(spec.role, spec.system) + models.countTokens(spec.role, spec.prompt);
  const limitChars = (spec.maxTokens ?? maxTokensOf(context, spec.role)) * RUNAWAY_CHARS_PER_TOKEN;
  // One signal per call: the caller's, the call's time limit, and the stop for runaway output.
  const scope = scopedSignal([signal], context.config.runtime.timeouts.model_call_ms, `${spec.role} model call (${spec.purpose})`, ErrorCode.ModelTimeout);
  let runaway: DuckError | null = null;
  let written = 0;
  const onText = (text: string) => {
    written += text.length;
    if (written > limitChars && !runaway && !scope.signal.aborted) {
      runaway = new DuckError(ErrorCode.ModelOutputInvalid, `the ${spec.role} model wrote more than ${limitChars} characters for ${spec.purpose}, far past its max_tokens; it was stopped`);
      scope.abort(runaway);
    }
  };
  // The provider answers the stop as an abort; it is recorded as what it was: output gone wrong.
  const stopped = (error: unknown): never => {
    throw runaway && !signal.aborted ? runaway : error;
  };
  try {
    return await work(scope.signal, onText, promptTokens, stopped);
  } finally {
    scope.dispose();
  }
}

/**
 * Output counted and recorded until the call is stopped: what a model (or a server mid-burst) still
 * sends after that is not the task's, and a replay, which stops at once, would not have it.
 */
function untilStopped(signal: AbortSignal, count: (text: string) => void, record: (text: string) => void): (text: string) => void {
  return (text) => {
    if (signal.aborted) return;
    count(text);
    record(text);
  };
}

/** A replay plays the chunks recorded, each at its recorded place, so it reports them as they come. */
function gatherMsOf(context: ExecutorContext): number {
  return context.recordedTurn ? 0 : context.config.runtime.storage.stream_gather_ms;
}

/** Characters per token past which output counts as running away (tokens are 3–4 characters of text). */
const RUNAWAY_CHARS_PER_TOKEN = 8;

/**
 * A text call: within `timeouts.model_call_ms`, its start, every chunk and its end (or failure)
 * recorded as events of the task, so the exchange can be followed live and replayed without a model.
 */
export function callModelText(context: ExecutorContext, taskId: string, spec: ModelCallSpec, signal: AbortSignal): Promise<string> {
  const models = context.models!;
  return limited(context, taskId, spec, signal, (callSignal, onText, promptTokens, stopped) =>
    reportedModelCall({
      sink: sinkFor(context.store, taskId),
      role: spec.role,
      purpose: spec.purpose,
      call: (onDelta, onUsage) => models.generateText({ ...requestOf(taskId, spec), onDelta: untilStopped(callSignal, onText, onDelta), onUsage, signal: callSignal }).catch(stopped),
      rawOf: (text) => text,
      promptTokens,
      gatherMs: gatherMsOf(context),
    }),
  );
}

/** A JSON call under `schema` (a grammar for local models), recorded like a text call. */
export function callModelJson<T>(context: ExecutorContext, taskId: string, spec: ModelCallSpec & { schema: z.ZodType<T>; tools?: readonly CallableTool[] }, signal: AbortSignal): Promise<JsonResult<T>> {
  const models = context.models!;
  return limited(context, taskId, spec, signal, (callSignal, onText, promptTokens, stopped) =>
    reportedModelCall({
      sink: sinkFor(context.store, taskId),
      role: spec.role,
      purpose: spec.purpose,
      call: (onDelta, onUsage) => models.generateJson({ ...requestOf(taskId, spec), schema: spec.schema, ...(spec.tools ? { tools: spec.tools } : {}), onDelta: untilStopped(callSignal, onText, onDelta), onUsage, signal: callSignal }).catch(stopped),
      rawOf: (result) => result.raw,
      promptTokens,
      gatherMs: gatherMsOf(context),
    }),
  );
}

/** What the provider is asked: the spec, with the lane turned into the task's cache key. */
function requestOf(taskId: string, spec: ModelCallSpec): { role: ModelRole; purpose: string; system: string; prompt: string; maxTokens?: number; cacheKey: string } {
  return {
    role: spec.role,
    purpose: spec.purpose,
    system: spec.system,
    prompt: spec.prompt,
    ...(spec.maxTokens !== undefined ? { maxTokens: spec.maxTokens } : {}),
    cacheKey: cacheKeyOf(taskId, spec.lane ?? spec.role),
  };
}

/**
 * A decision a model makes when one serves the role, and a heuristic makes otherwise — or when the
 * model fails (logged; a cancel or shutdown still stops the task).
 */
export async function modelOrHeuristic<T>(
  context: ExecutorContext,
  taskId: string,
  spec: ModelCallSpec & { schema: z.ZodType<T> },
  signal: AbortSignal,
  heuristic: () => T,
): Promise<{ value: T; source: "model" | "heuristic" }> {
  if (!servesRole(context, spec.role)) return { value: heuristic(), source: "heuristic" };
  try {
    return { value: (await callModelJson(context, taskId, spec, signal)).value, source: "model" };
  } catch (error) {
    signal.throwIfAborted();
    // A spent budget ends the task; no heuristic stands in for that.
    if (DuckError.isInstance(error) && error.code === ErrorCode.TokenBudget) throw error;
    context.logger.warn({ err: error, task_id: taskId, role: spec.role, purpose: spec.purpose }, "model call failed; using the heuristic");
    return { value: heuristic(), source: "heuristic" };
  }
}
