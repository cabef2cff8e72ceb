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

// Step ids are short ("s1", "read-config"); the grammar need not let a reference run on.
const STEP_ID_LENGTH_IN_GRAMMAR = 40;

/**
 * Longest string limit a server's schema keeps. llama.cpp's server turns `maxLength` into a rule
 * repeated that many times, so a limit like a file's 20,000 characters makes a grammar it is slow to
 * build and run; above this, the length is left to zod and to the call's max_tokens.
 */
const SERVER_MAX_LENGTH_KEPT = 256;

/** Who decodes under the schema: node-llama-cpp's grammar here, bounded everywhere, or a model server. */
type Target = { kind: "grammar"; limits: GrammarLimits } | { kind: "server" };

/**
 * Values of free-form objects (tool arguments): flat scalars, so a decoded object stays small and
 * complete, or a reference to an earlier step's output, which the prompts offer.
 */
function freeFormValue(target: Target): GrammarSchema {
  const grammar = target.kind === "grammar";
  return {
    oneOf: [
      grammar ? { type: "string", maxLength: target.limits.maxStringLength } : { type: "string" },
      { type: "number" },
      { type: "boolean" },
      { type: "null" },
      stepReferenceSchema(grammar ? STEP_ID_LENGTH_IN_GRAMMAR : undefined),
    ],
  };
}

function numberOf(node: Record<string, unknown>, key: string): number | undefined {
  return typeof node[key] === "number" ? node[key] : undefined;
}

function convert(node: Record<string, unknown>, target: Target): GrammarSchema {
  if (Array.isArray(node.oneOf) || Array.isArray(node.anyOf)) {
    // oneOf, which every converter knows (node-llama-cpp's knows no anyOf); zod's unions here are of
    // disjoint shapes, so the two mean the same.
    const options = (node.oneOf ?? node.anyOf) as Array<Record<string, unknown>>;
    return { oneOf: options.map((option) => convert(option, target)) };
  }
  if ("const" in node) return { const: node.const };
  if (Array.isArray(node.enum)) return { enum: node.enum };
  const type = node.type;
  if (type === "object") {
    const properties = node.properties as Record<string, Record<string, unknown>> | undefined;
    if (properties && Object.keys(properties).length > 0) {
      // A grammar writes every property; a server is told which ones zod needs.
      const required = target.kind === "server" && Array.isArray(node.required) && node.required.length > 0 ? { required: node.required } : {};
      // A grammar writes every property it has, so one marked LEFT_OUT_OF_GRAMMAR is not among them.
      const kept = Object.entries(properties).filter(([, value]) => target.kind === "server" || value["x-grammar"] !== "omit");
      return {
        type: "object",
        properties: Object.fromEntries(kept.map(([key, value]) => [key, convert(value, target)])),
        ...required,
        additionalProperties: false,
      };
    }
    const bound = target.kind === "grammar" ? { maxProperties: target.limits.maxProperties } : {};
    return { type: "object", additionalProperties: freeFormValue(target), ...bound };
  }
  if (type === "array") {
    const items = convert((node.items as Record<string, unknown> | undefined) ?? {}, target);
    const min = numberOf(node, "minItems");
    const zodMax = numberOf(node, "maxItems");
    if (target.kind === "server") return { type: "array", items, ...(min !== undefined ? { minItems: min } : {}), ...(zodMax !== undefined ? { maxItems: zodMax } : {}) };
    return { type: "array", items, minItems: min ?? 0, maxItems: Math.max(min ?? 0, Math.min(zodMax ?? Number.POSITIVE_INFINITY, target.limits.maxItems)) };
  }
  if (type === "string") {
    const min = numberOf(node, "minLength") ?? 0;
    const zodMax = numberOf(node, "maxLength");
    const atLeast = min > 0 ? { minLength: min } : {};
    if (target.kind === "server") return { type: "string", ...atLeast, ...(zodMax !== undefined && zodMax <= SERVER_MAX_LENGTH_KEPT ? { maxLength: zodMax } : {}) };
    const max = Math.max(min, Math.min(Math.floor((zodMax ?? Number.POSITIVE_INFINITY) * GRAMMAR_SHARE_OF_ZOD_LENGTH), target.limits.maxStringLength));
    return { type: "string", ...atLeast, maxLength: max };
  }
  if (type === "number" || type === "integer") {
    const minimum = numberOf(node, "minimum");
    const maximum = numberOf(node, "maximum");
    if (target.kind === "server") return { type, ...(minimum !== undefined ? { minimum } : {}), ...(maximum !== undefined ? { maximum } : {}) };
    // A grammar cannot bound a number; a bounded one becomes a choice of evenly spaced values.
    if (minimum !== undefined && maximum !== undefined && type === "number") {
      return { enum: Array.from({ length: 11 }, (_, i) => Math.round((minimum + ((maximum - minimum) * i) / 10) * 1000) / 1000) };
    }
    return { type };
  }
  if (type === "boolean" || type === "null") return { type };
  return freeFormValue(target);
}

/**
 * The grammar's schema for what zod will then validate: the same shape, with every string, array
 * and free-form object bounded, so that decoding always ends in complete, parseable JSON.
 */
export function toGrammarSchema(schema: z.ZodType, limits: Partial<GrammarLimits> = {}): GrammarSchema {
  const json = z.toJSONSchema(schema, { io: "output", unrepresentable: "any" }) as Record<string, unknown>;
  return convert(json, { kind: "grammar", limits: { ...DEFAULT_GRAMMAR_LIMITS, ...limits } });
}

/**
 * The schema a model server is asked to answer in (`response_format`): what zod will accept as its
 * input — fields with a default may be left out, every other one is required, extra keys are not
 * allowed — with long length limits left to zod (see SERVER_MAX_LENGTH_KEPT).
 */
export function toServerSchema(schema: z.ZodType): GrammarSchema {
  const json = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as Record<string, unknown>;
  return convert(json, { kind: "server" });
}

/** A GBNF rule body that admits exactly `text`: a quoted literal, with quotes, backslashes and control characters escaped. */
export function gbnfLiteral(text: string): string {
  let literal = "";
  for (const character of text) {
    const code = character.charCodeAt(0);
    if (character === '"' || character === "\\") literal += `\\${character}`;
    else if (code < 0x20) literal += `\\x${code.toString(16).padStart(2, "0")}`;
    else literal += character;
  }
  return `"${literal}"`;
}
