import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPostgres, type TestPostgres } from "../helpers/postgres-server.js";
import { createTestRuntime } from "../helpers/test-runtime.js";

const tsxLoader = import.meta.resolve("tsx");

let postgres: TestPostgres;
beforeAll(async () => {
  postgres = await startTestPostgres();
}, 60_000);
afterAll(() => postgres?.stop());

describe("pruning blobs on a PostgreSQL database several workers share", () => {
  it("keeps a long text that another worker is referring to anew in a transaction not yet committed", async () => {
    const url = postgres.createDatabase();
    const runtime = createTestRuntime({ runtime: { storage: { backend: "postgres" } }, env: { DUCKLM_POSTGRES_URL: url } });
    try {
      const output = "a long line a tool printed\n".repeat(1_000);
      writeFileSync(join(runtime.workspace, "big.txt"), output);
      const textFile = join(runtime.home, "big-copy.txt");
      writeFileSync(textFile, output);
      // The old task holds the only reference to the text; the new one has none yet.
      const old = await runtime.loop.submit({ text: "read file big.txt" }).done;
      const current = await runtime.loop.submit({ text: "tell me a joke" }).done;
      const db = runtime.db;
      const hashes = db.prepare("SELECT hash FROM blob_refs WHERE task_id = ?").pluck().all(old.task_id) as string[];
      expect(hashes.length).toBeGreaterThan(0);
      expect(db.prepare("SELECT count(*) AS n FROM blob_refs WHERE task_id = ?").get(current.task_id)).toEqual({ n: 0 });

      // Another worker refers the current task to the same text, and keeps its transaction open for a while.
      const writer = spawn(process.execPath, ["--import", tsxLoader, "test/fixtures/blob-writer-child.ts", current.task_id, textFile, "1500"], {
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, DUCKLM_POSTGRES_URL: url },
      });
      let stderr = "";
      writer.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => writer.on("exit", resolve));
      await new Promise<void>((resolve, reject) => {
        writer.stdout!.on("data", (chunk: Buffer) => chunk.toString().includes("referred") && resolve());
        void exited.then((code) => reject(new Error(`the writer exited (${code}) before it referred: ${stderr}`)));
      });

      // Meanwhile this worker prunes the old task, the last one it can see referring to the text.
      const pruned = runtime.store.prune({ olderThan: null, keepNewest: 1, action: "delete", archiveDir: join(runtime.home, "archive") });
      expect(pruned.pruned).toEqual([old.task_id]);
      expect(await exited, stderr).toBe(0);

      // Every reference names a text that is there, and the current task's reads back whole.
      expect(db.prepare("SELECT count(*) AS n FROM blob_refs r WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.hash = r.hash)").get()).toEqual({ n: 0 });
      expect(db.prepare("SELECT hash FROM blob_refs WHERE task_id = ?").pluck().all(current.task_id)).toEqual(hashes);
      expect(db.prepare("SELECT length(text) AS n FROM blobs WHERE hash = ?").get(hashes[0])).toEqual({ n: output.length });
    } finally {
      await runtime.dispose();
    }
  }, 60_000);
});
