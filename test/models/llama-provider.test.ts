import { setTimeout as delay } from "node:timers/promises";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pino from "pino";
import { DuckError } from "../../src/errors/duck-error.js";
import { makeTempDir } from "../helpers/test-runtime.js";
import { afterAll, describe, expect, it } from "vitest";
import { CoderProposalSchema, CoderSpecSchema, CriticScoreSchema, ExecutionDirectiveSchema, RecallDecisionSchema, createExecutionDirectiveSchema } from "../../src/contracts/index.js";
import { LlamaCppProvider } from "../../src/models/llama/llama-cpp-provider.js";
import { fixtureModel, fixtureModels, fixtureModelsConfig } from "../helpers/fixture-models.js";
import { z } from "zod";

const logger = pino({ level: "silent" });
const providers: LlamaCppProvider[] = [];
afterAll(async () => {
  await Promise.all(providers.map((provider) => provider.dispose()));
});
function provider(options: Partial<ConstructorParameters<typeof LlamaCppProvider>[0]> = {}): LlamaCppProvider {
  const created = new LlamaCppProvider({ config: fixtureModelsConfig(), modelsDir: "/", logger, ...options });
  providers.push(created);
  return created;
}

const TOOLS = ["shell_exec", "file_read", "file_write", "memory_insert", "memory_search"];

