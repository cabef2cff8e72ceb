import { describe, expect, it } from "vitest";
import { RuntimeConfigSchema } from "../config/config-schemas.js";
import type { CriticScore } from "../contracts/index.js";
import { decideRecovery, isRetryable } from "./recovery-policy.js";

const config = RuntimeConfigSchema.parse({ retry: { max_step_retries: 2, backoff_ms: 100, backoff_factor: 3, max_backoff_ms: 250 } });
const score = (verdict: CriticScore["verdict"], safety = 1): CriticScore => ({ correctness: 0, usefulness: 0, safety, verdict, reason: "r" });

describe("decideRecovery", () => {
  it("continues on pass", () => {
    expect(decideRecovery(score("pass"), 1, config, { retryable: true, succeeded: true }).action).toBe("continue");
  });
  it("retries with capped exponential backoff, then gives up as configured", () => {
    expect(decideRecovery(score("retry"), 1, config, { retryable: true, succeeded: true })).toMatchObject({ action: "retry", delay_ms: 100 });
    expect(decideRecovery(score("retry"), 2, config, { retryable: true, succeeded: true })).toMatchObject({ action: "retry", delay_ms: 250 });
    expect(decideRecovery(score("retry"), 3, config, { retryable: true, succeeded: true }).action).toBe("fail");
  });
  it("never retries what cannot succeed, and stops unsafe results at once", () => {
    expect(decideRecovery(score("retry"), 1, config, { retryable: false, succeeded: false }).action).toBe("fail");
    expect(decideRecovery(score("pass", 0.1), 1, config, { retryable: true, succeeded: true }).action).toBe("fail");
  });
  it("cannot pass a step whose tool reported failure, and does not retry what another attempt cannot change", () => {
    expect(decideRecovery(score("pass"), 1, config, { retryable: true, succeeded: false }).action).toBe("retry");
    expect(decideRecovery(score("pass"), 3, config, { retryable: true, succeeded: false }).action).toBe("fail");
    expect(decideRecovery(score("pass"), 1, config, { retryable: false, succeeded: false }).action).toBe("fail");
    for (const code of ["DUCK_ERR_WEB_ADDRESS_BLOCKED", "DUCK_ERR_PERMISSION_DENIED", "DUCK_ERR_PATH_OUTSIDE_WORKSPACE", "DUCK_ERR_HARD_STOP", "DUCK_ERR_PATH_PROTECTED"]) expect(isRetryable(code)).toBe(false);
    expect(isRetryable("DUCK_ERR_TOOL_FAILED")).toBe(true);
    expect(isRetryable("DUCK_ERR_TOOL_TIMEOUT")).toBe(true);
  });

  it("responds instead of failing when runtime.json says so", () => {
    const respond = RuntimeConfigSchema.parse({ recovery: { on_exhausted: "respond" } });
    expect(decideRecovery(score("fail"), 1, respond, { retryable: true, succeeded: true }).action).toBe("respond");
  });
});
