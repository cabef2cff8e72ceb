import type { ModelCallUsage, ModelRole } from "../contracts/index.js";
import { describeError, DuckError, ErrorCode } from "../errors/duck-error.js";

/** Where a decider reports model output as it is generated; the RuntimeLoop turns it into events. */
export interface ModelStreamSink {
  /** `promptTokens`: what the request sent, as counted for the task's token budget. */
  started(role: ModelRole, purpose: string, promptTokens?: number): void;
  delta(role: ModelRole, purpose: string, text: string): void;
  completed(role: ModelRole, purpose: string, text: string, usage?: ModelCallUsage): void;
  failed(role: ModelRole, purpose: string, error: { code: string; message: string }): void;
}

export const silentSink: ModelStreamSink = { started() {}, delta() {}, completed() {}, failed() {} };

function isStop(error: unknown): boolean {
  if (error instanceof Error && error.name === "AbortError") return true;
  return DuckError.isInstance(error) && (error.code === ErrorCode.Cancelled || error.code === ErrorCode.Shutdown);
}

/**
 * Runs one model call with its start, its text, and its end or failure reported to the sink, so the
 * whole exchange is in the task's events (and a replay needs no model). A stop (cancel, shutdown) is
 * not a failure of the model and is not reported as one.
 *
 * The text is reported gathered: what arrives within `gatherMs` goes to the sink as one delta. A local
 * model sends a chunk per token, and a stored event per token would make the log grow with every
 * token generated; gathered, it grows with the time the model takes. An output that ends within the
 * first interval needs no delta at all: its completion carries the whole text. With `gatherMs` 0 every
 * chunk is reported as it comes (a replay does that, the chunks it plays being the ones recorded).
 */
export async function reportedModelCall<T>({
  sink,
  role,
  purpose,
  call,
  rawOf,
  promptTokens,
  gatherMs = 0,
}: {
  sink: ModelStreamSink;
  role: ModelRole;
  purpose: string;
  /** Makes the call, streaming its text to `onDelta` and its cost to `onUsage`. */
  call: (onDelta: (text: string) => void, onUsage: (usage: ModelCallUsage) => void) => Promise<T>;
  rawOf: (result: T) => string;
  promptTokens?: number | undefined;
  gatherMs?: number;
}): Promise<T> {
  let usage: ModelCallUsage | undefined;
  const onUsage = (reported: ModelCallUsage) => {
    usage = reported;
  };
  sink.started(role, purpose, promptTokens);
  let gathered = "";
  let timer: ReturnType<typeof setTimeout> | null = null;
  let reportedAny = false;
  // A write refused in the timer (a task another process took over and ended meanwhile) has no caller
  // to throw to there: it is kept, and thrown where the call goes on.
  let refused: unknown = null;
  const reportLater = () => {
    try {
      report();
    } catch (error) {
      refused ??= error;
    }
  };
  const report = () => {
    if (timer) clearTimeout(timer);
    timer = null;
    if (gathered === "") return;
    const text = gathered;
    gathered = "";
    reportedAny = true;
    sink.delta(role, purpose, text);
  };
  const onDelta = (text: string) => {
    if (refused !== null) throw refused;
    if (gatherMs === 0) {
      sink.delta(role, purpose, text);
      return;
    }
    gathered += text;
    timer ??= setTimeout(reportLater, gatherMs);
  };
  try {
    const result = await call(onDelta, onUsage);
    if (refused !== null) throw refused;
    // Text already streamed ends with the rest of it; text that never was is in the completion alone.
    if (reportedAny) report();
    else if (timer) clearTimeout(timer);
    sink.completed(role, purpose, rawOf(result), usage);
    return result;
  } catch (error) {
    // What the model wrote before it failed or was stopped is kept: it shows what went wrong.
    if (refused !== null) throw refused;
    report();
    if (!isStop(error)) sink.failed(role, purpose, describeError(error));
    throw error;
  }
}
