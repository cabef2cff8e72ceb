// What bench/event-append (SQLite) and bench/workers (PostgreSQL) measure of DuckLM's side alike:
// the TaskStore recording streamed model output, `perCommit` events to a transaction, building each
// task's state and publishing every event on its bus, with a turn of the event loop after each commit.
import type { DuckStores } from "../src/state/open-stores.js";

export interface AppendSample {
  /** Per event, wall time. */
  wallUs: number;
  /** Per event, CPU time of this process, all threads. */
  cpuUs: number;
}

export const APPEND_TEXT = "a chunk of streamed model output, about the length one token batch has ";
export const APPEND_TASKS = 20;

export const yieldTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Runs `write` and returns its wall and CPU time divided over `events`. */
export async function timedPerEvent(events: number, write: () => Promise<void>): Promise<AppendSample> {
  const cpu = process.cpuUsage();
  const started = process.hrtime.bigint();
  await write();
  const wallUs = Number(process.hrtime.bigint() - started) / 1_000;
  const used = process.cpuUsage(cpu);
  return { wallUs: wallUs / events, cpuUs: (used.user + used.system) / events };
}

/** Appends `events` events over APPEND_TASKS tasks through `stores`, and closes them. */
export async function appendThroughTaskStore(stores: DuckStores, events: number, perCommit: number): Promise<AppendSample> {
  try {
    const store = stores.tasks;
    let seen = 0;
    stores.bus.subscribeAll(() => void (seen += 1));
    const tasks = Array.from({ length: APPEND_TASKS }, (_, i) => store.createTask({ text: `task ${i}`, workspace: "/w" }, { durable: true }).task_id);
    for (const id of tasks) store.append(id, "task-started", {}, { durable: true });
    await yieldTurn();
    const sample = await timedPerEvent(events, async () => {
      for (let i = 0; i < events; i += 1) {
        const last = (i + 1) % perCommit === 0;
        store.append(tasks[i % APPEND_TASKS]!, "model-output-delta", { role: "thinker", purpose: "draft", text: `${APPEND_TEXT}${i}` }, { durable: last });
        if (last) await yieldTurn();
      }
      store.flush();
    });
    if (seen < events) throw new Error(`the bus delivered ${seen} of ${events} events`);
    return sample;
  } finally {
    stores.database.close();
  }
}
