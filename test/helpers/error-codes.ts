import { DuckError } from "../../src/errors/duck-error.js";

/** The DuckLM error code `run` throws, null when it throws nothing, or a description of anything else it throws. */
export function codeOf(run: () => unknown): string | null {
  try {
    run();
    return null;
  } catch (error) {
    return error instanceof DuckError ? error.code : `not a DuckError: ${String(error)}`;
  }
}
