import type { z } from "zod";
import type { ModelRole } from "../contracts/index.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";

/**
 * A model's JSON output parsed and checked against the schema it was asked for, whatever backend
 * produced it; anything else is DUCK_ERR_MODEL_OUTPUT_INVALID with the output kept for diagnosis.
 * `incompleteHint` says why JSON may be cut off (a token limit).
 */
export function parseModelJson<T>(role: ModelRole, raw: string, schema: z.ZodType<T>, incompleteHint = ""): T {
  const details = { role, output: raw.slice(0, 2000) };
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (error) {
    throw new DuckError(ErrorCode.ModelOutputInvalid, `${role} output is not complete JSON${incompleteHint ? ` (${incompleteHint})` : ""}`, { cause: error, details });
  }
  const checked = schema.safeParse(parsed);
  if (!checked.success) {
    const issues = checked.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`).join("; ");
    throw new DuckError(ErrorCode.ModelOutputInvalid, `${role} output does not match the schema: ${issues}`, { details });
  }
  return checked.data;
}

/** An embedding as a Float32Array, refused when its size is not the one models.json declares. */
export function checkedEmbedding(vector: ArrayLike<number>, expected: number | undefined): Float32Array {
  if (expected !== undefined && vector.length !== expected) {
    throw new DuckError(ErrorCode.ModelOutputInvalid, `the embedding model gives ${vector.length}-dimensional vectors, but models.json says dimension ${expected}`, {
      details: { got: vector.length, expected },
    });
  }
  return Float32Array.from(vector);
}
