import pino from "pino";
import { afterAll, describe, expect, it } from "vitest";
import type { ModelCallUsage } from "../../src/contracts/index.js";
import { LlamaCppProvider } from "../../src/models/llama/llama-cpp-provider.js";
import { fixtureModelsConfig } from "../helpers/fixture-models.js";

// A task's calls to one model continue one kept context sequence: each evaluates only what follows
// the prefix it shares with what the sequence holds, counted by node-llama-cpp's own token meter.
const logger = pino({ level: "silent" });
const providers: LlamaCppProvider[] = [];
afterAll(async () => {
  await Promise.all(providers.map((provider) => provider.dispose()));
});
function provider(options: Partial<ConstructorParameters<typeof LlamaCppProvider>[0]> = {}): LlamaCppProvider {
  const created = new LlamaCppProvider({ config: fixtureModelsConfig(), modelsDir: "/", logger, seed: 3, ...options });
  providers.push(created);
  return created;
}

const SYSTEM = "You are DuckLM, a local agent. ".repeat(20);
const TASK = "## Task\nWhat is the launch code in facts.txt? ".repeat(6);

async function call(models: LlamaCppProvider, prompt: string, cacheKey?: string): Promise<ModelCallUsage> {
  let usage: ModelCallUsage | undefined;
  await models.generateText({ role: "thinker", system: SYSTEM, prompt, maxTokens: 6, ...(cacheKey ? { cacheKey } : {}), onUsage: (reported) => (usage = reported) });
  expect(usage).toBeDefined();
  return usage!;
}

describe("kept context sequences on the tiny fixture model", () => {
  it("a task's second call evaluates only the tokens after the prefix it shares with the first", async () => {
    const models = provider();
    const first = await call(models, `${TASK}\n## Now\nDecide.`, "task-1/decide");
    expect(first.cached_tokens).toBe(0);
    expect(first.evaluated_tokens).toBe(first.prompt_tokens);
    expect(first.generated_tokens).toBeGreaterThan(0);
    const second = await call(models, `${TASK}\n## What the steps so far returned\nDecision 1: s1 read facts.txt.\n## Now\nDecide again.`, "task-1/decide");
    // Everything up to the end of the task section was kept; only the new part was evaluated.
    expect(second.cached_tokens).toBeGreaterThan(first.prompt_tokens! * 0.8);
    expect(second.evaluated_tokens).toBe(second.prompt_tokens! - second.cached_tokens!);
    expect(second.evaluated_tokens).toBeLessThan(second.prompt_tokens! / 4);
    // Without a key, nothing is kept: the same prompt is evaluated whole.
    const unkeyed = await call(models, `${TASK}\n## Now\nDecide.`);
    expect(unkeyed.cached_tokens).toBe(0);
    expect(models.keptSequences()).toEqual(["task-1/decide"]);
    // A finished task's sequences are given up.
    models.releaseCache("task-1/");
    expect(models.keptSequences()).toEqual([]);
  }, 120_000);

  it("a lane evicted for want of sequences is rebuilt, and its call still completes", async () => {
    const models = provider({ sequencesPerModel: 1 });
    await call(models, `${TASK} A`, "task-a/decide");
    // The only sequence goes to task b: task a's state is given up.
    await call(models, `${TASK} B`, "task-b/decide");
    expect(models.keptSequences()).toEqual(["task-b/decide"]);
    const again = await call(models, `${TASK} A, go on`, "task-a/decide");
    expect(again.cached_tokens).toBe(0);
    expect(again.evaluated_tokens).toBe(again.prompt_tokens);
    expect(models.keptSequences()).toEqual(["task-a/decide"]);
    // Two calls of different lanes at once on one sequence: the second waits for the first, then takes it.
    const both = await Promise.all([call(models, `${TASK} C`, "task-c/decide"), call(models, `${TASK} D`, "task-d/decide")]);
    expect(both.map((usage) => usage.generated_tokens)).toEqual([6, 6]);
  }, 120_000);

  it("loads one file once for every role, with the largest context any of them asks for", async () => {
    const config = fixtureModelsConfig();
    config.roles.sys_util = { ...config.roles.sys_util!, context_size: 1024 };
    const models = provider({ config });
    await models.generateText({ role: "sys_util", system: "s", prompt: "p", maxTokens: 2 });
    await models.generateText({ role: "thinker", system: "s", prompt: "p", maxTokens: 2 });
    expect(models.residency.loadedKeys()).toHaveLength(1);
    expect([...models.residency.loadCounts.values()]).toEqual([1]);
    expect(models.sharesModel("thinker", "json_compiler")).toBe(true);
    expect(models.sharesModel("thinker", "embeddings")).toBe(false);
  }, 120_000);
});
