import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { LlamaCppProvider } from "../../src/models/llama/llama-cpp-provider.js";
import { CoderProposalSchema, isTerminalTaskState, type ExecutionDirective } from "../../src/contracts/index.js";
import type { ModelProvider } from "../../src/models/model-provider.js";
import { fixtureModelsConfig } from "../helpers/fixture-models.js";
import { createTestRuntime } from "../helpers/test-runtime.js";
import { scriptedAgent } from "../helpers/scripted-agent.js";

describe("a full task with every role on the fixture model", () => {
  it("completes, fails cleanly or waits for the user, over 20 seeds, deciding again after its steps, within its budgets", async () => {
    const endings: Record<string, number> = {};
    let iterated = 0;
    for (let seed = 1; seed <= 20; seed += 1) {
      const models = new LlamaCppProvider({ config: fixtureModelsConfig(), modelsDir: "/", logger: pino({ level: "silent" }), seed });
      const runtime = createTestRuntime({ models, runtime: { timeouts: { task_ms: 60_000, step_ms: 5_000 }, agent: { max_iterations: 3, token_budget: 40_000 } } });
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
        // (its JSON, its tool's arguments or the steps it refers to, still refused after the retries the loop allows).
        if (!types.includes("directive-decided")) expect(outcome.error?.code).toMatch(/^DUCK_ERR_(MODEL_OUTPUT_INVALID|TOOL_INPUT_INVALID|PLAN_MISSING_DEPENDENCY)$/);
        if (isTerminalTaskState(outcome.state)) expect(types.at(-1)).toMatch(/^task-(completed|failed)$/);
        // Within its budgets: at most three decisions; a budget that ends it is named.
        const decisions = types.filter((type) => type === "iteration-started").length + 1;
        expect(decisions, `seed ${seed}`).toBeLessThanOrEqual(3);
        if (decisions > 1) iterated += 1;
        if (outcome.error?.code === "DUCK_ERR_ITERATION_LIMIT") expect(outcome.error.message).toMatch(/agent\.max_iterations 3/);
        if (outcome.error?.code === "DUCK_ERR_TOKEN_BUDGET") expect(outcome.error.message).toMatch(/agent\.token_budget/);
        const ending = outcome.state === "failed" ? `failed ${outcome.error?.code}` : outcome.state;
        endings[ending] = (endings[ending] ?? 0) + 1;
      } finally {
        await runtime.dispose();
      }
    }
    console.log("endings over 20 seeds:", endings, `; ${iterated} decided more than once`);
    expect(Object.values(endings).reduce((a, b) => a + b, 0)).toBe(20);
  }, 600_000);
});

describe("a coder step with the coder on the fixture model", () => {
  it("proposes files under the grammar and applies them, or fails the step cleanly, over 4 seeds", async () => {
    const plan: ExecutionDirective = {
      kind: "plan",
      goal: "code",
      steps: [{ id: "code", kind: "coder", description: "", depends_on: [], coder: { specification: "Write hello.txt saying hi.", files: ["hello.txt"] } }],
    };
    let proposed = 0;
    for (let seed = 1; seed <= 4; seed += 1) {
      const config = fixtureModelsConfig();
      // Room for a whole proposal: the grammar bounds its strings, not the number of tokens they take.
      config.roles.coder = { ...config.roles.coder!, max_tokens: 4096 };
      const llama = new LlamaCppProvider({ config, modelsDir: "/", logger: pino({ level: "silent" }), seed });
      const scripted = scriptedAgent({ directive: plan, draft: "a coder step", verdict: () => "pass" });
      // The coder runs on llama.cpp; the deciders are scripted so that every seed reaches the coder step.
      const pick = (role: string) => (role === "coder" ? llama : scripted);
      const models: ModelProvider = {
        hasRole: (role) => role === "coder" || scripted.hasRole(role),
        generateText: (request) => pick(request.role).generateText(request),
        generateJson: (request) => pick(request.role).generateJson(request),
        countTokens: (role, text) => pick(role).countTokens(role, text),
        dispose: () => llama.dispose(),
      };
      const runtime = createTestRuntime({ models, runtime: { retry: { max_step_retries: 0 }, timeouts: { task_ms: 60_000 } } });
      try {
        const outcome = await runtime.loop.submit({ text: "write hello.txt" }).done;
        expect(["completed", "failed"], `seed ${seed}`).toContain(outcome.state);
        const events = runtime.store.listEvents(outcome.task_id);
        const proposals = events.filter((event) => event.type === "coder-proposed");
        const result = events.find((event) => event.type === "tool-result")!.payload as { result: { ok: boolean; error?: { code: string } } };
        proposed += proposals.length;
        if (proposals.length === 1) {
          const proposal = CoderProposalSchema.parse((proposals[0]!.payload as { proposal: unknown }).proposal);
          // Applied: every file is in the workspace with exactly the proposed content.
          if (result.result.ok) for (const file of proposal.files) expect(readFileSync(resolve(runtime.workspace, file.path), "utf8")).toBe(file.content);
        } else {
          // The proposal did not become valid JSON (cut at max_tokens): a clear model error, nothing written.
          expect(result.result.error?.code).toBe("DUCK_ERR_MODEL_OUTPUT_INVALID");
        }
        if (!result.result.ok) expect(result.result.error?.code).toMatch(/^DUCK_ERR_(?!INTERNAL)/);
      } finally {
        await runtime.dispose();
      }
    }
    expect(proposed).toBeGreaterThan(0);
  }, 300_000);
});
