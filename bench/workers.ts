// DuckLM on PostgreSQL, measured against raw node-postgres in the same run.
//
// Event append: what it costs DuckLM's TaskStore on PostgreSQL to record an event, against the `pg`
// client doing the same writes on the same schema: per event an INSERT into `events` and an UPDATE of
// the task's row, committed one event per transaction or a hundred together. The raw side is as fast
// as `pg` allows: one connection in pipeline mode, every statement of a commit sent at once. DuckLM's
// side also builds each task's state and publishes every event on its bus, as it does for real.
// Rounds alternate which side goes first; both yield to the event loop after every commit.
//
// Throughput: tasks per second of a fixed mix without a model (a file read, a command, a memory
// written), TASKS in all, spread evenly over 1, 2 and 4 worker processes on one PostgreSQL database,
// and run by one process on SQLite, in the same run. Each worker runs up to 4 tasks at once; the time
// is from "go" until the last worker's last task ended. On a 2-core machine the workers and the
// server share the same two cores, so this shows what the shared store costs rather than how far
// more machines go.
//
// The server is a throwaway cluster on loopback started by this bench, with fsync off for every
// side: the figures are the clients' work and the round trips, not the disk.
//
//   npm run bench:workers [-- --events 2000 --rounds 5 --tasks 120]
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import pg from "pg";
import pino from "pino";
import { openPostgresStores } from "../src/state/open-stores.js";
import { timeOrderedId } from "../src/utils/time-ordered-id.js";
import { startTestPostgres } from "../test/helpers/postgres-server.js";
import { APPEND_TASKS, APPEND_TEXT, appendThroughTaskStore, timedPerEvent, yieldTurn, type AppendSample } from "./task-store-append.js";
import { benchScript } from "./bench-stats.js";

const { values } = parseArgs({ options: { events: { type: "string", default: "2000" }, rounds: { type: "string", default: "5" }, tasks: { type: "string", default: "120" } } });
const EVENTS = Number(values.events);
const ROUNDS = Number(values.rounds);
const TASKS = APPEND_TASKS;
const TEXT = APPEND_TEXT;
type Sample = AppendSample;

const timed = (write: () => Promise<void>) => timedPerEvent(EVENTS, write);

const duckLM = (url: string, perCommit: number) => appendThroughTaskStore(openPostgresStores(url, { logger: pino({ level: "silent" }) }), EVENTS, perCommit);

/** Raw `pg`: `pipelined` sends each commit's statements at once; otherwise each is awaited in turn, as most code does. */
async function rawPg(url: string, perCommit: number, pipelined: boolean): Promise<Sample> {
  // The schema DuckLM made, so that both write the same rows into the same tables and indexes.
  openPostgresStores(url, { logger: pino({ level: "silent" }) }).database.close();
  const client = new pg.Client({ connectionString: url, pipeline: pipelined });
  await client.connect();
  const send = async (statements: Array<string | pg.QueryConfig>) => {
    if (pipelined) await Promise.all(statements.map((query) => client.query(query)));
    else for (const query of statements) await client.query(query);
  };
  try {
    const now = () => new Date().toISOString();
    const tasks = Array.from({ length: TASKS }, () => timeOrderedId());
    const seqs = new Map<string, number>();
    const insertEvent = (id: string, seq: number, type: string, time: string, payload: string) => ({ name: "insert_event", text: "INSERT INTO events (task_id, seq, type, time, payload) VALUES ($1, $2, $3, $4, $5)", values: [id, seq, type, time, payload] });
    const setup: Array<string | pg.QueryConfig> = ["BEGIN"];
    for (const id of tasks) {
      const time = now();
      setup.push({ text: "INSERT INTO tasks (id, text, session_id, workspace, state, created_at, updated_at, last_seq) VALUES ($1, 'task', NULL, '/w', 'running', $2, $2, 1)", values: [id, time] }, insertEvent(id, 1, "task-received", time, "{}"));
      seqs.set(id, 1);
    }
    setup.push("COMMIT");
    await send(setup);
    const commit = async (rows: Array<{ id: string; payload: string }>) => {
      const time = now();
      const statements: Array<string | pg.QueryConfig> = ["BEGIN"];
      for (const row of rows) {
        const seq = seqs.get(row.id)! + 1;
        seqs.set(row.id, seq);
        statements.push(insertEvent(row.id, seq, "model-output-delta", time, row.payload), {
          name: "update_task",
          text: "UPDATE tasks SET state = 'running', updated_at = $1, last_seq = $2, answer = NULL, error = NULL WHERE id = $3",
          values: [time, seq, row.id],
        });
      }
      statements.push("COMMIT");
      await send(statements);
    };
    return await timed(async () => {
      let pending: Array<{ id: string; payload: string }> = [];
      for (let i = 0; i < EVENTS; i += 1) {
        pending.push({ id: tasks[i % TASKS]!, payload: JSON.stringify({ role: "thinker", purpose: "draft", text: `${TEXT}${i}` }) });
        if (pending.length === perCommit) {
          await commit(pending);
          pending = [];
          await yieldTurn();
        }
      }
      if (pending.length > 0) await commit(pending);
    });
  } finally {
    await client.end();
  }
}

