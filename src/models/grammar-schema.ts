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

/** A plan step's argument that takes an earlier step's output: `{"from_step": "s1"}`. */
function stepReferenceSchema(maxIdLength: number | undefined): GrammarSchema {
  const id = maxIdLength === undefined ? { type: "string", minLength: 1 } : { type: "string", minLength: 1, maxLength: maxIdLength };
  return { type: "object", properties: { from_step: id }, required: ["from_step"], additionalProperties: false };
}

/**
 * Values of free-form objects (tool arguments): flat scalars, so a decoded object is always small and
 * complete, or a reference to an earlier step's output, which the prompts offer.
 */
function scalarSchema(limits: GrammarLimits): GrammarSchema {
  return {
    oneOf: [{ type: "string", maxLength: limits.maxStringLength }, { type: "number" }, { type: "boolean" }, { type: "null" }, stepReferenceSchema(STEP_ID_LENGTH_IN_GRAMMAR)],
  };
}

// Step ids are short ("s1", "read-config"); the grammar need not let a reference run on.
const STEP_ID_LENGTH_IN_GRAMMAR = 40;

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

/**
 * Longest string limit a server's schema keeps. llama.cpp's server turns `maxLength` into a rule
 * repeated that many times, so a limit like a file's 20,000 characters makes a grammar it is slow to
 * build and run; above this, the length is left to zod and to the call's max_tokens.
 */
const SERVER_MAX_LENGTH_KEPT = 256;

function convertForServer(node: Record<string, unknown>): GrammarSchema {
  if (Array.isArray(node.oneOf) || Array.isArray(node.anyOf)) {
    const options = (node.oneOf ?? node.anyOf) as Array<Record<string, unknown>>;
    // oneOf, which every server's converter knows (node-llama-cpp's knows no anyOf); zod's unions here
    // are of disjoint shapes, so the two mean the same.
    return { oneOf: options.map(convertForServer) };
  }
  if ("const" in node) return { const: node.const };
  if (Array.isArray(node.enum)) return { enum: node.enum };
  const type = node.type;
  if (type === "object") {
    const properties = node.properties as Record<string, Record<string, unknown>> | undefined;
    if (properties && Object.keys(properties).length > 0) {
      const required = Array.isArray(node.required) ? node.required : [];
      return {
        type: "object",
        properties: Object.fromEntries(Object.entries(properties).map(([key, value]) => [key, convertForServer(value)])),
        ...(required.length > 0 ? { required } : {}),
        additionalProperties: false,
      };
    }
    return { type: "object", additionalProperties: freeFormValueForServer() };
  }
  if (type === "array") {
    const bounds = Object.fromEntries(["minItems", "maxItems"].filter((key) => typeof node[key] === "number").map((key) => [key, node[key]]));
    return { type: "array", items: convertForServer((node.items as Record<string, unknown> | undefined) ?? {}), ...bounds };
  }
  if (type === "string") {
    const kept: GrammarSchema = { type: "string" };
    if (typeof node.minLength === "number" && node.minLength > 0) kept.minLength = node.minLength;
    if (typeof node.maxLength === "number" && node.maxLength <= SERVER_MAX_LENGTH_KEPT) kept.maxLength = node.maxLength;
    return kept;
  }
  if (type === "number" || type === "integer") {
    return { type, ...Object.fromEntries(["minimum", "maximum"].filter((key) => typeof node[key] === "number").map((key) => [key, node[key]])) };
  }
  if (type === "boolean" || type === "null") return { type };
  return freeFormValueForServer();
}

function freeFormValueForServer(): GrammarSchema {
  return { oneOf: [{ type: "string" }, { type: "number" }, { type: "boolean" }, { type: "null" }, stepReferenceSchema(undefined)] };
}

/**
 * The schema a model server is asked to answer in (`response_format`): what zod will accept as its
 * input — fields with a default may be left out, every other one is required, extra keys are not
 * allowed — with long length limits left to zod (see SERVER_MAX_LENGTH_KEPT).
 */
export function toServerSchema(schema: z.ZodType): GrammarSchema {
  const json = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as Record<string, unknown>;
  return convertForServer(json);
}
