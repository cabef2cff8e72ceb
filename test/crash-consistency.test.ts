import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkDatabase } from "./helpers/database-checks.js";
import { makeTempDir } from "./helpers/test-runtime.js";

// Resolved here, because `--import tsx` would be looked up from the child's working directory.
const tsxLoader = import.meta.resolve("tsx");

/** A small seeded generator (mulberry32), so every run kills at the same moments. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function runAndKill(home: string, workspace: string, killAfterMs: number): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, ["--import", tsxLoader, "test/fixtures/busy-runtime-child.ts", home, workspace], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout.on("data", (chunk: Buffer) => {
      if (chunk.toString().includes("ready")) setTimeout(() => child.kill("SIGKILL"), killAfterMs);
    });
    child.on("exit", (_code, signal) => {
      if (signal === "SIGKILL") resolvePromise();
      else reject(new Error(`child ended on its own before the kill: ${stderr}`));
    });
  });
}

describe("a process killed between transitions", () => {
  it("leaves a consistent database every time (seeded kill moments)", async () => {
    const random = seeded(20261129);
    const home = makeTempDir();
    const workspace = makeTempDir("ducklm-ws-");
    try {
      for (let run = 0; run < 6; run += 1) {
        const killAfter = 20 + Math.floor(random() * 400);
        await runAndKill(home, workspace, killAfter);
        const report = checkDatabase(join(home, "ducklm.sqlite3"));
        expect(report.integrity, `run ${run}, killed after ${killAfter} ms`).toBe("ok");
        expect(report.checkpointsWithoutEvent).toBe(0);
        expect(report.tasksWithGaps).toEqual([]);
        expect(report.rowsOutOfStep).toEqual([]);
        expect(report.projectionsDiffering).toEqual([]);
        expect(report.events).toBeGreaterThan(0);
      }
    } finally {
      rmSync(home, { recursive: true, force: true });
      rmSync(workspace, { recursive: true, force: true });
    }
  }, 120_000);
});
