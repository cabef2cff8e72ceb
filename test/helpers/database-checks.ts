import Database from "better-sqlite3";
import { TaskStore } from "../../src/state/task-store.js";
import { EventStore } from "../../src/events/event-store.js";
import { EventBus } from "../../src/events/event-bus.js";
import { projectEvents } from "../../src/state/task-projection.js";
import pino from "pino";

export interface ConsistencyReport {
  integrity: string;
  tasks: number;
  events: number;
  checkpointsWithoutEvent: number;
  tasksWithGaps: string[];
  rowsOutOfStep: string[];
  projectionsDiffering: string[];
}

/** Everything a crash must never break: integrity, checkpoints with their events, gap-free seq, state = projection. */
export function checkDatabase(file: string): ConsistencyReport {
  const db = new Database(file);
  try {
    const integrity = db.pragma("integrity_check", { simple: true }) as string;
    const tasks = db.prepare("SELECT id, last_seq, state FROM tasks").all() as Array<{ id: string; last_seq: number; state: string }>;
    const events = (db.prepare("SELECT COUNT(*) AS n FROM events").get() as { n: number }).n;
    const checkpointsWithoutEvent = (
      db.prepare("SELECT COUNT(*) AS n FROM checkpoints c LEFT JOIN events e ON e.task_id = c.task_id AND e.seq = c.seq WHERE e.id IS NULL").get() as { n: number }
    ).n;
    const eventStore = new EventStore(db);
    const store = new TaskStore(db, eventStore, new EventBus(() => [], pino({ level: "silent" })));
    const tasksWithGaps: string[] = [];
    const rowsOutOfStep: string[] = [];
    const projectionsDiffering: string[] = [];
    for (const task of tasks) {
      const list = eventStore.list(task.id);
      if (list.some((event, index) => event.seq !== index + 1)) tasksWithGaps.push(task.id);
      const fromEvents = projectEvents(list);
      if (task.last_seq !== list.length || task.state !== fromEvents.state) rowsOutOfStep.push(task.id);
      if (JSON.stringify(store.loadProjection(task.id)) !== JSON.stringify(fromEvents)) projectionsDiffering.push(task.id);
    }
    return { integrity, tasks: tasks.length, events, checkpointsWithoutEvent, tasksWithGaps, rowsOutOfStep, projectionsDiffering };
  } finally {
    db.close();
  }
}
