import type { ModelRole } from "../contracts/index.js";
import { describeError, DuckError, ErrorCode } from "../errors/duck-error.js";

/** Where a decider reports model output as it is generated; the RuntimeLoop turns it into events. */
export interface ModelStreamSink {
  /** `promptTokens`: what the request sent, as counted for the task's token budget. */
  started(role: ModelRole, purpose: string, promptTokens?: number): void;
  delta(role: ModelRole, purpose: string, text: string): void;
  completed(role: ModelRole, purpose: string, text: string): void;
  failed(role: ModelRole, purpose: string, error: { code: string; message: string }): void;
}

export const silentSink: ModelStreamSink = { started() {}, delta() {}, completed() {}, failed() {} };

function isStop(error: unknown): boolean {
  if (error instanceof Error && error.name === "AbortError") return true;
  return DuckError.isInstance(error) && (error.code === ErrorCode.Cancelled || error.code === ErrorCode.Shutdown);
}

/**
 * Runs one model call with its start, every chunk, and its end or failure reported to the sink, so the
 * whole exchange is in the task's events (and a replay needs no model). A stop (cancel, shutdown) is
 * not a failure of the model and is not reported as one.
 */
export async function reportedModelCall<T>(
  sink: ModelStreamSink,
  role: ModelRole,
  purpose: string,
  call: (onDelta: (text: string) => void) => Promise<T>,
  rawOf: (result: T) => string,
  promptTokens?: number,
): Promise<T> {
  sink.started(role, purpose, promptTokens);
  try {
    const result = await call((text) => sink.delta(role, purpose, text));
    sink.completed(role, purpose, rawOf(result));
    return result;
  } catch (error) {
    if (!isStop(error)) sink.failed(role, purpose, describeError(error));
    throw error;
  }
}
