import { spawn, type ChildProcess } from "node:child_process";
import { rmSync } from "node:fs";
import { setTimeout as delay } from "node:timers/promises";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { DuckEvent } from "../src/contracts/index.js";
import { openPostgresStores } from "../src/state/open-stores.js";
import { projectEvents } from "../src/state/task-projection.js";
import { seededRandom } from "../src/utils/seeded-random.js";
import { startTestPostgres, type TestPostgres } from "./helpers/postgres-server.js";
import { startTestServer, type TestServer } from "./helpers/test-server.js";
import { checkCrashedTasks } from "./helpers/crash-checks.js";
import { makeTempDir } from "./helpers/test-runtime.js";

const tsxLoader = import.meta.resolve("tsx");
const WORKERS = 3;
const KILLS = Number(process.env.DUCKLM_WORKER_CRASH_KILLS ?? 30);

let postgres: TestPostgres;
beforeAll(async () => {
  postgres = await startTestPostgres();
}, 60_000);
afterAll(() => postgres?.stop());

interface Worker {
  child: ChildProcess;
  resumed: Promise<void>;
  /** Settles at the next tool call this worker commits: a moment when it is in the middle of a task. */
  nextToolCall(): Promise<void>;
  exited: Promise<{ killed: boolean; stderr: string }>;
}

/** Starts a worker; every event it reports committed is added to `acked`, and each new task is passed to `onTask`. */
function startWorker(url: string, args: string[], acked: Array<[string, number]>, onTask: (taskId: string) => void = () => undefined): Worker {
  const child = spawn(process.execPath, ["--import", tsxLoader, "test/fixtures/worker-crash-child.ts", ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, DUCKLM_POSTGRES_URL: url } });
  let buffer = "";
  let stderr = "";
  let markResumed: () => void = () => undefined;
  const resumed = new Promise<void>((resolve) => (markResumed = resolve));
  const waitingForCall: Array<() => void> = [];
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdout!.on("data", (chunk: Buffer) => {
    buffer += chunk.toString();
    const lines = buffer.split("\n");
    buffer = lines.pop() ?? "";
    for (const line of lines) {
      if (line.startsWith("ack ")) {
        const [, task, seq, type] = line.split(" ");
        acked.push([task!, Number(seq)]);
        if (seq === "1") onTask(task!);
        if (type === "tool-called") for (const wake of waitingForCall.splice(0)) wake();
      } else if (line === "resumed") markResumed();
    }
  });
  const exited = new Promise<{ killed: boolean; stderr: string }>((resolve) => child.on("exit", (_code, signal) => resolve({ killed: signal === "SIGKILL", stderr })));
  return { child, resumed, exited, nextToolCall: () => new Promise<void>((resolve) => waitingForCall.push(resolve)) };
}

/**
 * The seqs of a task's events as a WebSocket client of `server` receives them, from the first, until
 * the task ends; `close` gives up on a stream that is still open. A connection that drops before the
 * end is opened again from the next seq, as the web chat does, and why it dropped is kept: on a busy
 * machine a handshake can fail, and the stream must still be whole and in order across the reconnect.
 */
function watch(server: TestServer, taskId: string): { seqs: number[]; drops: string[]; ended: Promise<boolean>; close(): void } {
  const seqs: number[] = [];
  const drops: string[] = [];
  let socket: WebSocket | null = null;
  let givenUp = false;
  const ended = new Promise<boolean>((resolve) => {
    const connect = () => {
      const since = (seqs.at(-1) ?? 0) + 1;
      const current = new WebSocket(`ws://127.0.0.1:${server.port}/stream/${taskId}?since=${since}`, { headers: { authorization: `Bearer ${server.token}` } });
      socket = current;
      let finished = false;
      let error = "";
      current.on("message", (data) => {
        const message = JSON.parse(String(data)) as { type: string; event?: DuckEvent };
        if (message.type !== "event" || !message.event) return;
        seqs.push(message.event.seq);
        if (message.event.type === "task-completed" || message.event.type === "task-failed") {
          finished = true;
          current.close();
          resolve(true);
        }
      });
      current.on("error", (cause) => (error = cause.message));
      current.on("close", (code, reason) => {
        if (finished || givenUp) return;
        drops.push(`from seq ${since}: closed ${code} ${String(reason)} ${error}`.trim());
        if (drops.length > 5) resolve(false);
        else setTimeout(connect, 200);
      });
    };
    connect();
  });
  return {
    seqs,
    drops,
    ended,
    close: () => {
      givenUp = true;
      (socket as WebSocket | null)?.terminate();
    },
  };
}

