import type { CoderPlanStep, ToolResult } from "../contracts/index.js";

/**
 * What the coder model is asked for one step: the task, the specification, the files as they are,
 * the test that must pass, and — on a retry — what went wrong with the previous attempt.
 */
export function coderPrompt(taskText: string, plan: CoderPlanStep, files: ReadonlyArray<{ path: string; content: string }>, previous: ToolResult | null): string {
  return [
    `Task: ${taskText}`,
    `## Specification\n${plan.coder.specification}`,
    files.length > 0 ? `## Files now\n${files.map((file) => `### ${file.path}\n${file.content}`).join("\n\n")}` : "",
    plan.coder.test_command ? `## Test\nAfter your files are written, this command must succeed: ${plan.coder.test_command}` : "",
    previous ? `## Your previous attempt failed\n${previous.error ? `${previous.error.code}: ${previous.error.message}\n` : ""}${previous.output.slice(-4000)}` : "",
    "Reply with JSON: files (each with its path relative to the workspace and its whole new content) and notes.",
  ].filter(Boolean).join("\n\n");
}
