// Events per second delivered to 1, 10 and 100 WebSocket clients through DuckLM's server (events
// committed to SQLite, published on the bus, streamed by /stream/:id) against a bare `ws` server that
// broadcasts the same pre-serialised messages, in the same run; and the p99 latency from append (or
// send) to receipt.
//   npm run bench:stream-fanout [-- --events 10000 --rounds 5 --clients 1,10,100]
import type { Socket } from "node:net";
import { parseArgs } from "node:util";
import { setImmediate as nextTurn } from "node:timers/promises";
import WebSocket, { WebSocketServer } from "ws";
import { serialise } from "../src/server/event-stream.js";
import { startTestServer } from "../test/helpers/test-server.js";

const { values } = parseArgs({ options: { events: { type: "string", default: "10000" }, clients: { type: "string", default: "1,10,100" }, rounds: { type: "string", default: "5" } } });
const ROUNDS = Number(values.rounds);
const EVENTS = Number(values.events);
const CLIENT_COUNTS = values.clients.split(",").map(Number);
const BATCH = 50;

interface Result {
  eventsPerSecond: number;
  p99Ms: number;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN;
}

/** Opens clients, runs `produce`, and waits until every client has every message. */
async function measure(urls: string[], headers: Record<string, string>, produce: () => Promise<void>): Promise<Result> {
  const latencies: number[] = [];
  let remaining = urls.length * EVENTS;
  let finish: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (finish = resolve));
  const sockets = await Promise.all(
    urls.map(
      (url) =>
        new Promise<WebSocket>((resolve, reject) => {
          const socket = new WebSocket(url, { headers });
          socket.on("open", () => resolve(socket));
          socket.on("error", reject);
          socket.on("message", (data) => {
            const message = JSON.parse(String(data)) as { event?: { payload?: { text?: string } } };
            const sent = Number(message.event?.payload?.text);
            if (Number.isFinite(sent)) latencies.push(performance.now() - sent);
            if (--remaining === 0) finish();
          });
        }),
    ),
  );
  const started = performance.now();
  await produce();
  await done;
  const seconds = (performance.now() - started) / 1000;
  for (const socket of sockets) socket.close();
  return { eventsPerSecond: (urls.length * EVENTS) / seconds, p99Ms: percentile(latencies, 0.99) };
}

async function duckRun(clients: number): Promise<Result> {
  const server = await startTestServer();
  try {
    const task = server.runtime.store.createTask({ text: "fan-out", workspace: server.runtime.workspace }, { durable: true });
    const url = `ws://127.0.0.1:${server.port}/stream/${task.task_id}?since=2`;
    return await measure(Array(clients).fill(url), { authorization: `Bearer ${server.token}` }, async () => {
      for (let i = 0; i < EVENTS; i += BATCH) {
        for (let j = 0; j < BATCH && i + j < EVENTS; j += 1) {
          server.runtime.store.append(task.task_id, "model-output-delta", { role: "thinker", purpose: "draft", text: String(performance.now()) });
        }
        server.runtime.store.flush();
        await nextTurn();
      }
    });
  } finally {
    await server.close();
  }
}

/** `corked`: the bare server also gathers each turn's sends into one write, as DuckLM does. */
async function bareRun(clients: number, corked = false): Promise<Result> {
  const wss = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  await new Promise((resolve) => wss.once("listening", resolve));
  const port = (wss.address() as { port: number }).port;
  const connected: WebSocket[] = [];
  wss.on("connection", (socket) => connected.push(socket));
  try {
    return await measure(Array(clients).fill(`ws://127.0.0.1:${port}/`), {}, async () => {
      while (connected.length < clients) await nextTurn();
      const transports = connected.map((socket) => (socket as unknown as { _socket: Socket })._socket);
      for (let i = 0; i < EVENTS; i += BATCH) {
        if (corked) for (const transport of transports) transport.cork();
        for (let j = 0; j < BATCH && i + j < EVENTS; j += 1) {
          const text = serialise({ task_id: "t", seq: i + j + 2, type: "model-output-delta", time: new Date().toISOString(), payload: { role: "thinker", purpose: "draft", text: String(performance.now()) } });
          for (const socket of connected) socket.send(text);
        }
        if (corked) for (const transport of transports) transport.uncork();
        await nextTurn();
      }
    });
  } finally {
    for (const socket of connected) socket.terminate();
    await new Promise((resolve) => wss.close(resolve));
  }
}

// One unreported round of each first, so that neither side pays for start-up (module loading, JIT,
// the first database file) inside a measurement.
await bareRun(1);
await duckRun(1);

console.log(`stream-fanout: ${EVENTS} events per client, appended in batches of ${BATCH} per event-loop turn; loopback, same process; median of ${ROUNDS} alternating rounds`);
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
for (const clients of CLIENT_COUNTS) {
  // The three contenders take turns, round after round, so that a noisy moment hurts all of them.
  const runs: Record<"duck" | "bare" | "corked", Result[]> = { duck: [], bare: [], corked: [] };
  for (let round = 0; round < ROUNDS; round += 1) {
    runs.bare.push(await bareRun(clients));
    runs.corked.push(await bareRun(clients, true));
    runs.duck.push(await duckRun(clients));
  }
  const summary = (results: Result[]): Result => ({ eventsPerSecond: median(results.map((result) => result.eventsPerSecond)), p99Ms: median(results.map((result) => result.p99Ms)) });
  const duck = summary(runs.duck);
  const bare = summary(runs.bare);
  const bareCorked = summary(runs.corked);
  const ratio = duck.eventsPerSecond / bare.eventsPerSecond;
  const corkedRatio = duck.eventsPerSecond / bareCorked.eventsPerSecond;
  const rate = (result: Result) => `${result.eventsPerSecond.toFixed(0).padStart(7)} ev/s (p99 ${result.p99Ms.toFixed(1)} ms)`;
  console.log(
    `  ${String(clients).padStart(3)} client(s): DuckLM ${rate(duck)}   bare ws ${rate(bare)}   bare ws corked ${rate(bareCorked)}   ratio ${ratio.toFixed(3)} (target ≥ 0.8: ${ratio >= 0.8 ? "met" : "NOT met"}), vs corked ${corkedRatio.toFixed(3)}`,
  );
}
