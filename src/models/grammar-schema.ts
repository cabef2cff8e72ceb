import { z } from "zod";

/**
 * A JSON schema in the subset node-llama-cpp turns into a grammar. Loose on purpose: the converter
 * below only produces what that subset accepts.
 */
export type GrammarSchema = Record<string, unknown>;

export interface GrammarLimits {
  /** Longest string the grammar allows, in characters. Defaults to 400. */
  maxStringLength: number;
  /** Most items of any array. Defaults to 8. */
  maxItems: number;
  /** Most keys of a free-form object (tool arguments). Defaults to 6. */
  maxProperties: number;
}

export const DEFAULT_GRAMMAR_LIMITS: GrammarLimits = { maxStringLength: 400, maxItems: 8, maxProperties: 6 };

// A grammar counts string length differently from zod (escapes, UTF-16 units), and outputs were seen
// up to half again as long as the grammar's limit: give the grammar half of zod's limit.
const GRAMMAR_SHARE_OF_ZOD_LENGTH = 0.5;

/** Values of free-form objects: flat scalars, so a decoded object is always small and complete. */
function scalarSchema(limits: GrammarLimits): GrammarSchema {
  return {
    oneOf: [{ type: "string", maxLength: limits.maxStringLength }, { type: "number" }, { type: "boolean" }, { type: "null" }],
  };
}

function convert(node: Record<string, unknown>, limits: GrammarLimits): GrammarSchema {
  if (Array.isArray(node.oneOf) || Array.isArray(node.anyOf)) {
    const options = (node.oneOf ?? node.anyOf) as Array<Record<string, unknown>>;
    return { oneOf: options.map((option) => convert(option, limits)) };
  }
  if ("const" in node) return { const: node.const };
  if (Array.isArray(node.enum)) return { enum: node.enum };
  const type = node.type;
  if (type === "object") {
    const properties = node.properties as Record<string, Record<string, unknown>> | undefined;
    if (properties && Object.keys(properties).length > 0) {
      return {
        type: "object",
        properties: Object.fromEntries(Object.entries(properties).map(([key, value]) => [key, convert(value, limits)])),
        additionalProperties: false,
      };
    }
    return { type: "object", additionalProperties: scalarSchema(limits), maxProperties: limits.maxProperties };
  }
  if (type === "array") {
    const zodMax = typeof node.maxItems === "number" ? node.maxItems : Number.POSITIVE_INFINITY;
    const min = typeof node.minItems === "number" ? node.minItems : 0;
    const items = (node.items as Record<string, unknown> | undefined) ?? {};
    return { type: "array", items: convert(items, limits), minItems: min, maxItems: Math.max(min, Math.min(zodMax, limits.maxItems)) };
  }
  if (type === "string") {
    const zodMax = typeof node.maxLength === "number" ? node.maxLength : Number.POSITIVE_INFINITY;
    const min = typeof node.minLength === "number" ? node.minLength : 0;
    const max = Math.max(min, Math.min(Math.floor(zodMax * GRAMMAR_SHARE_OF_ZOD_LENGTH), limits.maxStringLength));
    return min > 0 ? { type: "string", minLength: min, maxLength: max } : { type: "string", maxLength: max };
  }
  if (type === "number" || type === "integer") {
    // A grammar cannot bound a number; a bounded one becomes a choice of evenly spaced values.
    if (typeof node.minimum === "number" && typeof node.maximum === "number" && type === "number") {
      const { minimum, maximum } = node as { minimum: number; maximum: number };
      return { enum: Array.from({ length: 11 }, (_, i) => Math.round((minimum + ((maximum - minimum) * i) / 10) * 1000) / 1000) };
    }
    return { type };
  }
  if (type === "boolean" || type === "null") return { type };
  return scalarSchema(limits);
}

/**
 * The grammar's schema for what zod will then validate: the same shape, with every string, array
 * and free-form object bounded, so that decoding always ends in complete, parseable JSON.
 */
export function toGrammarSchema(schema: z.ZodType, limits: Partial<GrammarLimits> = {}): GrammarSchema {
  const json = z.toJSONSchema(schema, { io: "output", unrepresentable: "any" }) as Record<string, unknown>;
  return convert(json, { ...DEFAULT_GRAMMAR_LIMITS, ...limits });
}
