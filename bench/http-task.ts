// What a task costs when it comes over HTTP, against the same task submitted in-process through the
// DuckLM API, in the same run; and, as the floor of one HTTP round trip on this machine, a bare
// Fastify app answering the same request with an outcome of the same shape.
//
// HTTP tasks are `POST /chat` with `wait: true` on one kept-alive loopback connection, from a client
// in a process of its own (bench/http-task-client.ts), one after another; the server's CPU is this
// process's alone. In-process tasks are `ducklm.submit(...).done`, one after another, with a turn of
// the event loop after each, as a server takes. Both sides run on one server's runtime (SQLite, WAL,
// synchronous=NORMAL, no model: the intent parser decides), and do the same work: each task commits
// its events once, when it ends. Two task shapes: a direct answer, and one file read then an answer.
// Rounds alternate which side goes first.
//
//   npm run bench:http-task [-- --tasks 400 --rounds 5]
import { fork } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { setImmediate as nextTurn } from "node:timers/promises";
import { parseArgs } from "node:util";
import Fastify from "fastify";
import { startTestServer } from "../test/helpers/test-server.js";
import { benchScript, median, spread } from "./bench-stats.js";

const { values } = parseArgs({ options: { tasks: { type: "string", default: "400" }, rounds: { type: "string", default: "5" } } });
const TASKS = Number(values.tasks);
const ROUNDS = Number(values.rounds);
const WARMUP = 100;

const SHAPES = [
  { name: "direct answer", text: "tell me a joke" },
  { name: "one file read", text: "read file notes.txt" },
];

interface Sample {
  /** Microseconds per task. */
  wall: number;
  /** Microseconds of this process's CPU per task (every thread): the server's alone. */
  cpu: number;
}

const server = await startTestServer();
writeFileSync(join(server.runtime.workspace, "notes.txt"), "ducks like bread\n".repeat(20));

const bare = Fastify();
bare.post("/chat", async (request) => ({ task_id: "00000000-0000-7000-8000-000000000000", state: "completed", answer: String((request.body as { text?: unknown }).text), error: null, pending_permissions: [], pending_secrets: [] }));
await bare.listen({ host: "127.0.0.1", port: 0 });
const bareUrl = `http://127.0.0.1:${(bare.server.address() as { port: number }).port}/chat`;

const clientScript = benchScript("http-task-client");
const client = fork(clientScript.file, [], { execArgv: clientScript.execArgv, stdio: ["ignore", "inherit", "inherit", "ipc"] });
const exited = new Promise<number | null>((resolve) => client.once("exit", resolve));
function fromClient<T>(key: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: Record<string, unknown>) => {
      if (!(key in message)) return;
      client.off("message", onMessage);
      resolve(message as T);
    };
    client.on("message", onMessage);
    void exited.then((code) => reject(new Error(`the client's process exited (${code})`)));
  });
}
await fromClient("ready");

const cpuPerTask = (before: NodeJS.CpuUsage, tasks: number) => {
  const used = process.cpuUsage(before);
  return (used.user + used.system) / tasks;
};

async function overHttp(url: string, text: string, tasks: number): Promise<Sample> {
  const answer = fromClient<{ wallUs: number }>("wallUs");
  const cpuBefore = process.cpuUsage();
  client.send({ url, body: JSON.stringify({ text, wait: true }), tasks, token: server.token });
  const { wallUs } = await answer;
  return { wall: wallUs, cpu: cpuPerTask(cpuBefore, tasks) };
}

async function inProcess(text: string, tasks: number): Promise<Sample> {
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  for (let i = 0; i < tasks; i += 1) {
    const outcome = await server.ducklm.submit({ text }).done;
    if (outcome.state !== "completed") throw new Error(`in-process task ended ${outcome.state}: ${JSON.stringify(outcome.error)}`);
    await nextTurn();
  }
  return { wall: ((performance.now() - started) * 1000) / tasks, cpu: cpuPerTask(cpuBefore, tasks) };
}

const SIDES = ["in-process", "HTTP", "bare Fastify"] as const;
type Side = (typeof SIDES)[number];
const run = (side: Side, text: string, tasks: number) =>
  side === "in-process" ? inProcess(text, tasks) : side === "HTTP" ? overHttp(`${server.url}/chat`, text, tasks) : overHttp(bareUrl, text, tasks);

try {
  console.log(`http-task: ${TASKS} tasks a side per round, ${ROUNDS} rounds alternating which side goes first, median [min–max] µs per task`);
  console.log(`  HTTP: POST /chat {wait: true}, one kept-alive loopback connection, client in another process; CPU is the server process's`);
  for (const shape of SHAPES) for (const side of SIDES) await run(side, shape.text, WARMUP);
  const verdicts: string[] = [];
  for (const shape of SHAPES) {
    const samples = new Map<Side, Sample[]>(SIDES.map((side) => [side, []]));
    for (let round = 0; round < ROUNDS; round += 1) {
      const order = round % 2 === 0 ? SIDES : [...SIDES].reverse();
      for (const side of order) samples.get(side)!.push(await run(side, shape.text, TASKS));
    }
    const wall = (side: Side) => samples.get(side)!.map((sample) => sample.wall);
    const cpu = (side: Side) => samples.get(side)!.map((sample) => sample.cpu);
    console.log(`\n  ${shape.name} ("${shape.text}")      wall µs                CPU µs`);
    for (const side of SIDES) console.log(`    ${side.padEnd(14)} ${median(wall(side)).toFixed(0).padStart(6)} ${spread(wall(side), 0).padEnd(14)} ${median(cpu(side)).toFixed(0).padStart(6)} ${spread(cpu(side), 0)}`);
    const wallRatio = median(wall("HTTP")) / median(wall("in-process"));
    const cpuRatio = median(cpu("HTTP")) / median(cpu("in-process"));
    const beyondBare = median(wall("HTTP")) - median(wall("in-process")) - median(wall("bare Fastify"));
    console.log(`    HTTP's extra over in-process: ${(median(wall("HTTP")) - median(wall("in-process"))).toFixed(0)} µs, of which a bare Fastify round trip is ${median(wall("bare Fastify")).toFixed(0)} µs (DuckLM's server: ${beyondBare.toFixed(0)} µs)`);
    verdicts.push(`  target: ${shape.name}, per-task HTTP cost ≤ 2× in-process, wall time: ${wallRatio.toFixed(2)}× — ${wallRatio <= 2 ? "met" : "NOT met"} (server CPU ${cpuRatio.toFixed(2)}×)`);
  }
  console.log("");
  for (const verdict of verdicts) console.log(verdict);
} finally {
  client.kill();
  await bare.close();
  await server.close();
}
