import pino from "pino";
import { describe, expect, it, vi } from "vitest";
import type { DuckEvent } from "../contracts/index.js";
import { CATCH_UP_PAGE, EventBus } from "./event-bus.js";

function event(seq: number, taskId = "t"): DuckEvent {
  return { task_id: taskId, seq, type: "task-started", time: "2026-01-01T00:00:00.000Z", payload: {} };
}

describe("EventBus", () => {
  it("delivers stored events from fromSeq, then live ones, without a gap or a duplicate", () => {
    const stored: DuckEvent[] = [event(1), event(2), event(3)];
    const bus = new EventBus((_task, from, limit) => stored.filter((e) => e.seq >= from).slice(0, limit), pino({ level: "silent" }));
    const seen: number[] = [];
    bus.subscribe("t", (e) => void seen.push(e.seq), { fromSeq: 2 });
    // A live event that was already delivered from storage is not delivered twice.
    bus.publish(event(3));
    bus.publish(event(4));
    bus.publish(event(5, "other"));
    expect(seen).toEqual([2, 3, 4]);
  });

  it("reads from storage what a live event skips over (another process committed it), so a stream has no gap", () => {
    const stored: DuckEvent[] = [event(1)];
    const bus = new EventBus((_task, from, limit) => stored.filter((e) => e.seq >= from).slice(0, limit), pino({ level: "silent" }));
    const seen: number[] = [];
    bus.subscribe("t", (e) => void seen.push(e.seq), { fromSeq: 1 });
    // 2 and 3 were committed by another process, which nobody here heard of; 4 is this process's own.
    stored.push(event(2), event(3), event(4));
    bus.publish(event(4));
    expect(seen).toEqual([1, 2, 3, 4]);
    // The next one due comes live as it is; one past it brings what lies between from storage first.
    stored.push(event(5));
    bus.publish(event(5));
    stored.push(event(6), event(7));
    bus.publish(event(7));
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });

  it("reads what another process committed, from where each subscriber stands, even after notices were lost", () => {
    const stored: DuckEvent[] = [];
    const bus = new EventBus((_task, from, limit) => stored.filter((e) => e.seq >= from).slice(0, limit), pino({ level: "silent" }));
    const fromStart: number[] = [];
    const liveOnly: number[] = [];
    // Subscribed before anything was stored: the first catch-up finds nothing.
    bus.subscribe("t", (e) => void fromStart.push(e.seq), { fromSeq: 1 });
    bus.subscribe("t", (e) => void liveOnly.push(e.seq));
    stored.push(event(1), event(2), event(3));
    // The notices of 1 and 2 never came: the one of 3 still brings the first subscriber everything.
    bus.committedElsewhere("t", 3, 3);
    expect(fromStart).toEqual([1, 2, 3]);
    expect(liveOnly).toEqual([3]);
    stored.push(event(4), event(5));
    // After a reconnect nothing says what was committed: each reads on from what it had.
    bus.committedElsewhere("t", Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
    expect(fromStart).toEqual([1, 2, 3, 4, 5]);
    expect(liveOnly).toEqual([3, 4, 5]);
  });

  it("gives a subscriber to every task what other processes committed, in order, beside this process's own events", () => {
    const stored = new Map<string, DuckEvent[]>([["far", []], ["near", []]]);
    const bus = new EventBus((task, from, limit) => stored.get(task)!.filter((e) => e.seq >= from).slice(0, limit), pino({ level: "silent" }));
    const seen: string[] = [];
    bus.subscribeAll((e) => void seen.push(`${e.task_id}:${e.seq}`));
    // Another process committed 1–2 of "far" (one notice), this one publishes "near", then 3 of "far" comes.
    stored.get("far")!.push(event(1, "far"), event(2, "far"));
    bus.committedElsewhere("far", 1, 2);
    bus.publish(event(1, "near"));
    stored.get("far")!.push(event(3, "far"), event(4, "far"));
    // A notice for 3 alone: 4 is another commit's, with a notice of its own.
    bus.committedElsewhere("far", 3, 3);
    bus.committedElsewhere("far", 3, 4);
    // A repeated notice, or a reconnect's read-again, gives nothing twice.
    bus.committedElsewhere("far", 1, 4);
    bus.committedElsewhere("far", Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
    expect(seen).toEqual(["far:1", "far:2", "near:1", "far:3", "far:4"]);
  });

  it("isolates a throwing subscriber and logs it", () => {
    const logged: unknown[] = [];
    const logger = pino({ level: "error" }, { write: (line: string) => void logged.push(JSON.parse(line)) });
    const bus = new EventBus(() => [], logger);
    const seen: number[] = [];
    bus.subscribe("t", () => {
      throw new Error("boom");
    });
    bus.subscribe("t", (e) => void seen.push(e.seq));
    bus.publish(event(1));
    bus.publish(event(2));
    expect(seen).toEqual([1, 2]);
    expect(logged).toHaveLength(2);
  });

  it("stops delivering after unsubscribe", () => {
    const bus = new EventBus(() => [], pino({ level: "silent" }));
    const seen: number[] = [];
    const stop = bus.subscribe("t", (e) => void seen.push(e.seq));
    bus.publish(event(1));
    stop();
    bus.publish(event(2));
    expect(seen).toEqual([1]);
    expect(bus.subscriberCount("t")).toBe(0);
  });

  it("catches up a long history a page at a time, with live events in their place and none twice", async () => {
    const stored: DuckEvent[] = Array.from({ length: 1000 }, (_, i) => event(i + 1));
    const limits: number[] = [];
    const bus = new EventBus((_task, from, limit) => {
      limits.push(limit);
      return stored.filter((e) => e.seq >= from).slice(0, limit);
    }, pino({ level: "silent" }));
    const seen: number[] = [];
    bus.subscribe("t", (e) => void seen.push(e.seq), { fromSeq: 1 });
    // The first page arrives before subscribe returns; the rest after the loop has had its turns.
    expect(seen).toEqual(stored.slice(0, CATCH_UP_PAGE).map((e) => e.seq));
    // Committed while the catch-up is under way: stored first, then published, as the TaskStore does.
    for (const seq of [1001, 1002]) {
      stored.push(event(seq));
      bus.publish(event(seq));
    }
    // However long the catch-up takes on a busy machine: done when every stored event is delivered.
    await vi.waitFor(() => expect(seen.length).toBeGreaterThanOrEqual(1002), { timeout: 10_000 });
    bus.publish(event(1003));
    expect(seen).toEqual(Array.from({ length: 1002 }, (_, i) => i + 1).concat([1003]));
    expect(Math.max(...limits)).toBe(CATCH_UP_PAGE);
  });

  it("stops a catch-up when unsubscribed", async () => {
    const stored: DuckEvent[] = Array.from({ length: CATCH_UP_PAGE * 3 }, (_, i) => event(i + 1));
    const bus = new EventBus((_task, from, limit) => stored.filter((e) => e.seq >= from).slice(0, limit), pino({ level: "silent" }));
    const seen: number[] = [];
    const stop = bus.subscribe("t", (e) => void seen.push(e.seq), { fromSeq: 1 });
    stop();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(seen).toHaveLength(CATCH_UP_PAGE);
  });

  it("delivers an event a handler causes while the last page is delivered", () => {
    const stored: DuckEvent[] = [event(1), event(2)];
    const bus = new EventBus((_task, from, limit) => stored.filter((e) => e.seq >= from).slice(0, limit), pino({ level: "silent" }));
    const seen: number[] = [];
    bus.subscribe(
      "t",
      (e) => {
        seen.push(e.seq);
        // Answering what it read commits an event at once (a durable append) and publishes it.
        if (e.seq === 2) {
          stored.push(event(3));
          bus.publish(event(3));
        }
      },
      { fromSeq: 1 },
    );
    expect(seen).toEqual([1, 2, 3]);
  });
});