describe("crash harness with several workers on one PostgreSQL database", () => {
  it(
    `keeps every acknowledged event and each task's log gap-free, takes over what killed workers left, and never repeats an effect unasked (${WORKERS} workers, ${KILLS} kills)`,
    async () => {
      const url = postgres.createDatabase();
      // The same kill moments and victims on every run of the suite.
      const random = seededRandom(17_2026);
      const workspace = makeTempDir("ducklm-wcrash-ws-");
      const markers = makeTempDir("ducklm-wcrash-markers-");
      const homes = Array.from({ length: WORKERS }, () => makeTempDir("ducklm-wcrash-home-"));
      const acked: Array<[string, number]> = [];
      // A server on the same database that drives nothing (it adopts no orphans and takes no offers):
      // each task, whichever workers run it and however often they are killed, is watched through it.
      const observer = await startTestServer({ runtime: { storage: { backend: "postgres" } }, env: { DUCKLM_POSTGRES_URL: url } });
      const watched = new Map<string, ReturnType<typeof watch>>();
      const onTask = (taskId: string) => {
        if (!watched.has(taskId)) watched.set(taskId, watch(observer, taskId));
      };
      let started = 0;
      const launch = (slot: number) => startWorker(url, [homes[slot]!, workspace, markers, `w${slot}-${started++}`], acked, onTask);
      const workers = homes.map((_, slot) => launch(slot));
      try {
        for (let kill = 0; kill < KILLS; kill += 1) {
          const slot = Math.floor(random() * WORKERS);
          const victim = workers[slot]!;
          await Promise.race([victim.resumed, victim.exited]);
          // In the middle of a task, at a seeded moment after one of its steps began.
          await Promise.race([victim.nextToolCall(), victim.exited, delay(5_000)]);
          await delay(Math.floor(random() * 60));
          victim.child.kill("SIGKILL");
          const ended = await victim.exited;
          expect(ended.killed, `kill ${kill}: the worker had stopped by itself: ${ended.stderr}`).toBe(true);
          workers[slot] = launch(slot);
        }
        for (const worker of workers) worker.child.kill("SIGKILL");
        await Promise.all(workers.map((worker) => worker.exited));
        // One last worker finishes whatever the kills left.
        const finisher = startWorker(url, [homes[0]!, workspace, markers, "final", "--finish"], acked, onTask);
        const finished = await finisher.exited;
        expect(finished.killed).toBe(false);
        expect(finisher.child.exitCode, finished.stderr).toBe(0);

        const stores = openPostgresStores(url, { logger: pino({ level: "silent" }) });
        try {
          const db = stores.database.db;
          const stored = new Set((db.prepare("SELECT task_id || ' ' || seq AS k FROM events").all() as Array<{ k: string }>).map((row) => row.k));
          expect(acked.filter(([task, seq]) => !stored.has(`${task} ${seq}`))).toEqual([]);
          const gaps = db.prepare("SELECT task_id FROM events GROUP BY task_id HAVING MIN(seq) <> 1 OR MAX(seq) <> COUNT(*)").all();
          expect(gaps).toEqual([]);
          const states = db.prepare("SELECT state, COUNT(*) AS n FROM tasks GROUP BY state").all() as Array<{ state: string; n: number }>;
          expect(states.filter((row) => !["completed", "failed"].includes(row.state))).toEqual([]);
          const outOfStep = db.prepare("SELECT t.id FROM tasks t WHERE t.last_seq <> (SELECT MAX(seq) FROM events e WHERE e.task_id = t.id)").all();
          expect(outOfStep).toEqual([]);
          const taskIds = (db.prepare("SELECT id FROM tasks ORDER BY id").all() as Array<{ id: string }>).map((row) => row.id);
          const byTask = new Map<string, DuckEvent[]>(taskIds.map((id) => [id, stores.tasks.listEvents(id)]));
          for (const [taskId, log] of byTask) expect(stores.tasks.loadProjection(taskId), taskId).toEqual(projectEvents(log));

          // Every task's stream on the observing server, live through the kills and takeovers, is its whole log: gap-free, nothing twice.
          expect([...watched.keys()].sort()).toEqual(taskIds);
          const streamsEnded = await Promise.race([Promise.all([...watched.values()].map((stream) => stream.ended)), delay(30_000).then(() => null)]);
          expect(streamsEnded, "a stream did not end within 30 s of the last task").not.toBeNull();
          for (const [taskId, stream] of watched) expect(stream.seqs, `${taskId} (dropped: ${stream.drops.join("; ") || "never"})`).toEqual(byTask.get(taskId)!.map((event) => event.seq));
          const drops = [...watched.values()].flatMap((stream) => stream.drops);

          // Markers written twice only after asking, no question about a reader, and every task, whichever workers drove it, replays exactly.
          const { repeated, unknownOutcome } = await checkCrashedTasks(byTask, markers);
          // Tasks changed hands: some were resumed by a worker other than the one that took them in.
          const takenOver = [...byTask.values()].filter((log) => log.some((event) => event.type === "task-resumed")).length;
          expect(byTask.size).toBeGreaterThanOrEqual(KILLS);
          expect(takenOver).toBeGreaterThan(0);
          console.log(`worker crash harness: ${WORKERS} workers, ${KILLS} kills, ${byTask.size} tasks (${takenOver} taken over), ${acked.length} acknowledged events, each streamed whole to a WebSocket on a server that ran none (${drops.length} connection(s) dropped and opened again${drops.length ? `: ${drops.slice(0, 3).join("; ")}` : ""}), ${unknownOutcome} "outcome unknown" question(s); ${repeated} step(s) repeated after asking`);
        } finally {
          stores.database.close();
        }
      } finally {
        for (const worker of workers) worker.child.kill("SIGKILL");
        for (const stream of watched.values()) stream.close();
        await observer.close();
        for (const dir of [workspace, markers, ...homes]) rmSync(dir, { recursive: true, force: true });
      }
    },
    600_000,
  );
});
