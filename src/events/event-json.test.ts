import { describe, expect, it } from "vitest";
import type { DuckEvent } from "../contracts/index.js";
import { eventJsonOf, payloadJsonOf } from "./event-json.js";

describe("event JSON", () => {
  it("is the same text JSON.stringify makes, with the payload stringified once", () => {
    const event: DuckEvent = { task_id: 'a"b\\c', seq: 7, type: "tool-result", time: "2026-11-29T00:00:00.000Z", payload: { text: "line\n\"quoted\" ✓", nested: { n: [1, 2, null] } } };
    expect(eventJsonOf(event)).toBe(JSON.stringify(event));
    expect(JSON.parse(eventJsonOf(event))).toEqual(event);
    expect(payloadJsonOf(event)).toBe(payloadJsonOf(event));
  });
});
