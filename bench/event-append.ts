// What it costs DuckLM's TaskStore to record an event, against raw better-sqlite3 doing the same writes
// on the same schema in the same run: per event, an INSERT into `events` and an UPDATE of the task's
// row (its state, last seq and time), committed one event per transaction or a hundred together.
//
// Both sides open a fresh database the way DuckLM does (WAL, synchronous=NORMAL, foreign keys, the
// migrated schema), write the same events (streamed model output, the commonest event there is, so
// neither side writes a snapshot), and yield to the event loop after every commit as a server does.
// DuckLM's side also builds the task's state in memory and publishes every event on its bus, with one
// subscriber: the work a live event costs it. Rounds alternate which side goes first.
//
//   npm run bench:event-append [-- --events 4000 --rounds 5]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import pino from "pino";
import { openStores } from "../src/state/open-stores.js";
import { openDatabase } from "../src/storage/open-database.js";
import { timeOrderedId } from "../src/utils/time-ordered-id.js";
import { APPEND_TASKS, APPEND_TEXT, appendThroughTaskStore, timedPerEvent, yieldTurn, type AppendSample } from "./task-store-append.js";

const { values } = parseArgs({ options: { events: { type: "string", default: "4000" }, rounds: { type: "string", default: "5" } } });
const EVENTS = Number(values.events);
const ROUNDS = Number(values.rounds);
const TASKS = APPEND_TASKS;
const TEXT = APPEND_TEXT;
type Sample = AppendSample;

/** Per event: wall and CPU time (this process, all threads) of writing EVENTS events, `perCommit` to a transaction. */
type Contender = (dir: string, perCommit: number) => Promise<Sample>;

const timed = (write: () => Promise<void>) => timedPerEvent(EVENTS, write);

const duckLM: Contender = (dir, perCommit) => appendThroughTaskStore(openStores(join(dir, "ducklm.sqlite3"), { synchronous: "NORMAL", logger: pino({ level: "silent" }) }), EVENTS, perCommit);

const rawSqlite: Contender = async (dir, perCommit) => {
  const database = openDatabase(join(dir, "raw.sqlite3"), { synchronous: "NORMAL" });
  const db = database.db;
  try {
    const now = () => new Date().toISOString();
    const insertTask = db.prepare("INSERT INTO tasks (id, text, session_id, workspace, state, created_at, updated_at, last_seq) VALUES (?, ?, NULL, ?, 'running', ?, ?, 1)");
    const insertEvent = db.prepare("INSERT INTO events (task_id, seq, type, time, payload) VALUES (?, ?, ?, ?, ?)");
    const updateTask = db.prepare("UPDATE tasks SET state = 'running', updated_at = ?, last_seq = ?, answer = NULL, error = NULL WHERE id = ?");
    const tasks = Array.from({ length: TASKS }, () => timeOrderedId());
    const seqs = new Map<string, number>();
    db.transaction(() => {
      for (const id of tasks) {
        const time = now();
        insertTask.run(id, "task", dir, time, time);
        insertEvent.run(id, 1, "task-received", time, "{}");
        seqs.set(id, 1);
      }
    })();
    await yieldTurn();
    const commit = db.transaction((rows: Array<{ id: string; payload: string }>) => {
      const time = now();
      for (const row of rows) {
        const seq = seqs.get(row.id)! + 1;
        seqs.set(row.id, seq);
        insertEvent.run(row.id, seq, "model-output-delta", time, row.payload);
        updateTask.run(time, seq, row.id);
      }
    });
    return await timed(async () => {
      let pending: Array<{ id: string; payload: string }> = [];
      for (let i = 0; i < EVENTS; i += 1) {
        pending.push({ id: tasks[i % TASKS]!, payload: JSON.stringify({ role: "thinker", purpose: "draft", text: `${TEXT}${i}` }) });
        if (pending.length === perCommit) {
          commit(pending);
          pending = [];
          await yieldTurn();
        }
      }
      if (pending.length > 0) commit(pending);
    });
  } finally {
    database.close();
  }
};

function summary(samples: number[]): { median: number; min: number; max: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  return { median: sorted[Math.floor(sorted.length / 2)]!, min: sorted[0]!, max: sorted.at(-1)! };
}

const format = (figures: { median: number; min: number; max: number }) => `${figures.median.toFixed(1)} µs [${figures.min.toFixed(1)}–${figures.max.toFixed(1)}]`;

console.log(`event-append: ${EVENTS} events over ${TASKS} tasks, ${ROUNDS} rounds alternating who goes first, WAL synchronous=NORMAL, a turn of the event loop after each commit`);
for (const perCommit of [1, 100]) {
  const duck: Sample[] = [];
  const raw: Sample[] = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    const dir = mkdtempSync(join(tmpdir(), "ducklm-bench-append-"));
    try {
      if (round % 2 === 0) {
        duck.push(await duckLM(dir, perCommit));
        raw.push(await rawSqlite(dir, perCommit));
      } else {
        raw.push(await rawSqlite(dir, perCommit));
        duck.push(await duckLM(dir, perCommit));
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const duckWall = summary(duck.map((sample) => sample.wallUs));
  const rawWall = summary(raw.map((sample) => sample.wallUs));
  const duckCpu = summary(duck.map((sample) => sample.cpuUs));
  const rawCpu = summary(raw.map((sample) => sample.cpuUs));
  // Throughput relative to raw: raw's time per event over DuckLM's.
  const wallRatio = rawWall.median / duckWall.median;
  const cpuRatio = rawCpu.median / duckCpu.median;
  console.log(`  ${perCommit === 1 ? "one event per commit" : `${perCommit} events per commit`}`);
  console.log(`    DuckLM TaskStore     wall ${format(duckWall)}   CPU ${format(duckCpu)} per event`);
  console.log(`    raw better-sqlite3   wall ${format(rawWall)}   CPU ${format(rawCpu)} per event`);
  console.log(`    DuckLM's throughput as a share of raw: wall ${wallRatio.toFixed(2)}, CPU ${cpuRatio.toFixed(2)} (target ≥ 0.80: ${Math.min(wallRatio, cpuRatio) >= 0.8 ? "met" : "NOT met"})`);
}
