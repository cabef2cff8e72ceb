import pino from "pino";
import { describe, expect, it } from "vitest";
import { LlamaCppProvider } from "../../src/models/llama/llama-cpp-provider.js";
import { isTerminalTaskState } from "../../src/contracts/index.js";
import { fixtureModelsConfig } from "../helpers/fixture-models.js";
import { createTestRuntime } from "../helpers/test-runtime.js";

describe("a full task with every role on the fixture model", () => {
  it("completes, fails cleanly or waits for the user, over 20 seeds, within its timeout", async () => {
    const endings: Record<string, number> = {};
    for (let seed = 1; seed <= 20; seed += 1) {
      const models = new LlamaCppProvider({ config: fixtureModelsConfig(), modelsDir: "/", logger: pino({ level: "silent" }), seed });
      const runtime = createTestRuntime({ models, runtime: { timeouts: { task_ms: 60_000, step_ms: 5_000 } } });
      try {
        const started = Date.now();
        const handle = runtime.loop.submit({ text: `Please list the files and tell me what you find (run ${seed}).` });
        const outcome = await handle.done;
        expect(Date.now() - started, `seed ${seed}`).toBeLessThan(65_000);
        expect(["completed", "failed", "awaiting_permission"], `seed ${seed}: ${JSON.stringify(outcome.error)}`).toContain(outcome.state);
        if (outcome.state === "failed") expect(outcome.error?.code).toMatch(/^DUCK_ERR_/);
        if (outcome.state === "failed") expect(outcome.error?.code).not.toBe("DUCK_ERR_INTERNAL");
        const events = runtime.store.listEvents(handle.taskId);
        expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
        const types = events.map((event) => event.type);
        expect(types).toContain("model-output-delta");
        // A directive was decided, or the model's output could not become one: either way, said clearly.
        if (!types.includes("directive-decided")) expect(outcome.error?.code).toBe("DUCK_ERR_MODEL_OUTPUT_INVALID");
        if (isTerminalTaskState(outcome.state)) expect(types.at(-1)).toMatch(/^task-(completed|failed)$/);
        const ending = outcome.state === "failed" ? `failed ${outcome.error?.code}` : outcome.state;
        endings[ending] = (endings[ending] ?? 0) + 1;
      } finally {
        await runtime.dispose();
      }
    }
    console.log("endings over 20 seeds:", endings);
    expect(Object.values(endings).reduce((a, b) => a + b, 0)).toBe(20);
  }, 600_000);
});
