// DuckLM on PostgreSQL, measured against raw node-postgres in the same run.
//
// Event append: what it costs DuckLM's TaskStore on PostgreSQL to record an event, against the `pg`
// client doing the same writes on the same schema: per event an INSERT into `events` and an UPDATE of
// the task's row, committed one event per transaction or a hundred together. The raw side is as fast
// as `pg` allows: one connection in pipeline mode, every statement of a commit sent at once. DuckLM's
// side also builds each task's state and publishes every event on its bus, as it does for real.
// Rounds alternate which side goes first; both yield to the event loop after every commit.
//
// The server is a throwaway cluster on loopback started by this bench, with fsync off for both sides:
// the figures are the clients' work and the round trips, not the disk.
//
//   npm run bench:workers [-- --events 2000 --rounds 5]
import { parseArgs } from "node:util";
import pg from "pg";
import pino from "pino";
import { openPostgresStores } from "../src/state/open-stores.js";
import { timeOrderedId } from "../src/utils/time-ordered-id.js";
import { startTestPostgres } from "../test/helpers/postgres-server.js";

const { values } = parseArgs({ options: { events: { type: "string", default: "2000" }, rounds: { type: "string", default: "5" } } });
const EVENTS = Number(values.events);
const ROUNDS = Number(values.rounds);
const TASKS = 20;
const TEXT = "a chunk of streamed model output, about the length one token batch has ";

const yieldTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

interface Sample {
  wallUs: number;
  cpuUs: number;
}

async function timed(write: () => Promise<void>): Promise<Sample> {
  const cpu = process.cpuUsage();
  const started = process.hrtime.bigint();
  await write();
  const wallUs = Number(process.hrtime.bigint() - started) / 1_000;
  const used = process.cpuUsage(cpu);
  return { wallUs: wallUs / EVENTS, cpuUs: (used.user + used.system) / EVENTS };
}

async function duckLM(url: string, perCommit: number): Promise<Sample> {
  const stores = openPostgresStores(url, { logger: pino({ level: "silent" }) });
  try {
    const store = stores.tasks;
    let seen = 0;
    stores.bus.subscribeAll(() => void (seen += 1));
    const tasks = Array.from({ length: TASKS }, (_, i) => store.createTask({ text: `task ${i}`, workspace: "/w" }, { durable: true }).task_id);
    for (const id of tasks) store.append(id, "task-started", {}, { durable: true });
    await yieldTurn();
    const sample = await timed(async () => {
      for (let i = 0; i < EVENTS; i += 1) {
        const last = (i + 1) % perCommit === 0;
        store.append(tasks[i % TASKS]!, "model-output-delta", { role: "thinker", purpose: "draft", text: `${TEXT}${i}` }, { durable: last });
        if (last) await yieldTurn();
      }
      store.flush();
    });
    if (seen < EVENTS) throw new Error(`the bus delivered ${seen} of ${EVENTS} events`);
    return sample;
  } finally {
    stores.database.close();
  }
}

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
} finally {
  server.stop();
}
