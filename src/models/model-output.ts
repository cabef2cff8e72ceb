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
    const text = raw.trim();
    // Only JSON that was begun can have been cut off; prose or nothing is a different fault to report.
    const message =
      text === ""
        ? `${role} output is empty where JSON was asked for`
        : /^[{[]/.test(text)
          ? `${role} output is not complete JSON${incompleteHint ? ` (${incompleteHint})` : ""}`
          : `${role} output is not JSON: it begins ${JSON.stringify(text.slice(0, 60))}`;
    throw new DuckError(ErrorCode.ModelOutputInvalid, message, { cause: error, details });
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

/**
 * The JSON in a server's answer, for servers that had only the prompt to go by: the answer itself
 * when it begins as JSON, else the first fenced block (with or without prose around it), else the
 * span from the first `{` to the last `}`; failing all of those, the answer as it is.
 */
export function jsonTextOf(answer: string): string {
  const text = answer.trim();
  if (/^[{[]/.test(text)) return text;
  const fenced = /```[a-zA-Z]*[ \t]*\r?\n?([\s\S]*?)(?:```|$)/.exec(text);
  if (fenced && /^\s*[{[]/.test(fenced[1]!)) return fenced[1]!.trim();
  const start = text.indexOf("{");
  const end = text.lastIndexOf("}");
  if (start >= 0 && end > start) return text.slice(start, end + 1);
  return text;
}
