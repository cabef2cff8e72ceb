import type { Socket } from "node:net";
import type { WebSocket } from "ws";
import type { DuckEvent } from "../contracts/index.js";
import { eventJsonOf, payloadJsonOf } from "../events/event-json.js";

export interface StreamOptions {
  /** A client whose unsent data passes this many bytes is disconnected. Defaults to 4 MiB. */
  bufferCapBytes?: number;
  /** Ping interval. Defaults to 15 s. */
  heartbeatMs?: number;
}

// One serialisation per event, however many clients receive it (and the payload's text is the one
// the event store already made).
const serialised = new WeakMap<DuckEvent, string>();

export function serialise(event: DuckEvent): string {
  let text = serialised.get(event);
  if (text === undefined) {
    text = payloadJsonOf(event).length > STREAMED_TEXT_CHARS ? cutForTheStream(event) : `{"type":"event","event":${eventJsonOf(event)}}`;
    serialised.set(event, text);
  }
  return text;
}

/**
 * The longest text of an event sent whole to a live client. A longer one (an output under a raised
 * `output_cap_bytes`) is cut, says so, and names where the whole event is; the stored event keeps it all.
 */
export const STREAMED_TEXT_CHARS = 256 * 1024;

function cutForTheStream(event: DuckEvent): string {
  const whole = `GET /tasks/${event.task_id}/events?since=${event.seq}&limit=1`;
  const payload = JSON.parse(JSON.stringify(event.payload), (_key, item: unknown) =>
    typeof item === "string" && item.length > STREAMED_TEXT_CHARS ? `${item.slice(0, STREAMED_TEXT_CHARS)}\n[… ${item.length - STREAMED_TEXT_CHARS} more characters, cut for the live stream: ${whole} has the whole text]` : item,
  ) as Record<string, unknown>;
  return JSON.stringify({ type: "event", event: { ...event, payload }, cut: true });
}

/**
 * Streams a task's events to one WebSocket: stored events from `since`, then live ones, with no gap
 * and no duplicate (the bus reads and subscribes in one step). A client that stops reading is closed
 * at the buffer cap instead of slowing the others; a ping keeps idle connections honest.
 */
/** Stored events of a task from `fromSeq`, then live ones, with no gap or duplicate (the DuckLM API's `subscribe`). */
export type SubscribeToTask = (taskId: string, handler: (event: DuckEvent) => void, options: { fromSeq: number }) => () => void;

export function streamTask(socket: WebSocket, subscribe: SubscribeToTask, taskId: string, since: number, options: StreamOptions = {}): void {
  const cap = options.bufferCapBytes ?? 4 * 1024 * 1024;
  let alive = true;
  const transport = (socket as unknown as { _socket?: Socket })._socket;
  let corked = false;
  const unsubscribe = subscribe(
    taskId,
    (event) => {
      if (socket.readyState !== socket.OPEN) return;
      // Events committed together reach the client in one write instead of one system call each:
      // the bus delivers a commit's events synchronously, and the socket opens again once they are in.
      // The cap is checked when a commit starts arriving, against what the client has not yet read
      // (inside a corked commit the buffer also holds what simply has not been written yet).
      if (!corked) {
        if (socket.bufferedAmount > cap) {
          socket.close(4008, "too slow: the client did not read its events");
          return;
        }
        if (transport) {
          corked = true;
          transport.cork();
          queueMicrotask(() => {
            corked = false;
            transport.uncork();
          });
        }
      }
      socket.send(serialise(event));
    },
    { fromSeq: since },
  );
  const heartbeat = setInterval(() => {
    if (!alive) {
      socket.terminate();
      return;
    }
    alive = false;
    socket.ping();
  }, options.heartbeatMs ?? 15_000);
  socket.on("pong", () => (alive = true));
  socket.on("message", (data) => {
    // The only message a client sends is a heartbeat of its own.
    if (String(data) === "ping") socket.send(JSON.stringify({ type: "pong" }));
  });
  socket.on("close", () => {
    clearInterval(heartbeat);
    unsubscribe();
  });
  socket.on("error", () => socket.terminate());
}
