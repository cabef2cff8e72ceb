import type { ToolCatalogueEntry } from "../tools/tool-registry.js";

type Schema = Record<string, unknown>;

const isSchema = (value: unknown): value is Schema => typeof value === "object" && value !== null && !Array.isArray(value);

// Bounds this large say nothing a model needs to know (zod writes MAX_SAFE_INTEGER for `int()`).
const NOTEWORTHY_BOUND = 1_000_000;

function bounds(schema: Schema): string {
  const parts: string[] = [];
  const low = typeof schema.minimum === "number" ? schema.minimum : typeof schema.exclusiveMinimum === "number" ? schema.exclusiveMinimum + (schema.type === "integer" ? 1 : 0) : null;
  const high = typeof schema.maximum === "number" ? schema.maximum : typeof schema.exclusiveMaximum === "number" ? schema.exclusiveMaximum - (schema.type === "integer" ? 1 : 0) : null;
  if (low !== null && Math.abs(low) < NOTEWORTHY_BOUND && high !== null && Math.abs(high) < NOTEWORTHY_BOUND) parts.push(`${low}..${high}`);
  else if (low !== null && Math.abs(low) < NOTEWORTHY_BOUND) parts.push(`≥${low}`);
  else if (high !== null && Math.abs(high) < NOTEWORTHY_BOUND) parts.push(`≤${high}`);
  if (typeof schema.maxLength === "number" && schema.maxLength < 10_000) parts.push(`at most ${schema.maxLength} chars`);
  return parts.join(", ");
}

/** A JSON schema as a short type: `string`, `integer ≥1`, `"a"|"b"`, `string[]`, `{ key: string }`. */
export function typeOf(schema: unknown, depth = 0): string {
  if (!isSchema(schema)) return "any";
  if ("const" in schema) return JSON.stringify(schema.const);
  if (Array.isArray(schema.enum)) return schema.enum.map((value) => JSON.stringify(value)).join("|");
  const variants = (Array.isArray(schema.anyOf) ? schema.anyOf : Array.isArray(schema.oneOf) ? schema.oneOf : null) as unknown[] | null;
  if (variants) return variants.map((variant) => typeOf(variant, depth)).join(" | ");
  const type = Array.isArray(schema.type) ? schema.type.join(" | ") : typeof schema.type === "string" ? schema.type : isSchema(schema.properties) ? "object" : "any";
  if (type === "array") {
    const item = typeOf(schema.items, depth + 1);
    return item.includes(" ") && !item.startsWith("{") ? `(${item})[]` : `${item}[]`;
  }
  if (type === "object" && isSchema(schema.properties)) {
    // Deeply nested objects are rare in tool inputs; past three levels the model gets the raw shape.
    if (depth >= 3) return JSON.stringify(schema.properties);
    const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
    const fields = Object.entries(schema.properties).map(([key, inner]) => `${key}${required.has(key) ? "" : "?"}: ${typeOf(inner, depth + 1)}`);
    return `{ ${fields.join(", ")} }`;
  }
  const limits = bounds(schema);
  return limits ? `${type} ${limits}` : type;
}

/**
 * A catalogue entry as the models read it: one line naming the tool, its effect and what it does,
 * then a line per argument with its type, default and description. Several times shorter than the
 * JSON schema, and local models follow it as well.
 */
export function describeTool(tool: ToolCatalogueEntry): string {
  const head = `- ${tool.name} [${tool.effect}]: ${tool.description}`;
  const schema = tool.input_schema;
  if (!isSchema(schema) || !isSchema(schema.properties)) {
    const { $schema: _ignored, ...rest } = isSchema(schema) ? schema : {};
    return Object.keys(rest).length > 0 ? `${head} input: ${JSON.stringify(rest)}` : `${head} (no arguments)`;
  }
  const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
  const entries = Object.entries(schema.properties);
  if (entries.length === 0) return `${head} (no arguments)`;
  const lines = entries.map(([key, inner]) => {
    const described = isSchema(inner) && typeof inner.description === "string" ? ` — ${inner.description}` : "";
    const fallback = isSchema(inner) && "default" in inner ? ` = ${JSON.stringify(inner.default)}` : "";
    return `    ${key}${required.has(key) ? "" : "?"}: ${typeOf(inner, 1)}${fallback}${described}`;
  });
  return [head, ...lines].join("\n");
}
