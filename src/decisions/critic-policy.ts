import type { CriticScore, PlanStep, ToolResult } from "../contracts/index.js";
import { ErrorCode } from "../errors/duck-error.js";
import { isRetryable } from "./recovery-policy.js";

/** The critic without a model: a result that succeeded passes; a failure is retried unless hopeless. */
export function heuristicScore(result: ToolResult): CriticScore {
  if (result.ok) return { correctness: 1, usefulness: 1, safety: 1, verdict: "pass", reason: "the tool reported success" };
  const code = result.error?.code ?? ErrorCode.ToolFailed;
  const verdict = isRetryable(code) ? "retry" : "fail";
  return { correctness: 0, usefulness: 0, safety: 1, verdict, reason: `${code}: ${result.error?.message ?? "failed"}` };
}

/** What the critic model is asked about one step. */
export function criticPrompt(taskText: string, step: PlanStep, result: ToolResult): string {
  const output = result.output.length > 4000 ? `${result.output.slice(0, 4000)}\n[…cut]` : result.output;
  return [
    `Task: ${taskText}`,
    `Step ${step.id} (${step.kind}): ${step.description || (step.kind === "tool" ? step.tool : "coder")}`,
    `Succeeded: ${result.ok}${result.exit_code !== undefined && result.exit_code !== null ? `, exit code ${result.exit_code}` : ""}`,
    result.error ? `Error: ${result.error.code}: ${result.error.message}` : "",
    "Output:",
    output,
  ].filter(Boolean).join("\n");
}
