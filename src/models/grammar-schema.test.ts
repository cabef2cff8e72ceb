import { describe, expect, it } from "vitest";
import { z } from "zod";
import { CriticScoreSchema, ExecutionDirectiveSchema } from "../contracts/index.js";
import { toGrammarSchema } from "./grammar-schema.js";

function walk(node: unknown, visit: (node: Record<string, unknown>) => void): void {
  if (!node || typeof node !== "object") return;
  visit(node as Record<string, unknown>);
  for (const value of Object.values(node)) {
    if (Array.isArray(value)) value.forEach((item) => walk(item, visit));
    else walk(value, visit);
  }
}

describe("toGrammarSchema", () => {
  it("bounds every string, array and free-form object of the directive schema", () => {
    const grammar = toGrammarSchema(ExecutionDirectiveSchema);
    let strings = 0;
    walk(grammar, (node) => {
      if (node.type === "string") {
        strings += 1;
        expect(node.maxLength).toBeTypeOf("number");
      }
      if (node.type === "array") expect(node.maxItems).toBeLessThanOrEqual(8);
      if (node.type === "object" && !node.properties) expect(node.maxProperties).toBe(6);
      expect(node).not.toHaveProperty("$schema");
      expect(node).not.toHaveProperty("default");
    });
    expect(strings).toBeGreaterThan(5);
  });

  it("gives the grammar at most half of zod's length limit", () => {
    const grammar = toGrammarSchema(z.object({ name: z.string().max(40) }));
    expect(grammar).toEqual({ type: "object", properties: { name: { type: "string", maxLength: 20 } }, additionalProperties: false });
  });

  it("turns bounded numbers into a choice that zod accepts", () => {
    const grammar = toGrammarSchema(CriticScoreSchema) as { properties: { safety: { enum: number[] } } };
    expect(grammar.properties.safety.enum).toEqual([0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1]);
  });
});
