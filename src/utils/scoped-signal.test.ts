import { defaultMaxListeners, getMaxListeners, setMaxListeners } from "node:events";
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

describe("scopedSignal's reuse of idle signals", () => {
  it("hands a signal nobody kept on to the next scope as good as new: not aborted, without the old timer or parents", async () => {
    const oldParent = new AbortController();
    const first = scopedSignal([oldParent.signal], 20, "first");
    const reused = first.signal;
    first.dispose();
    first.abort(new Error("too late"));

    const next = scopedSignal([new AbortController().signal]);
    expect(next.signal).toBe(reused);
    expect(next.signal.aborted).toBe(false);
    oldParent.abort(new Error("the old parent stops"));
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(next.signal.aborted).toBe(false);
    expect(next.timedOut).toBe(false);
    next.dispose();
  });

  it("hands a reused signal on with the default listener limit, whatever the last user raised it to", () => {
    const first = scopedSignal([]);
    setMaxListeners(1500, first.signal);
    const reused = first.signal;
    first.dispose();
    const next = scopedSignal([]);
    expect(next.signal).toBe(reused);
    expect(getMaxListeners(next.signal)).toBe(defaultMaxListeners);
    next.dispose();
  });

  it("never reuses a signal that was aborted, still has a listener or onabort, or was followed by AbortSignal.any", () => {
    const aborted = scopedSignal([]);
    aborted.abort(new Error("stop"));
    aborted.dispose();

    const listened = scopedSignal([]);
    const onAbort = () => undefined;
    listened.signal.addEventListener("abort", onAbort);
    listened.dispose();

    const handled = scopedSignal([]);
    handled.signal.onabort = () => undefined;
    handled.dispose();

    const followed = scopedSignal([]);
    const dependant = AbortSignal.any([followed.signal]);
    followed.dispose();

    const kept = [aborted.signal, listened.signal, handled.signal, followed.signal];
    const later = Array.from({ length: 8 }, () => scopedSignal([]));
    for (const scope of later) expect(kept).not.toContain(scope.signal);
    for (const scope of later) scope.abort(new Error("the later scopes stop"));
    expect(dependant.aborted).toBe(false);
    expect(listened.signal.aborted).toBe(false);
    for (const scope of later) scope.dispose();
  });

  it("lets a late abort of a disposed scope stop nothing of the scope that got its signal", () => {
    const first = scopedSignal([]);
    first.dispose();
    const next = scopedSignal([]);
    first.abort(new Error("late"));
    expect(next.signal.aborted).toBe(false);
    next.dispose();
  });
});
