import { describe, expect, it } from "vitest";
import { z } from "zod";
import { CriticScoreSchema, ExecutionDirectiveSchema } from "../contracts/index.js";
import { toGrammarSchema, toServerSchema } from "./grammar-schema.js";

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

  it("leaves out the prose a decision's thought already says, which zod then fills with its default, but tells a server of it", () => {
    const grammar = JSON.stringify(toGrammarSchema(ExecutionDirectiveSchema));
    const keys = (text: string) => [...text.matchAll(/"(\w+)":\{/g)].map((match) => match[1]);
    expect(keys(grammar)).not.toContain("goal");
    expect(keys(grammar)).toContain("depends_on");
    // The tool directive's reason goes; the fail directive's, which is its whole content, stays.
    expect(grammar.match(/"reason":\{/g)).toHaveLength(1);
    expect(keys(JSON.stringify(toServerSchema(ExecutionDirectiveSchema)))).toContain("goal");
    const parsed = ExecutionDirectiveSchema.parse({ kind: "plan", steps: [{ id: "s1", kind: "tool", depends_on: [], tool: "echo", arguments: {} }] });
    expect(parsed).toMatchObject({ goal: "", steps: [{ description: "" }] });
  });

  it("gives the grammar at most half of zod's length limit", () => {
    const grammar = toGrammarSchema(z.object({ name: z.string().max(40) }));
    expect(grammar).toEqual({ type: "object", properties: { name: { type: "string", maxLength: 20 } }, additionalProperties: false });
  });

  it("turns bounded numbers into a choice that zod accepts", () => {
    const grammar = toGrammarSchema(CriticScoreSchema) as { properties: { safety: { enum: number[] } } };
    expect(grammar.properties.safety.enum).toEqual([0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1]);
  });

  it("lets a local model's tool arguments refer to an earlier step's output, as the prompts offer", () => {
    const grammar = toGrammarSchema(ExecutionDirectiveSchema);
    const freeForm: Array<Record<string, unknown>> = [];
    walk(grammar, (node) => {
      if (node.type === "object" && !node.properties) freeForm.push(node);
    });
    expect(freeForm.length).toBeGreaterThan(0);
    for (const node of freeForm) {
      expect((node.additionalProperties as { oneOf: unknown[] }).oneOf).toContainEqual(expect.objectContaining({ properties: { from_step: expect.objectContaining({ type: "string" }) } }));
    }
  });
});

type Branch = { properties: Record<string, Record<string, unknown>>; required?: string[] };

describe("toServerSchema", () => {
  const branches = (toServerSchema(ExecutionDirectiveSchema) as { oneOf: Branch[] }).oneOf;
  const branch = (kind: string) => branches.find((option) => option.properties.kind?.const === kind)!;

  it("requires every field zod requires, so that a schema-following server cannot leave out an answer", () => {
    expect(branch("respond").required).toEqual(["kind", "answer"]);
    expect(branch("fail").required).toEqual(["kind", "reason"]);
    // Fields with a default may be left out, as zod allows.
    expect(branch("tool").required).toEqual(["kind", "tool"]);
    for (const option of branches) expect(option).toMatchObject({ additionalProperties: false });
  });

  it("leaves long length limits to zod, so that an answer or a file's content is not cut at a few hundred characters", () => {
    expect(branch("respond").properties.answer).toEqual({ type: "string" });
    // A short limit (a step id) is kept.
    const step = (branch("plan").properties.steps!.items as { oneOf: Branch[] }).oneOf[0]!;
    expect(step.properties.id).toEqual({ type: "string", minLength: 1, maxLength: 64 });
  });

  it("lets plan-step arguments be a reference to an earlier step, and speaks only oneOf", () => {
    const step = (branch("plan").properties.steps!.items as { oneOf: Branch[] }).oneOf.find((option) => option.properties.kind?.const === "tool")!;
    const values = (step.properties.arguments as { additionalProperties: { oneOf: unknown[] } }).additionalProperties.oneOf;
    expect(values).toContainEqual({ type: "object", properties: { from_step: { type: "string", minLength: 1 } }, required: ["from_step"], additionalProperties: false });
    walk(toServerSchema(ExecutionDirectiveSchema), (node) => {
      expect(node).not.toHaveProperty("anyOf");
      expect(node).not.toHaveProperty("$schema");
      expect(node).not.toHaveProperty("default");
    });
  });
});
