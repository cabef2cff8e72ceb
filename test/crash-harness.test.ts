import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import type { DuckEvent } from "../src/contracts/index.js";
import { seededRandom } from "../src/utils/seeded-random.js";
import { checkDatabase } from "./helpers/database-checks.js";
import { checkCrashedTasks } from "./helpers/crash-checks.js";
import { makeTempDir } from "./helpers/test-runtime.js";

const tsxLoader = import.meta.resolve("tsx");
const RUNS = Number(process.env.DUCKLM_CRASH_RUNS ?? 50);

interface ChildRun {
  acks: Array<[string, number]>;
  killed: boolean;
}

function runChild(args: string[], killAfterMs: number | null): Promise<ChildRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", tsxLoader, "test/fixtures/crash-child.ts", ...args], { stdio: ["ignore", "pipe", "pipe"] });
    const acks: Array<[string, number]> = [];
    let buffer = "";
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout.on("data", (chunk: Buffer) => {
      buffer += chunk.toString();
      const lines = buffer.split("\n");
      buffer = lines.pop() ?? "";
      for (const line of lines) {
        if (line.startsWith("ack ")) {
          const [, task, seq] = line.split(" ");
          acks.push([task!, Number(seq)]);
        } else if (line === "resumed" && killAfterMs !== null) {
          setTimeout(() => child.kill("SIGKILL"), killAfterMs);
        }
      }
    });
    child.on("exit", (code, signal) => {
      if (signal === "SIGKILL") resolve({ acks, killed: true });
      else if (code === 0) resolve({ acks, killed: false });
      else reject(new Error(`child failed (${code ?? signal}): ${stderr}`));
    });
  });
}

describe("crash harness: SIGKILL at random moments", () => {
  it(`keeps every acknowledged event, gap-free logs, consistent state, and never repeats an effect unasked (${RUNS} seeded runs)`, async () => {
    // The same kill moments on every run of the suite.
    const random = seededRandom(7_2026);
    const home = makeTempDir("ducklm-crash-home-");
    const workspace = makeTempDir("ducklm-crash-ws-");
    const markers = makeTempDir("ducklm-crash-markers-");
    const acked: Array<[string, number]> = [];
    try {
      for (let run = 0; run < RUNS; run += 1) {
        const killAfter = Math.floor(random() * 250);
        const result = await runChild([home, workspace, markers, String(run)], killAfter);
        expect(result.killed, `run ${run}`).toBe(true);
        acked.push(...result.acks);
        const report = checkDatabase(join(home, "ducklm.sqlite3"));
        expect(report.integrity, `run ${run}`).toBe("ok");
        expect(report.checkpointsWithoutEvent, `run ${run}`).toBe(0);
        expect(report.tasksWithGaps, `run ${run}`).toEqual([]);
        expect(report.rowsOutOfStep, `run ${run}`).toEqual([]);
        expect(report.projectionsDiffering, `run ${run}`).toEqual([]);
      }
      // A last start finishes whatever the last kill interrupted.
      await runChild([home, workspace, markers, "final", "--finish"], null);

      const db = new Database(join(home, "ducklm.sqlite3"), { readonly: true });
      const stored = new Set((db.prepare("SELECT task_id || ' ' || seq AS k FROM events").all() as Array<{ k: string }>).map((row) => row.k));
      const lost = acked.filter(([task, seq]) => !stored.has(`${task} ${seq}`));
      expect(lost).toEqual([]);
      const states = db.prepare("SELECT state, COUNT(*) AS n FROM tasks GROUP BY state").all() as Array<{ state: string; n: number }>;
      expect(states.filter((row) => !["completed", "failed"].includes(row.state))).toEqual([]);
      const events = (db.prepare("SELECT task_id, seq, type, time, payload FROM events ORDER BY task_id, seq").all() as Array<Omit<DuckEvent, "payload"> & { payload: string }>).map(
        (row) => ({ ...row, payload: JSON.parse(row.payload) }) as DuckEvent,
      );
      db.close();

      // Markers written twice only after asking, no question about a reader, and every task replays exactly.
      const byTask = new Map<string, DuckEvent[]>();
      for (const event of events) byTask.set(event.task_id, [...(byTask.get(event.task_id) ?? []), event]);
      const { repeated, unknownOutcome } = await checkCrashedTasks(byTask, markers);
      expect(byTask.size).toBeGreaterThanOrEqual(RUNS);
      // The tasks iterate, so kills also fell between one decision of the agent loop and the next.
      const iterated = [...byTask.values()].filter((log) => log.some((event) => event.type === "iteration-started")).length;
      expect(iterated).toBeGreaterThanOrEqual(RUNS / 2);
      console.log(`crash harness: ${RUNS} kills, ${byTask.size} tasks (${iterated} iterated), ${acked.length} acknowledged events, ${unknownOutcome} "outcome unknown" question(s), none about a read-only step; ${repeated} step(s) repeated after asking`);
    } finally {
      for (const dir of [home, workspace, markers]) rmSync(dir, { recursive: true, force: true });
    }
  }, 600_000);
});
