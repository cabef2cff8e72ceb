import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DuckError, ERROR_STATUS, ErrorCode } from "./duck-error.js";

const catalogue = readFileSync(join(import.meta.dirname, "..", "..", "docs", "errors.md"), "utf8");

describe("error codes", () => {
  it("are each documented in docs/errors.md, and the catalogue lists no other", () => {
    const documented = new Set([...catalogue.matchAll(/^\| `(DUCK_ERR_[A-Z_]+)`/gm)].map((match) => match[1]!));
    const defined = new Set(Object.values(ErrorCode));
    expect([...defined].filter((code) => !documented.has(code)), "defined but not documented").toEqual([]);
    expect([...documented].filter((code) => !defined.has(code as never)), "documented but not defined").toEqual([]);
  });

  it("each carry an HTTP status: the caller's mistakes 4xx, DuckLM's own failures 5xx", () => {
    for (const code of Object.values(ErrorCode)) expect(ERROR_STATUS[code], code).toBeGreaterThanOrEqual(400);
    expect(new DuckError(ErrorCode.TaskNotFound, "x").status).toBe(404);
    expect(new DuckError(ErrorCode.InvalidInput, "x").status).toBe(400);
    expect(new DuckError(ErrorCode.StorageFailed, "x").status).toBe(500);
  });
});