describe("LlamaCppProvider on the tiny fixture model", () => {
  it("streams text: the chunks add up to the answer", async () => {
    const models = provider({ seed: 7 });
    const chunks: string[] = [];
    const text = await models.generateText({ role: "thinker", system: "You are terse.", prompt: "Say hello.", onDelta: (chunk) => chunks.push(chunk) });
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.join("")).toBe(text);
    expect(models.countTokens("thinker", "hello world")).toBe(11);
  });

  it("writes a scripted output exactly, token by token on the engine, for benchmarks on random weights", async () => {
    const scripted = '{"thought":"a \\"quoted\\" word\\nand a line","directive":{"kind":"respond","answer":"Done: 3 ducks"}}';
    const models = provider({ seed: 3, scriptedOutput: async (request, schema) => (schema ? scripted : "just this text") });
    let usage: { generated_tokens?: number } = {};
    const result = await models.generateJson({ role: "json_compiler", system: "s", prompt: "p", schema: z.object({ thought: z.string(), directive: ExecutionDirectiveSchema }), onUsage: (measured) => (usage = measured) });
    expect(result.raw).toBe(scripted);
    expect(result.value.directive).toEqual({ kind: "respond", answer: "Done: 3 ducks" });
    // One byte a token on this vocabulary: every character was generated, none skipped.
    expect(usage.generated_tokens).toBeGreaterThanOrEqual(Buffer.byteLength(scripted));
    expect(await models.generateText({ role: "thinker", system: "s", prompt: "p" })).toBe("just this text");
  });

  it("decodes every directive kind under its grammar into output that parses and validates", async () => {
    const full = createExecutionDirectiveSchema(TOOLS) as unknown as z.ZodDiscriminatedUnion;
    const kinds = ["respond", "tool", "plan", "coder", "fail"];
    for (const seed of [1, 2, 3]) {
      const models = provider({ seed });
      for (const kind of kinds) {
        const option = full.options.find((candidate) => (candidate as z.ZodObject).shape.kind.value === kind) as z.ZodType;
        const result = await models.generateJson({ role: "json_compiler", system: "JSON only.", prompt: `A ${kind} directive.`, schema: option, maxTokens: 8192 });
        expect(ExecutionDirectiveSchema.parse(result.value).kind).toBe(kind);
        expect(JSON.parse(result.raw)).toBeTruthy();
        if (kind === "tool") expect(TOOLS).toContain((result.value as { tool: string }).tool);
      }
    }
  }, 240_000);

  it("decodes critic scores, recall decisions, coder specs and coder proposals that validate, across seeds", async () => {
    for (let seed = 10; seed < 16; seed += 1) {
      const models = provider({ seed });
      for (const schema of [CriticScoreSchema, RecallDecisionSchema, CoderSpecSchema, CoderProposalSchema]) {
        const result = await models.generateJson({ role: "critic", system: "JSON only.", prompt: "Judge.", schema: schema as z.ZodType, maxTokens: 4096 });
        expect(schema.safeParse(result.value).success).toBe(true);
      }
    }
  }, 240_000);

  it("loads a file once for two roles that name it", async () => {
    const models = provider();
    await models.generateText({ role: "json_compiler", system: "", prompt: "a", maxTokens: 4 });
    await models.generateText({ role: "critic", system: "", prompt: "b", maxTokens: 4 });
    await models.generateText({ role: "thinker", system: "", prompt: "c", maxTokens: 4 });
    const chatLoads = [...models.residency.loadCounts.entries()].filter(([key]) => key.includes("tiny-chat"));
    expect(chatLoads).toHaveLength(1);
    expect(chatLoads[0]![1]).toBe(1);
  });

  it("unloads the least recently used model when the budget is small", async () => {
    const other = fixtureModel("tiny-chat-other", { seed: 5 });
    const base = fixtureModelsConfig();
    const config = { ...base, memory_budget_mb: 1.5, roles: { ...base.roles, coder: { ...base.roles.coder!, file: other } } };
    const models = provider({ config });
    await models.generateText({ role: "thinker", system: "", prompt: "a", maxTokens: 2 });
    expect(models.isLoaded("thinker")).toBe(true);
    await models.generateText({ role: "coder", system: "", prompt: "b", maxTokens: 2 });
    expect(models.isLoaded("coder")).toBe(true);
    expect(models.isLoaded("thinker")).toBe(false);
    await models.generateText({ role: "thinker", system: "", prompt: "c", maxTokens: 2 });
    expect(models.isLoaded("coder")).toBe(false);
    const thinkerKey = [...models.residency.loadCounts.keys()].find((key) => key.includes("tiny-chat.gguf|"))!;
    expect(models.residency.loadCounts.get(thinkerKey)).toBe(2);
  });

  it("stops generating when aborted", async () => {
    const models = provider({ seed: 3 });
    const controller = new AbortController();
    let chunks = 0;
    const started = Date.now();
    const generation = models.generateText({
      role: "thinker",
      system: "",
      prompt: "Write a very long story.",
      maxTokens: 100_000,
      signal: controller.signal,
      onDelta: () => {
        chunks += 1;
        if (chunks === 5) controller.abort(new Error("stop"));
      },
    });
    await expect(generation).rejects.toThrow();
    expect(chunks).toBeLessThan(50);
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it("serves two concurrent requests on one model without mixing them up", async () => {
    const models = provider({ seed: 11 });
    const request = (prompt: string) => models.generateText({ role: "thinker", system: "", prompt, maxTokens: 24, temperature: 0 });
    const aloneA = await request("first prompt");
    const aloneB = await request("second, different prompt");
    const [togetherA, togetherB] = await Promise.all([request("first prompt"), request("second, different prompt")]);
    expect(togetherA).toBe(aloneA);
    expect(togetherB).toBe(aloneB);
  });

  it("embeds in batches and checks the dimension against models.json", async () => {
    const models = provider();
    const vectors = await models.embed(["alpha", "beta", "gamma"]);
    expect(vectors.map((vector) => vector.length)).toEqual([64, 64, 64]);
    expect(vectors[0]).not.toEqual(vectors[1]);
    const base = fixtureModelsConfig();
    const wrong = provider({ config: { ...base, roles: { ...base.roles, embeddings: { ...base.roles.embeddings!, dimension: 384 } } } });
    await expect(wrong.embed(["alpha"])).rejects.toThrow(/64-dimensional vectors, but models.json says dimension 384/);
  });

  it("falls back to the JSON compiler's model for a critic whose file is missing", () => {
    const base = fixtureModelsConfig();
    const models = provider({ config: { ...base, roles: { ...base.roles, critic: { ...base.roles.critic!, file: "/nowhere/critic.gguf" } } } });
    expect(models.roles.get("critic")?.present).toBe(false);
    expect(models.roles.get("critic")?.servedBy).toBe("json_compiler");
    expect(models.hasRole("critic")).toBe(true);
    expect(fixtureModels().chat).toMatch(/tiny-chat\.gguf$/);
  });
});

describe("LlamaCppProvider with a broken model file", () => {
  it("names the role and the file when llama.cpp cannot load it, and what to do", async () => {
    const whole = readFileSync(fixtureModels().chat);
    const cut = join(makeTempDir("ducklm-cut-model-"), "cut-short.gguf");
    // The header is intact (the file passes the GGUF check); the tensors end early.
    writeFileSync(cut, whole.subarray(0, Math.floor(whole.length * 0.6)));
    const base = fixtureModelsConfig();
    const models = provider({ config: { ...base, roles: { ...base.roles, thinker: { ...base.roles.thinker!, file: cut } } } });
    const failure = await models.generateText({ role: "thinker", system: "s", prompt: "p" }).then(() => null, (error: unknown) => error);
    expect(failure).toBeInstanceOf(DuckError);
    expect((failure as DuckError).code).toBe("DUCK_ERR_MODEL_LOAD");
    expect((failure as DuckError).message).toContain(`the thinker model ${cut} could not be loaded`);
    expect((failure as DuckError).message).toContain("ducklm models pull");
  });
});

describe("LlamaCppProvider limits", () => {
  it("aborts a call that passes its time limit", async () => {
    const models = provider({ seed: 4, callTimeoutMs: 1 });
    await models.ensureLoaded("thinker");
    await expect(models.generateText({ role: "thinker", system: "", prompt: "Go on forever.", maxTokens: 1_000_000 })).rejects.toThrow(/took longer than 1 ms|abort/i);
  });

  it("queues requests first come, first served when every sequence is busy", async () => {
    const models = provider({ seed: 2, sequencesPerModel: 1 });
    const finished: number[] = [];
    await Promise.all(
      [0, 1, 2].map((index) =>
        models.generateText({ role: "thinker", system: "", prompt: `request ${index}`, maxTokens: 16, temperature: 0 }).then(() => finished.push(index)),
      ),
    );
    expect(finished).toEqual([0, 1, 2]);
  });

  it("lets a queued call that gives up leave the line, so the one behind it still gets the sequence", async () => {
    const models = provider({ seed: 2, sequencesPerModel: 1 });
    await models.ensureLoaded("thinker");
    const givingUp = new AbortController();
    const first = models.generateText({
      role: "thinker",
      system: "",
      prompt: "request 0",
      maxTokens: 24,
      temperature: 0,
      // By its first token the two calls behind it are in line.
      onTokens: () => givingUp.abort(new Error("the user gave up")),
    });
    const second = models.generateText({ role: "thinker", system: "", prompt: "request 1", maxTokens: 8, temperature: 0, signal: givingUp.signal });
    const third = models.generateText({ role: "thinker", system: "", prompt: "request 2", maxTokens: 8, temperature: 0 });
    await expect(second).rejects.toThrow(/gave up/);
    await first;
    // Woken by the sequence the first call freed, well before its own 120 s time limit.
    const outcome = await Promise.race([third.then(() => "served"), delay(20_000).then(() => "still waiting")]);
    expect(outcome).toBe("served");
  }, 60_000);
});
