import pino from "pino";
import { describe, expect, it } from "vitest";
import type { DuckEvent } from "../contracts/index.js";
import { EventBus } from "./event-bus.js";

function event(seq: number, taskId = "t"): DuckEvent {
  return { task_id: taskId, seq, type: "task-started", time: "2026-01-01T00:00:00.000Z", payload: {} };
}

describe("EventBus", () => {
  it("delivers stored events from fromSeq, then live ones, without a gap or a duplicate", () => {
    const stored: DuckEvent[] = [event(1), event(2), event(3)];
    const bus = new EventBus((_task, from) => stored.filter((e) => e.seq >= from), pino({ level: "silent" }));
    const seen: number[] = [];
    bus.subscribe("t", (e) => void seen.push(e.seq), { fromSeq: 2 });
    // A live event that was already delivered from storage is not delivered twice.
    bus.publish(event(3));
    bus.publish(event(4));
    bus.publish(event(5, "other"));
    expect(seen).toEqual([2, 3, 4]);
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
});