function summary(samples: number[]): { median: number; min: number; max: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  return { median: sorted[Math.floor(sorted.length / 2)]!, min: sorted[0]!, max: sorted.at(-1)! };
}

const format = (figures: { median: number; min: number; max: number }) => `${figures.median.toFixed(1)} µs [${figures.min.toFixed(1)}–${figures.max.toFixed(1)}]`;

const childScript = benchScript("workers-child");

/** Runs TASKS tasks over `workers` worker processes on `backend`; tasks per second from "go" to the last one done. */
async function throughput(backend: "postgres" | "sqlite", workers: number, url: string | null): Promise<number> {
  const total = Number(values.tasks);
  const dirs: string[] = [];
  const workspace = mkdtempSync(join(tmpdir(), "ducklm-bench-ws-"));
  dirs.push(workspace);
  writeFileSync(join(workspace, "notes.md"), "# Notes\nducks like bread\n");
  const children = Array.from({ length: workers }, (_, index) => {
    const home = mkdtempSync(join(tmpdir(), "ducklm-bench-home-"));
    dirs.push(home);
    const count = Math.floor(total / workers) + (index < total % workers ? 1 : 0);
    const child = spawn(process.execPath, [...childScript.execArgv, childScript.file, home, workspace, String(count)], {
      stdio: ["pipe", "pipe", "inherit"],
      env: { ...process.env, DUCKLM_BENCH_BACKEND: backend, ...(url ? { DUCKLM_POSTGRES_URL: url } : {}) },
    });
    const lines = createInterface({ input: child.stdout! });
    const ready = new Promise<void>((resolve) => lines.on("line", (line) => line === "ready" && resolve()));
    const done = new Promise<number>((resolve, reject) => {
      lines.on("line", (line) => {
        if (!line.startsWith("done ")) return;
        const [, , completed] = line.split(" ");
        if (Number(completed) !== count) reject(new Error(`a worker completed ${completed} of ${count} tasks`));
        resolve(performance.now());
      });
      child.on("exit", (code) => code !== 0 && reject(new Error(`a worker exited with ${code}`)));
    });
    return { child, ready, done };
  });
  try {
    await Promise.all(children.map((child) => child.ready));
    const started = performance.now();
    for (const { child } of children) child.stdin!.write("go\n");
    const ended = Math.max(...(await Promise.all(children.map((child) => child.done))));
    await Promise.all(children.map(({ child }) => new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.on("exit", resolve)))));
    return total / ((ended - started) / 1000);
  } finally {
    for (const { child } of children) child.kill();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
}

