import { setTimeout as delay } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { TaskLocks } from "./task-locks.js";

describe("TaskLocks", () => {
  it("runs shared calls together, an exclusive one alone and in order of arrival, and lets go of idle tasks", async () => {
    const locks = new TaskLocks();
    const signal = new AbortController().signal;
    const log: string[] = [];
    const call = (name: string, exclusive: boolean, ms: number) =>
      locks.run("t", exclusive, signal, async () => {
        log.push(`${name}+`);
        await delay(ms);
        log.push(`${name}-`);
      });
    await Promise.all([call("a", false, 30), call("b", false, 30), call("x", true, 10), call("c", false, 5)]);
    // a and b overlap; x waits for both and runs alone; c, arriving after x, waits behind it.
    expect(log.slice(0, 2).sort()).toEqual(["a+", "b+"]);
    expect(log.slice(4)).toEqual(["x+", "x-", "c+", "c-"]);
    expect(locks.size).toBe(0);
  });

  it("stops waiting when the signal fires, and the others go on", async () => {
    const locks = new TaskLocks();
    const never = new AbortController().signal;
    const cancel = new AbortController();
    let release: () => void = () => undefined;
    const holding = locks.run("t", true, never, () => new Promise<void>((resolve) => (release = resolve)));
    const waiting = locks.run("t", false, cancel.signal, async () => "ran");
    const after = locks.run("t", false, never, async () => "after");
    cancel.abort(new Error("cancelled"));
    await expect(waiting).rejects.toThrow("cancelled");
    release();
    await holding;
    await expect(after).resolves.toBe("after");
    expect(locks.size).toBe(0);
  });
});
