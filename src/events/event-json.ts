import type { DuckEvent } from "../contracts/index.js";

// An event's payload is stored as JSON and streamed as JSON: the text the store made is handed to
// the stream (`rememberPayloadJson`), keyed by the (immutable) event object, for the events someone
// watches; the rest pay for no cache.
const payloadJson = new WeakMap<DuckEvent, string>();

export function rememberPayloadJson(event: DuckEvent, json: string): void {
  payloadJson.set(event, json);
}

export function payloadJsonOf(event: DuckEvent): string {
  let text = payloadJson.get(event);
  if (text === undefined) {
    text = JSON.stringify(event.payload);
    payloadJson.set(event, text);
  }
  return text;
}

/** The event as JSON text, reusing the payload's text. */
export function eventJsonOf(event: DuckEvent): string {
  return `{"task_id":${JSON.stringify(event.task_id)},"seq":${event.seq},"type":${JSON.stringify(event.type)},"time":${JSON.stringify(event.time)},"payload":${payloadJsonOf(event)}}`;
}
