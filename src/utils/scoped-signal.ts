import { defaultMaxListeners, getEventListeners, getMaxListeners, setMaxListeners } from "node:events";
import { DuckError, ErrorCode, type ErrorCodeName } from "../errors/duck-error.js";

/**
 * Controllers whose scope ended with their signal untouched, kept for the next scope: an
 * AbortController and its signal cost about as much to make and collect as all the rest of a scope,
 * and a task makes several (its own, one per model call). A signal goes back only when nothing could
 * tell it from a new one: never aborted, no listener or `onabort` left on it by whoever used it, and
 * no signal made from it with `AbortSignal.any` (which would follow it into its next scope).
 */
const idleControllers: AbortController[] = [];
const IDLE_CONTROLLERS_KEPT = 32;

/**
 * Where Node keeps the signals `AbortSignal.any` made from a signal. Found once, by looking; on a
 * runtime that keeps them elsewhere it is undefined, and no signal is ever reused.
 */
const DEPENDANT_SIGNALS: symbol | undefined = (() => {
  const source = new AbortController().signal;
  AbortSignal.any([source]);
  return Object.getOwnPropertySymbols(source).find((key) => key.description === "kDependantSignals");
})();

function hasDependants(signal: AbortSignal): boolean {
  const dependants = (signal as unknown as Record<symbol, { size?: number } | undefined>)[DEPENDANT_SIGNALS!];
  return dependants !== undefined && dependants.size !== 0;
}

function takeController(): AbortController {
  return idleControllers.pop() ?? new AbortController();
}

function giveBack(controller: AbortController): void {
  const { signal } = controller;
  if (DEPENDANT_SIGNALS === undefined || idleControllers.length >= IDLE_CONTROLLERS_KEPT) return;
  if (signal.aborted || signal.onabort !== null || hasDependants(signal) || getEventListeners(signal, "abort").length > 0) return;
  // A user that raised the listener limit (fetch does, to 1500) raised it for its own scope only.
  if (getMaxListeners(signal) !== defaultMaxListeners) setMaxListeners(defaultMaxListeners, signal);
  idleControllers.push(controller);
}

export interface ScopedSignal {
  signal: AbortSignal;
  /** True when it was this scope's own time limit that fired. */
  readonly timedOut: boolean;
  /** Stops the scoped work for a reason of the caller's own (its parents are left as they are); after `dispose`, nothing. */
  abort(reason: unknown): void;
  /**
   * Clears the timer and detaches from the parents; call when the scoped work is over. The signal is
   * not to be used after this: when nothing holds on to it, a later scope may get it.
   */
  dispose(): void;
}

/**
 * An AbortSignal that follows its parents and, optionally, a time limit, and that can be released.
 * `AbortSignal.timeout` keeps its timer alive until it fires, so a long-running server creating one
 * per call would pile up timers and listeners; this one cleans up after itself.
 */
export function scopedSignal(
  parents: ReadonlyArray<AbortSignal | undefined>,
  timeoutMs?: number,
  what = "operation",
  timeoutCode: ErrorCodeName = ErrorCode.ToolTimeout,
  /** Said when the time limit fires, in place of "<what> took longer than <timeoutMs> ms". */
  timeoutMessage?: string,
): ScopedSignal {
  const controller = takeController();
  let timedOut = false;
  let disposed = false;
  const listeners: Array<[AbortSignal, () => void]> = [];
  for (const parent of parents) {
    if (!parent) continue;
    if (parent.aborted) {
      controller.abort(parent.reason);
      break;
    }
    const onAbort = () => controller.abort(parent.reason);
    parent.addEventListener("abort", onAbort, { once: true });
    listeners.push([parent, onAbort]);
  }
  const timer =
    timeoutMs !== undefined && !controller.signal.aborted
      ? setTimeout(() => {
          timedOut = true;
          controller.abort(new DuckError(timeoutCode, timeoutMessage ?? `${what} took longer than ${timeoutMs} ms`));
        }, timeoutMs)
      : null;
  timer?.unref?.();
  return {
    signal: controller.signal,
    get timedOut() {
      return timedOut;
    },
    abort(reason) {
      // Once disposed, the controller may be another scope's: late callers stop nothing.
      if (!disposed) controller.abort(reason);
    },
    dispose() {
      if (disposed) return;
      disposed = true;
      if (timer) clearTimeout(timer);
      for (const [parent, onAbort] of listeners) parent.removeEventListener("abort", onAbort);
      listeners.length = 0;
      giveBack(controller);
    },
  };
}

/** Runs `work` with a scoped signal and always releases it. */
export async function withScopedSignal<T>(
  parents: ReadonlyArray<AbortSignal | undefined>,
  timeoutMs: number | undefined,
  what: string,
  work: (signal: AbortSignal) => Promise<T>,
  timeoutCode: ErrorCodeName = ErrorCode.ToolTimeout,
): Promise<T> {
  const scope = scopedSignal(parents, timeoutMs, what, timeoutCode);
  try {
    return await work(scope.signal);
  } finally {
    scope.dispose();
  }
}
