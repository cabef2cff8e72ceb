import { describe, expect, it } from "vitest";
import { RuntimeConfigSchema } from "../config/config-schemas.js";
import type { MemoryHit } from "../contracts/index.js";
// Four characters a token, as the providers estimate without a tokenizer.
const estimateTokens = (text: string) => Math.ceil(text.length / 4);
import { buildContext, fitText } from "./context-builder.js";

const hit = (id: number, text: string): MemoryHit => ({
  entry: { id, text, kind: "fact", source_task: null, weight: 1, pinned: false, created_at: "", last_used_at: null, embedding_model: null },
  score: 1,
  matched_by: ["keyword"],
});

describe("buildContext", () => {
  it("keeps every section within its budget and says what was cut", () => {
    const budgets = RuntimeConfigSchema.parse({ context_budgets: { system: 10, memory: 20, tools: 50, history: 30, task: 15 } }).context_budgets;
    const context = buildContext(
      {
        systemPrompt: "s".repeat(400),
        taskText: "t".repeat(400),
        memory: Array.from({ length: 10 }, (_, i) => hit(i + 1, `memory number ${i} `.repeat(3))),
        tools: [],
        history: Array.from({ length: 10 }, (_, i) => ({ text: `question ${i}`, answer: `answer ${i}` })),
      },
      budgets,
      estimateTokens,
    );
    for (const [name, section] of Object.entries(context.sections)) {
      expect(section.tokens, name).toBeLessThanOrEqual(section.budget);
    }
    expect(context.sections.system.truncated).toBe(true);
    expect(context.sections.memory.truncated).toBe(true);
    // The newest history is what is kept.
    expect(context.prompt).toContain("question 9");
    expect(context.prompt).not.toContain("question 0");
  });

  it("leaves short text alone", () => {
    expect(fitText("short", 10, estimateTokens)).toEqual({ text: "short", truncated: false });
  });
});
