import { describe, expect, it } from "vitest";
import { scopedSignal } from "./scoped-signal.js";

describe("scopedSignal", () => {
  it("follows its parent and its own time limit", async () => {
    const parent = new AbortController();
    const scope = scopedSignal([parent.signal], 10_000);
    parent.abort(new Error("stop"));
    expect(scope.signal.aborted).toBe(true);
    expect(scope.timedOut).toBe(false);
    scope.dispose();

    const timed = scopedSignal([new AbortController().signal], 20, "probe");
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(timed.timedOut).toBe(true);
    expect(String(timed.signal.reason)).toMatch(/probe took longer than 20 ms/);
  });

  it("detaches from the parent when disposed", () => {
    const parent = new AbortController();
    const scope = scopedSignal([parent.signal], 10_000);
    scope.dispose();
    parent.abort();
    expect(scope.signal.aborted).toBe(false);
  });
});
