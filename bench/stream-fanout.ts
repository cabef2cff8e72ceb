// Events per second delivered to 1, 10 and 100 WebSocket clients through DuckLM's server (events
// committed to SQLite, published on the bus, streamed by /stream/:id) against a bare `ws` server that
// broadcasts the same pre-serialised messages (plain, and corked as DuckLM writes), in the same run;
// the p99 latency from append (or send) to receipt; and the server's CPU per message. The clients run
// in a process of their own (bench/stream-fanout-clients.ts).
//   npm run bench:stream-fanout [-- --events 10000 --rounds 5 --clients 1,10,100]
import type { Socket } from "node:net";
import { fork } from "node:child_process";
import { parseArgs } from "node:util";
import { setImmediate as nextTurn } from "node:timers/promises";
import { WebSocketServer, type WebSocket } from "ws";
import { serialise } from "../src/server/event-stream.js";
import { startTestServer } from "../test/helpers/test-server.js";
import { benchScript } from "./bench-stats.js";

const { values } = parseArgs({ options: { events: { type: "string", default: "10000" }, clients: { type: "string", default: "1,10,100" }, rounds: { type: "string", default: "5" } } });
const ROUNDS = Number(values.rounds);
const EVENTS = Number(values.events);
const CLIENT_COUNTS = values.clients.split(",").map(Number);
const BATCH = 50;

interface Result {
  eventsPerSecond: number;
  p99Ms: number;
  /** The server process's CPU per message delivered (one event to one client). */
  cpuUsPerMessage: number;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN;
}

/** Milliseconds on a clock the clients' process shares: the time origin is wall-clock, the rest monotonic. */
const now = () => performance.timeOrigin + performance.now();

/**
 * Opens `clients` sockets to `url` from another process, runs `produce`, and waits until every
 * client has every message. The CPU is this process's alone: the server's, with no client in it.
 */
async function measure(url: string, clients: number, headers: Record<string, string>, produce: () => Promise<void>): Promise<Result> {
  const clientScript = benchScript("stream-fanout-clients");
  const child = fork(clientScript.file, [url, String(clients), String(EVENTS), JSON.stringify(headers)], {
    execArgv: clientScript.execArgv,
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const message = (key: "ready" | "done") =>
    new Promise<{ latencies?: number[] }>((resolve, reject) => {
      const onMessage = (received: Record<string, unknown>) => {
        if (!received[key]) return;
        child.off("message", onMessage);
        resolve(received as { latencies?: number[] });
      };
      child.on("message", onMessage);
      void exited.then((code) => reject(new Error(`the clients' process exited (${code}) before it was ${key}`)));
    });
  await message("ready");
  const done = message("done");
  const cpuBefore = process.cpuUsage();
  const started = now();
  await produce();
  const { latencies = [] } = await done;
  const seconds = (now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  child.kill();
  await exited;
  return { eventsPerSecond: (clients * EVENTS) / seconds, p99Ms: percentile(latencies, 0.99), cpuUsPerMessage: (cpu.user + cpu.system) / (clients * EVENTS) };
}

async function duckRun(clients: number): Promise<Result> {
  const server = await startTestServer();
  try {
    const task = server.runtime.store.createTask({ text: "fan-out", workspace: server.runtime.workspace }, { durable: true });
    const url = `ws://127.0.0.1:${server.port}/stream/${task.task_id}?since=2`;
    return await measure(url, clients, { authorization: `Bearer ${server.token}` }, async () => {
      for (let i = 0; i < EVENTS; i += BATCH) {
        for (let j = 0; j < BATCH && i + j < EVENTS; j += 1) {
          server.runtime.store.append(task.task_id, "model-output-delta", { role: "thinker", purpose: "draft", text: String(now()) });
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
    return await measure(`ws://127.0.0.1:${port}/`, clients, {}, async () => {
      while (connected.length < clients) await nextTurn();
      const transports = connected.map((socket) => (socket as unknown as { _socket: Socket })._socket);
      for (let i = 0; i < EVENTS; i += BATCH) {
        if (corked) for (const transport of transports) transport.cork();
        for (let j = 0; j < BATCH && i + j < EVENTS; j += 1) {
          const text = serialise({ task_id: "t", seq: i + j + 2, type: "model-output-delta", time: new Date().toISOString(), payload: { role: "thinker", purpose: "draft", text: String(now()) } });
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

console.log(`stream-fanout: ${EVENTS} events per client, appended in batches of ${BATCH} per event-loop turn; loopback, clients in another process; median of ${ROUNDS} alternating rounds; CPU is the server process's, per message delivered`);
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
for (const clients of CLIENT_COUNTS) {
  // The three contenders take turns, round after round, so that a noisy moment hurts all of them.
  const runs: Record<"duck" | "bare" | "corked", Result[]> = { duck: [], bare: [], corked: [] };
  for (let round = 0; round < ROUNDS; round += 1) {
    runs.bare.push(await bareRun(clients));
    runs.corked.push(await bareRun(clients, true));
    runs.duck.push(await duckRun(clients));
  }
  const summary = (results: Result[]): Result => ({
    eventsPerSecond: median(results.map((result) => result.eventsPerSecond)),
    p99Ms: median(results.map((result) => result.p99Ms)),
    cpuUsPerMessage: median(results.map((result) => result.cpuUsPerMessage)),
  });
  const duck = summary(runs.duck);
  const bare = summary(runs.bare);
  const bareCorked = summary(runs.corked);
  const ratio = duck.eventsPerSecond / bare.eventsPerSecond;
  const corkedRatio = duck.eventsPerSecond / bareCorked.eventsPerSecond;
  const cpuRatio = bareCorked.cpuUsPerMessage / duck.cpuUsPerMessage;
  const rate = (result: Result) => `${result.eventsPerSecond.toFixed(0).padStart(7)} ev/s (p99 ${result.p99Ms.toFixed(1)} ms, ${result.cpuUsPerMessage.toFixed(1)} µs CPU)`;
  console.log(`  ${String(clients).padStart(3)} client(s): DuckLM ${rate(duck)}   bare ws ${rate(bare)}   bare ws corked ${rate(bareCorked)}`);
  console.log(`      target: fan-out ≥ 0.8 of the corked ws server, ${clients} client(s), wall time: ${corkedRatio.toFixed(3)} — ${corkedRatio >= 0.8 ? "met" : "NOT met"} (CPU ${cpuRatio.toFixed(3)}; vs plain ws ${ratio.toFixed(3)})`);
}
