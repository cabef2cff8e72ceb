import { describe, expect, it } from "vitest";
import { timeOrderedId } from "./time-ordered-id.js";

describe("timeOrderedId", () => {
  it("is a version 7 UUID whose first 48 bits are the time, so later ids sort later", () => {
    const id = timeOrderedId(Date.UTC(2026, 11, 1, 12, 0, 0, 5));
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(parseInt(id.slice(0, 8) + id.slice(9, 13), 16)).toBe(Date.UTC(2026, 11, 1, 12, 0, 0, 5));
    const earlier = timeOrderedId(1_000);
    const later = timeOrderedId(1_001);
    expect(earlier < later).toBe(true);
    expect(new Set(Array.from({ length: 1000 }, () => timeOrderedId(5))).size).toBe(1000);
  });
});