const server = await startTestPostgres();
try {
  console.log(`workers: event append on PostgreSQL, ${EVENTS} events over ${TASKS} tasks, ${ROUNDS} rounds alternating who goes first, fsync off, a turn of the event loop after each commit`);
  for (const perCommit of [1, 100]) {
    const samples = { duck: [] as Sample[], plain: [] as Sample[], pipelined: [] as Sample[] };
    const contenders: Array<[keyof typeof samples, (url: string) => Promise<Sample>]> = [
      ["duck", (url) => duckLM(url, perCommit)],
      ["plain", (url) => rawPg(url, perCommit, false)],
      ["pipelined", (url) => rawPg(url, perCommit, true)],
    ];
    for (let round = 0; round < ROUNDS; round += 1) {
      // Each round starts with the next contender, on fresh databases.
      for (let turn = 0; turn < contenders.length; turn += 1) {
        const [name, run] = contenders[(round + turn) % contenders.length]!;
        samples[name].push(await run(server.createDatabase()));
      }
    }
    const wall = (name: keyof typeof samples) => summary(samples[name].map((sample) => sample.wallUs));
    const cpu = (name: keyof typeof samples) => summary(samples[name].map((sample) => sample.cpuUs));
    const ratio = (name: "plain" | "pipelined") => ({ wall: wall(name).median / wall("duck").median, cpu: cpu(name).median / cpu("duck").median });
    const plain = ratio("plain");
    const pipelined = ratio("pipelined");
    console.log(`  ${perCommit === 1 ? "one event per commit" : `${perCommit} events per commit`}`);
    console.log(`    DuckLM TaskStore         wall ${format(wall("duck"))}   CPU ${format(cpu("duck"))} per event (CPU: this process, all threads)`);
    console.log(`    raw pg, one at a time    wall ${format(wall("plain"))}   CPU ${format(cpu("plain"))} per event`);
    console.log(`    raw pg, pipelined        wall ${format(wall("pipelined"))}   CPU ${format(cpu("pipelined"))} per event`);
    console.log(`    DuckLM's throughput as a share of raw pg awaited one at a time: wall ${plain.wall.toFixed(2)}, CPU ${plain.cpu.toFixed(2)} (target ≥ 0.80 wall: ${plain.wall >= 0.8 ? "met" : "NOT met"})`);
    console.log(`    DuckLM's throughput as a share of raw pg pipelined: wall ${pipelined.wall.toFixed(2)}, CPU ${pipelined.cpu.toFixed(2)} (target ≥ 0.80 wall: ${pipelined.wall >= 0.8 ? "met" : "NOT met"})`);
  }

  const setups: Array<{ name: string; backend: "postgres" | "sqlite"; workers: number }> = [
    { name: "SQLite, 1 process", backend: "sqlite", workers: 1 },
    { name: "PostgreSQL, 1 worker", backend: "postgres", workers: 1 },
    { name: "PostgreSQL, 2 workers", backend: "postgres", workers: 2 },
    { name: "PostgreSQL, 4 workers", backend: "postgres", workers: 4 },
  ];
  const rates = new Map<string, number[]>(setups.map((setup) => [setup.name, []]));
  const throughputRounds = Math.max(3, Math.min(ROUNDS, 5));
  console.log(`workers: throughput of ${values.tasks} no-model tasks (read a file, run a command, write a memory), up to 4 at once per worker, ${throughputRounds} rounds alternating the order`);
  for (let round = 0; round < throughputRounds; round += 1) {
    for (let turn = 0; turn < setups.length; turn += 1) {
      const setup = setups[(round + turn) % setups.length]!;
      rates.get(setup.name)!.push(await throughput(setup.backend, setup.workers, setup.backend === "postgres" ? server.createDatabase() : null));
    }
  }
  const sqliteRate = summary(rates.get("SQLite, 1 process")!).median;
  for (const setup of setups) {
    const figures = summary(rates.get(setup.name)!);
    console.log(`  ${setup.name.padEnd(24)} ${figures.median.toFixed(1)} tasks/s [${figures.min.toFixed(1)}–${figures.max.toFixed(1)}]   ${(figures.median / sqliteRate).toFixed(2)}× SQLite`);
  }
} finally {
  server.stop();
}
