// Resident memory of one runtime over many tasks (does it stay bounded?), and database bytes per task
// for a task whose tool returns a large output (how many times is the output stored?).
//
//   npm run bench:soak [-- --tasks 10000 --large 20]
import { benchFolders } from "./bench-stats.js";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { scriptedAgent } from "../test/helpers/scripted-agent.js";
import { createTestRuntime } from "../test/helpers/test-runtime.js";
import { createEchoTool } from "../test/helpers/test-tools.js";
import { sqliteOf } from "../src/storage/open-database.js";

const { values } = parseArgs({ options: { tasks: { type: "string", default: "10000" }, large: { type: "string", default: "20" } } });
const TASKS = Number(values.tasks);
const LARGE = Number(values.large);
const FIRST_MARK = Math.min(1000, TASKS);

const residentMb = () => {
  globalThis.gc?.();
  return process.memoryUsage().rss / 1024 / 1024;
};

async function memorySoak(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "ducklm-soak-"));
  const models = scriptedAgent({ directive: { kind: "tool", tool: "echo", arguments: { text: "quack ".repeat(200) }, reason: "" }, streaming: { chunkSize: 1_000_000 } });
  const runtime = createTestRuntime({ ...benchFolders(dir), tools: [createEchoTool()], models });
  try {
    let atFirstMark = 0;
    const started = Date.now();
    for (let i = 0; i < TASKS; i += 1) {
      const outcome = await runtime.loop.submit({ text: `soak ${i}` }).done;
      if (outcome.state !== "completed") throw new Error(`task ${i} ended ${outcome.state}`);
      // The scripted model keeps every request it got, for tests; that is the bench's, not DuckLM's, memory.
      models.calls.length = 0;
      if (i + 1 === FIRST_MARK) atFirstMark = residentMb();
    }
    const atEnd = residentMb();
    const seconds = (Date.now() - started) / 1000;
    console.log(`  resident memory: ${atFirstMark.toFixed(0)} MB after ${FIRST_MARK} tasks, ${atEnd.toFixed(0)} MB after ${TASKS} (${(atEnd / atFirstMark).toFixed(2)}×; ${(TASKS / seconds).toFixed(0)} tasks/s)`);
    console.log(`  projections held in memory at the end: ${runtime.store.cachedProjections}`);
  } finally {
    await runtime.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function diskPerTask(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "ducklm-soak-disk-"));
  const workspace = mkdtempSync(join(tmpdir(), "ducklm-soak-ws-"));
  const outputBytes = 900_000;
  // Each task reads a different text: identical outputs are stored once across tasks, which would flatter the figure.
  const writeBigFile = (i: number) => writeFileSync(join(workspace, "big.txt"), `task ${i}\n${"ducks like bread\n".repeat(Math.ceil(outputBytes / 17))}`.slice(0, outputBytes));
  writeBigFile(-1);
  const runtime = createTestRuntime({
    home: dir,
    workspace,
    runtime: { tools: { output_cap_bytes: 2_000_000 } },
    models: scriptedAgent({ directive: { kind: "tool", tool: "file_read", arguments: { path: "big.txt" }, reason: "" }, streaming: { chunkSize: 1_000_000 } }),
  });
  const size = () => ["ducklm.sqlite3", "ducklm.sqlite3-wal"].reduce((sum, file) => sum + (statSync(join(dir, file), { throwIfNoEntry: false })?.size ?? 0), 0);
  try {
    if ((await runtime.loop.submit({ text: "warm up" }).done).state !== "completed") throw new Error("the warm-up task failed");
    sqliteOf(runtime.db).pragma("wal_checkpoint(TRUNCATE)");
    const before = size();
    for (let i = 0; i < LARGE; i += 1) {
      writeBigFile(i);
      const outcome = await runtime.loop.submit({ text: `read it ${i}` }).done;
      if (outcome.state !== "completed") throw new Error(`large task ${i} ended ${outcome.state}: ${outcome.error?.message}`);
    }
    sqliteOf(runtime.db).pragma("wal_checkpoint(TRUNCATE)");
    const perTask = (size() - before) / LARGE;
    const ratio = perTask / outputBytes;
    console.log(`  database bytes per task reading a ${(outputBytes / 1000).toFixed(0)} kB file: ${(perTask / 1000).toFixed(0)} kB (${ratio.toFixed(2)}× the output; target ≤ 1.5×: ${ratio <= 1.5 ? "met" : "NOT met"})`);
  } finally {
    await runtime.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(workspace, { recursive: true, force: true });
  }
}

console.log(`soak: ${TASKS} one-tool tasks on one runtime, then ${LARGE} tasks with a large tool output${globalThis.gc ? "" : " (run with --expose-gc for steadier memory figures)"}`);
await memorySoak();
await diskPerTask();
