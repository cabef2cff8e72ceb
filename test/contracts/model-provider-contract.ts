import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { ModelRole } from "../../src/contracts/index.js";
import { DuckError } from "../../src/errors/duck-error.js";
import type { EmbeddingProvider, ModelProvider } from "../../src/models/model-provider.js";

/**
 * What every ModelProvider promises, whatever runs the model: a script, a recording, a server or
 * llama.cpp. Each implementation runs this suite (test/contracts/*.test.ts, test/models/llama-contract.test.ts).
 */

/** What the next call of a role answers, for providers whose answers can be arranged. */
export type ArrangedReply = { text: string } | { stallAfter: string };

export interface ProviderUnderTest {
  provider: ModelProvider & Partial<EmbeddingProvider>;
  /** Frees what creating it took (servers, files); the provider itself is disposed by the suite. */
  close?(): Promise<void>;
}

export interface ContractTarget {
  name: string;
  /**
   * True when the replies arranged are what the provider answers; false for a real model, whose text
   * is its own (then only the shape of the answer is checked).
   */
  answersAsArranged: boolean;
  /** A role it serves, one it serves through `ROLE_FALLBACKS`, one it does not serve. */
  roles: { served: ModelRole; throughFallback: ModelRole; unserved: ModelRole };
  /** A provider whose successive calls on `roles.served` (or its fallbacks) answer `replies` in turn. */
  create(replies: ArrangedReply[]): Promise<ProviderUnderTest>;
  /** A provider with its own limit per call, whose first call stalls; absent where the caller's signal is the only limit. */
  createWithCallLimit?(limitMs: number): Promise<ProviderUnderTest>;
  /** Whether it embeds text (the embeddings role is configured with `dimension`). */
  embeds: boolean;
  /** Whether it can be made to answer JSON that breaks the schema (a grammar-bound local model cannot). */
  canBreakSchema: boolean;
}

const AnswerSchema = z.object({ answer: z.string(), confidence: z.number().min(0).max(1) });
const SENTENCE = "Ducks paddle along the river while the sun sets behind the old mill.";

/** How long an aborted call may take to give up. Generous: these machines are shared. */
const PROMPT_ENOUGH_MS = 10_000;

async function using<T>(made: Promise<ProviderUnderTest>, work: (provider: ProviderUnderTest["provider"]) => Promise<T>): Promise<T> {
  const subject = await made;
  try {
    return await work(subject.provider);
  } finally {
    await subject.provider.dispose();
    await subject.close?.();
  }
}

/** Resolves with what the promise rejected with; fails the test when it resolves. */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected the call to be refused, but it answered");
}

function codeOf(error: unknown): string | undefined {
  return error instanceof DuckError ? error.code : undefined;
}

