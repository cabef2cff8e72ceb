import { DuckError, ErrorCode, type ErrorCodeName } from "../errors/duck-error.js";

export interface ScopedSignal {
  signal: AbortSignal;
  /** True when it was this scope's own time limit that fired. */
  readonly timedOut: boolean;
  /** Stops the scoped work for a reason of the caller's own (its parents are left as they are). */
  abort(reason: unknown): void;
  /** Clears the timer and detaches from the parents; call when the scoped work is over. */
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
  const controller = new AbortController();
  let timedOut = false;
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
      controller.abort(reason);
    },
    dispose() {
      if (timer) clearTimeout(timer);
      for (const [parent, onAbort] of listeners) parent.removeEventListener("abort", onAbort);
      listeners.length = 0;
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
