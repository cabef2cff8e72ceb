import { setTimeout as delay } from "node:timers/promises";
import { z } from "zod";
import { shellExecTool } from "../../src/tools/builtin/shell-exec.js";
import type { ShellSandbox } from "../../src/tools/shell-sandbox.js";
import { defineTool, type AnyToolDefinition } from "../../src/tools/tool-definition.js";

/** Echoes its input after an optional wait, recording when each call started and ended. */
export function createEchoTool(log: Array<{ text: string; start: number; end: number }> = []): AnyToolDefinition {
  return defineTool({
    name: "echo",
    description: "Echo text back, optionally after a wait.",
    inputSchema: z.object({ text: z.string(), wait_ms: z.number().int().nonnegative().default(0) }),
    effect: "read-only",
    async execute(input, context) {
      const start = performance.now();
      if (input.wait_ms > 0) await delay(input.wait_ms, undefined, { signal: context.signal });
      log.push({ text: input.text, start, end: performance.now() });
      return { ok: true, output: input.text };
    },
  });
}

/** Fails its first `failures` calls per key, then succeeds: for retry tests. */
export function createFlakyTool(failures: number): AnyToolDefinition & { calls: Map<string, number> } {
  const calls = new Map<string, number>();
  const tool = defineTool({
    name: "flaky",
    description: "Fails a set number of times, then succeeds.",
    inputSchema: z.object({ key: z.string() }),
    effect: "read-only",
    async execute(input) {
      const count = (calls.get(input.key) ?? 0) + 1;
      calls.set(input.key, count);
      if (count <= failures) return { ok: false, output: "", error: { code: "DUCK_ERR_TOOL_FAILED", message: `failure ${count}` } };
      return { ok: true, output: `succeeded on call ${count}` };
    },
  });
  return Object.assign(tool, { calls });
}

/** True for the Router's request for a directive (its schema is built per tool list, so match the prompt). */
export function isDirectiveRequest(request: { prompt: string }): boolean {
  return request.prompt.includes("Write the ExecutionDirective as JSON");
}

/** Runs a command through shell_exec in `sandbox` (as a task's step would) and returns what it printed. */
export async function runConfined(sandbox: ShellSandbox, command: string, workspace: string, network = false): Promise<string> {
  const result = await shellExecTool.execute({ command }, { signal: new AbortController().signal, workspace, timeoutMs: 30_000, outputCapBytes: 1_000_000, fileReadMaxBytes: 1_000_000, taskId: "confinement-test", sandbox, network });
  return result.output;
}
