import type { DuckEvent, EventPayloads } from "../../src/contracts/index.js";

/** The payloads of a task's events of one type, in order. */
export function ofType<T extends DuckEvent["type"]>(events: DuckEvent[], type: T): Array<EventPayloads[T]> {
  return events.filter((event) => event.type === type).map((event) => event.payload as EventPayloads[T]);
}
