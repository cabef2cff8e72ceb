import type { z } from "zod";
import type { ModelRole } from "../contracts/index.js";
import { reportedModelCall } from "./model-stream-sink.js";
import type { JsonResult } from "../models/model-provider.js";
import { ErrorCode } from "../errors/duck-error.js";
import { withScopedSignal } from "../utils/scoped-signal.js";
import { sinkFor, type ExecutorContext } from "./executor-context.js";

/** One model call an executor wants made. */
export interface ModelCallSpec {
  role: ModelRole;
  /** What it is for, as its events record it ("draft", "directive", "recall", "critic:step-1"…). */
  purpose: string;
  system: string;
  prompt: string;
  /** Most tokens to generate, when less than the role's `max_tokens`. */
  maxTokens?: number;
}

/**
 * Whether any model serves a role. Providers follow the one fallback table (`ROLE_FALLBACKS`): a
 * missing critic is served by the JSON compiler's model, a missing JSON compiler by the Thinker's.
 */
export function servesRole(context: ExecutorContext, role: ModelRole): boolean {
  return context.models?.hasRole(role) ?? false;
}

function limited<T>(context: ExecutorContext, spec: ModelCallSpec, signal: AbortSignal, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  return withScopedSignal([signal], context.config.runtime.timeouts.model_call_ms, `${spec.role} model call (${spec.purpose})`, work, ErrorCode.ModelTimeout);
}

/**
 * A text call: within `timeouts.model_call_ms`, its start, every chunk and its end (or failure)
 * recorded as events of the task, so the exchange can be followed live and replayed without a model.
 */
export function callModelText(context: ExecutorContext, taskId: string, spec: ModelCallSpec, signal: AbortSignal): Promise<string> {
  const models = context.models!;
  return limited(context, spec, signal, (callSignal) =>
    reportedModelCall(
      sinkFor(context.store, taskId),
      spec.role,
      spec.purpose,
      (onDelta) => models.generateText({ ...spec, onDelta, signal: callSignal }),
      (text) => text,
    ),
  );
}

/** A JSON call under `schema` (a grammar for local models), recorded like a text call. */
export function callModelJson<T>(context: ExecutorContext, taskId: string, spec: ModelCallSpec & { schema: z.ZodType<T> }, signal: AbortSignal): Promise<JsonResult<T>> {
  const models = context.models!;
  return limited(context, spec, signal, (callSignal) =>
    reportedModelCall(
      sinkFor(context.store, taskId),
      spec.role,
      spec.purpose,
      (onDelta) => models.generateJson({ ...spec, onDelta, signal: callSignal }),
      (result) => result.raw,
    ),
  );
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
    context.logger.warn({ err: error, task_id: taskId, role: spec.role, purpose: spec.purpose }, "model call failed; using the heuristic");
    return { value: heuristic(), source: "heuristic" };
  }
}
