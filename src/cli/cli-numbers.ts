import { DuckError, ErrorCode } from "../errors/duck-error.js";

/** A whole-number option (`--limit 20`), or `fallback` when it is not given; anything else is refused. */
export function wholeNumberOption(text: string | undefined, fallback: number, what: string, min = 1): number {
  const value = text === undefined ? fallback : Number(text);
  if (text?.trim() === "" || !Number.isInteger(value) || value < min) throw new DuckError(ErrorCode.InvalidInput, `${what} must be a whole number from ${min}`);
  return value;
}