export function describeModelProviderContract(target: ContractTarget, timeoutMs = 60_000): void {
  const role = target.roles.served;
  const request = { system: "You answer briefly.", purpose: "contract" } as const;

  describe(`the ModelProvider contract: ${target.name}`, () => {
    it("streams text in order: the chunks, joined, are the answer, and none comes after it", async () => {
      await using(target.create([{ text: SENTENCE }]), async (provider) => {
        const chunks: string[] = [];
        let settled = false;
        let lateChunks = 0;
        const text = await provider.generateText({
          ...request,
          role,
          prompt: "Describe the river.",
          maxTokens: 24,
          onDelta: (chunk) => {
            if (settled) lateChunks += 1;
            chunks.push(chunk);
          },
        });
        settled = true;
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(typeof text).toBe("string");
        expect(chunks.join("")).toBe(text);
        expect(lateChunks).toBe(0);
        if (target.answersAsArranged) {
          expect(text).toBe(SENTENCE);
          expect(chunks.length).toBeGreaterThan(1);
        }
      });
    }, timeoutMs);

    it("answers JSON that satisfies the schema, with the text it came from", async () => {
      const arranged = { answer: "ducks like bread", confidence: 0.75 };
      await using(target.create([{ text: JSON.stringify(arranged) }]), async (provider) => {
        const chunks: string[] = [];
        const result = await provider.generateJson({ ...request, role, prompt: "What do ducks like?", schema: AnswerSchema, maxTokens: 512, onDelta: (chunk) => chunks.push(chunk) });
        expect(AnswerSchema.safeParse(result.value).success).toBe(true);
        expect(typeof result.raw).toBe("string");
        expect(chunks.join("")).toBe(result.raw);
        expect(JSON.parse(result.raw.trim().replace(/^```(?:json)?\s*|\s*```$/g, ""))).toEqual(result.value);
        if (target.answersAsArranged) expect(result.value).toEqual(arranged);
      });
    }, timeoutMs);

    it.runIf(target.canBreakSchema)("refuses output that breaks the schema with DUCK_ERR_MODEL_OUTPUT_INVALID, keeping the output", async () => {
      await using(target.create([{ text: JSON.stringify({ answer: 42 }) }, { text: "not json {" }]), async (provider) => {
        for (let call = 0; call < 2; call += 1) {
          const error = await rejection(provider.generateJson({ ...request, role, prompt: "What do ducks like?", schema: AnswerSchema }));
          expect(codeOf(error)).toBe("DUCK_ERR_MODEL_OUTPUT_INVALID");
          expect(JSON.stringify((error as DuckError).details)).toContain(call === 0 ? "42" : "not json");
        }
      });
    }, timeoutMs);

    it("refuses a call on a role nothing serves with DUCK_ERR_MODEL_UNAVAILABLE", async () => {
      await using(target.create([{ text: SENTENCE }]), async (provider) => {
        const error = await rejection(provider.generateText({ ...request, role: target.roles.unserved, prompt: "Hello." }));
        expect(codeOf(error)).toBe("DUCK_ERR_MODEL_UNAVAILABLE");
      });
    }, timeoutMs);

    it("says which roles it serves, following the fallback table, and answers through a fallback", async () => {
      await using(target.create([{ text: SENTENCE }]), async (provider) => {
        expect(provider.hasRole(target.roles.served)).toBe(true);
        expect(provider.hasRole(target.roles.throughFallback)).toBe(true);
        expect(provider.hasRole(target.roles.unserved)).toBe(false);
        const text = await provider.generateText({ ...request, role: target.roles.throughFallback, prompt: "Describe the river.", maxTokens: 8 });
        expect(typeof text).toBe("string");
        if (target.answersAsArranged) expect(text).toBe(SENTENCE);
      });
    }, timeoutMs);

    it("rejects with the caller's reason when the signal is already aborted", async () => {
      await using(target.create([{ text: SENTENCE }]), async (provider) => {
        const controller = new AbortController();
        const reason = new Error("the user cancelled");
        controller.abort(reason);
        expect(await rejection(provider.generateText({ ...request, role, prompt: "Hello.", signal: controller.signal }))).toBe(reason);
        expect(await rejection(provider.generateJson({ ...request, role, prompt: "Hello.", schema: AnswerSchema, signal: controller.signal }))).toBe(reason);
      });
    }, timeoutMs);

    it("stops mid-answer when aborted: rejects with the reason, promptly, and sends no chunk after", async () => {
      await using(target.create([{ stallAfter: "The ducks" }]), async (provider) => {
        const controller = new AbortController();
        const reason = new Error("stop now");
        let chunksAtAbort = -1;
        const chunks: string[] = [];
        const call = provider.generateText({
          ...request,
          role,
          prompt: "Tell a very long story about ducks.",
          maxTokens: 100_000,
          signal: controller.signal,
          onDelta: (chunk) => {
            chunks.push(chunk);
            if (chunksAtAbort < 0) {
              chunksAtAbort = chunks.length;
              controller.abort(reason);
            }
          },
        });
        const started = Date.now();
        expect(await rejection(call)).toBe(reason);
        expect(Date.now() - started).toBeLessThan(PROMPT_ENOUGH_MS);
        await new Promise((resolve) => setTimeout(resolve, 100));
        expect(chunksAtAbort).toBeGreaterThan(0);
        // The chunk being handed over when the abort came may still land; nothing after it.
        expect(chunks.length - chunksAtAbort).toBeLessThanOrEqual(1);
      });
    }, timeoutMs);

    it("ends a stalled call at the caller's deadline with the deadline's reason", async () => {
      await using(target.create([{ stallAfter: "The ducks" }]), async (provider) => {
        const deadline = AbortSignal.timeout(300);
        const error = await rejection(provider.generateText({ ...request, role, prompt: "Tell a very long story about ducks.", maxTokens: 100_000, signal: deadline }));
        expect(error).toBe(deadline.reason);
        expect((error as Error).name).toBe("TimeoutError");
      });
    }, timeoutMs);

    it.runIf(target.createWithCallLimit !== undefined)("ends a call at its own limit with DUCK_ERR_MODEL_TIMEOUT", async () => {
      await using(target.createWithCallLimit!(300), async (provider) => {
        const started = Date.now();
        const error = await rejection(provider.generateText({ ...request, role, prompt: "Tell a very long story about ducks.", maxTokens: 100_000 }));
        expect(codeOf(error)).toBe("DUCK_ERR_MODEL_TIMEOUT");
        expect(Date.now() - started).toBeLessThan(PROMPT_ENOUGH_MS);
      });
    }, timeoutMs);

    it("counts tokens: a whole number, none for nothing, more for more text", async () => {
      await using(target.create([{ text: SENTENCE }]), async (provider) => {
        await provider.ensureLoaded?.(role);
        const short = provider.countTokens(role, "ducks");
        const long = provider.countTokens(role, SENTENCE.repeat(4));
        for (const count of [short, long]) expect(Number.isInteger(count)).toBe(true);
        expect(provider.countTokens(role, "")).toBe(0);
        expect(short).toBeGreaterThan(0);
        expect(long).toBeGreaterThan(short);
        expect(long).toBeLessThanOrEqual(SENTENCE.length * 4);
      });
    }, timeoutMs);

    it.runIf(target.embeds)("embeds texts in order, one vector of the declared dimension each", async () => {
      await using(target.create([]), async (provider) => {
        expect(typeof provider.embed).toBe("function");
        const dimension = provider.embeddingDimension;
        expect(dimension).toBeGreaterThan(0);
        expect(provider.embeddingModel).toBeTruthy();
        const texts = ["ducks", "a much longer sentence about geese and swans", "bread"];
        const vectors = await provider.embed!(texts);
        expect(vectors).toHaveLength(texts.length);
        for (const vector of vectors) {
          expect(vector).toBeInstanceOf(Float32Array);
          expect(vector.length).toBe(dimension);
          expect([...vector].every(Number.isFinite)).toBe(true);
        }
        const reversed = await provider.embed!([...texts].reverse());
        for (const [index, vector] of reversed.reverse().entries()) {
          for (const [position, value] of vector.entries()) expect(value).toBeCloseTo(vectors[index]![position]!, 4);
        }
      });
    }, timeoutMs);
  });
}
