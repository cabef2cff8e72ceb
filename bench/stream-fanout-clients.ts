// The WebSocket clients of bench/stream-fanout, in a process of their own, so that the server's
// process spends its time on serving alone. Started with IPC by the bench: it opens the sockets,
// says `ready`, counts what arrives, and says `done` with the latencies once every socket has
// every message; the bench then ends it.
//
//   (spawned by bench/stream-fanout.ts) URL CLIENTS EVENTS HEADERS_JSON
import WebSocket from "ws";

const [url, clientsText, eventsText, headersJson] = process.argv.slice(2);
if (!url || !clientsText || !eventsText || !headersJson) throw new Error("usage: stream-fanout-clients URL CLIENTS EVENTS HEADERS_JSON");
const clients = Number(clientsText);
const events = Number(eventsText);
const headers = JSON.parse(headersJson) as Record<string, string>;

/** Milliseconds on a clock both processes share: the time origin is wall-clock, the rest monotonic. */
const now = () => performance.timeOrigin + performance.now();

const latencies: number[] = [];
let remaining = clients * events;
await Promise.all(
  Array.from(
    { length: clients },
    () =>
      new Promise<WebSocket>((resolve, reject) => {
        const socket = new WebSocket(url, { headers });
        socket.on("open", () => resolve(socket));
        socket.on("error", reject);
        socket.on("message", (data) => {
          const message = JSON.parse(String(data)) as { event?: { payload?: { text?: string } } };
          const sent = Number(message.event?.payload?.text);
          if (Number.isFinite(sent)) latencies.push(now() - sent);
          remaining -= 1;
          if (remaining === 0) {
            // The bench ends this process once it has the answer.
            process.send!({ done: true, latencies });
          }
        });
      }),
  ),
);
process.send!({ ready: true });
