import type { CriticScore, RecoveryAction } from "../contracts/index.js";
import type { RuntimeConfig } from "../config/config-schemas.js";
import { ErrorCode } from "../errors/duck-error.js";

export interface RecoveryDecision {
  action: RecoveryAction;
  /** For retry: how long to wait first. */
  delay_ms: number;
  reason: string;
}

/**
 * After the critic scored an attempt: continue on pass; retry within the limit with exponential
 * backoff; once retries are spent (or the step is unsafe), what runtime.json's `on_exhausted` says.
 */
export function decideRecovery(
  judged: CriticScore,
  attempt: number,
  config: Pick<RuntimeConfig, "retry" | "recovery">,
  options: { retryable: boolean; succeeded: boolean; notRetriedBecause?: string },
): RecoveryDecision {
  // The critic cannot pass what the tool itself reported as failed (`ok: false`, a non-zero exit).
  const score: CriticScore =
    !options.succeeded && judged.verdict === "pass"
      ? { ...judged, verdict: options.retryable ? "retry" : "fail", reason: `the tool reported a failure, whatever the critic said${judged.reason ? ` (${judged.reason})` : ""}` }
      : judged;
  if (score.safety < config.recovery.min_safety) {
    return { action: config.recovery.on_exhausted === "continue" ? "fail" : config.recovery.on_exhausted, delay_ms: 0, reason: `unsafe result (safety ${score.safety}): ${score.reason}` };
  }
  if (score.verdict === "pass") return { action: "continue", delay_ms: 0, reason: score.reason || "step passed" };
  const retriesUsed = attempt - 1;
  if (score.verdict === "retry" && options.retryable && retriesUsed < config.retry.max_step_retries) {
    const delay = Math.min(config.retry.backoff_ms * config.retry.backoff_factor ** retriesUsed, config.retry.max_backoff_ms);
    return { action: "retry", delay_ms: Math.round(delay), reason: score.reason || "step failed; retrying" };
  }
  const why =
    !options.succeeded && !options.retryable && options.notRetriedBecause
      ? `not run again: ${options.notRetriedBecause}`
      : score.verdict !== "retry"
        ? "critic judged it failed"
        : `retries spent (${retriesUsed} of ${config.retry.max_step_retries})`;
  return { action: config.recovery.on_exhausted, delay_ms: 0, reason: `${why}: ${score.reason}` };
}

// Errors that another attempt cannot change: the call is wrong, refused, or aimed where it may not go.
const NOT_RETRYABLE = new Set<string>([
  ErrorCode.ToolNotFound,
  ErrorCode.ToolInputInvalid,
  ErrorCode.PathOutsideWorkspace,
  ErrorCode.PathProtected,
  ErrorCode.FileNotFound,
  ErrorCode.PermissionDenied,
  ErrorCode.HardStop,
  ErrorCode.WebAddressBlocked,
  ErrorCode.WebContentType,
  ErrorCode.ModelUnavailable,
]);

/** Whether a step that failed with this error code may succeed if run again. */
export function isRetryable(code: string | undefined): boolean {
  return code === undefined || !NOT_RETRYABLE.has(code);
}
