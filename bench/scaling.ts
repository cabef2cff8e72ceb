// Whether DuckLM's costs stay flat as work grows: the cost per unit of work at a small and a large
// size of the same thing, in the same run, and their ratio (target: within 1.5×).
//
// - plan steps: wall time and bytes written (events and snapshots) per step of a plan of 1, 10 and
//   100 steps (scheduler.max_plan_steps raised to 100, and the compiler's max_tokens to what such a
//   plan takes), through the whole runtime with an instant scripted model; the marginal cost of a
//   step (what 100 steps cost beyond 10) against the 10-step plan's own.
// - catch-up: a subscriber reading a task's stored events from the start, per event, at 1,000 and
//   10,000 events.
// - task listing: the newest 50 tasks, per listing, with 1,000 and 10,000 tasks stored.
// - index load: reading the saved vector index at start, per vector, at 10,000 and 100,000 vectors
//   (`--vectors 10000,100000`; building the large one takes a minute or two).
//
// Each figure is the median of 5 rounds.
//
//   npm run bench:scaling [-- --vectors 10000,100000] [--rounds 5]
import { benchFolders } from "./bench-stats.js";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { ExecutionDirective } from "../src/contracts/index.js";
import { BUNDLED_CONFIG_DIR } from "../src/config/load-config.js";
import { VectorIndex } from "../src/memory/vector-index.js";
import { seededRandom } from "../src/utils/seeded-random.js";
import { scriptedAgent } from "../test/helpers/scripted-agent.js";
import { createTestRuntime } from "../test/helpers/test-runtime.js";
import { createEchoTool } from "../test/helpers/test-tools.js";

const { values } = parseArgs({ options: { vectors: { type: "string", default: "10000,100000" }, rounds: { type: "string", default: "5" } } });
const ROUNDS = Number(values.rounds);
const median = (numbers: number[]) => [...numbers].sort((a, b) => a - b)[Math.floor(numbers.length / 2)]!;
const scratch = () => mkdtempSync(join(tmpdir(), "ducklm-bench-scaling-"));

interface Line {
  what: string;
  unit: string;
  small: { size: number; perUnit: number };
  large: { size: number; perUnit: number };
}
const lines: Line[] = [];
const show = (line: Line) => {
  const ratio = line.large.perUnit / line.small.perUnit;
  console.log(
    `  ${line.what.padEnd(34)} ${line.small.size.toString().padStart(7)}: ${line.small.perUnit.toFixed(2).padStart(9)} ${line.unit}   ${line.large.size.toString().padStart(7)}: ${line.large.perUnit.toFixed(2).padStart(9)} ${line.unit}   ratio ${ratio.toFixed(2)} (target ≤ 1.5: ${ratio <= 1.5 ? "met" : "NOT met"})`,
  );
  lines.push(line);
};

/** The bundled config, but with a compiler allowed to write a 100-step plan (about 20,000 characters). */
function configForLongPlans(dir: string): string {
  const configDir = join(dir, "config");
  cpSync(BUNDLED_CONFIG_DIR, configDir, { recursive: true });
  const models = JSON.parse(readFileSync(join(configDir, "models.json"), "utf8")) as { roles: Record<string, { max_tokens: number }> };
  models.roles.json_compiler!.max_tokens = 8192;
  writeFileSync(join(configDir, "models.json"), JSON.stringify(models));
  return configDir;
}

/** One runtime whose every task runs a plan of `steps` echo steps, then answers. */
async function planRun(steps: number): Promise<{ ms: number; bytes: number }> {
  const dir = scratch();
  const plan: ExecutionDirective = {
    kind: "plan",
    goal: "echo in turn",
    steps: Array.from({ length: steps }, (_, i) => ({ id: `s${i + 1}`, kind: "tool" as const, description: `step ${i + 1}`, depends_on: i === 0 ? [] : [`s${i}`], tool: "echo", arguments: { text: `output of step ${i + 1} `.repeat(4) } })),
  };
  const runtime = createTestRuntime({
    ...benchFolders(dir),
    configDir: configForLongPlans(dir),
    models: scriptedAgent({ directive: (_request, view) => (view.decision === 1 ? plan : { kind: "respond", answer: "done" }), streaming: { chunkSize: 1_000_000 } }),
    tools: [createEchoTool()],
    runtime: { storage: { synchronous: "NORMAL" }, scheduler: { max_plan_steps: 100 } },
  });
  try {
    // Warm-up, then the timed tasks.
    for (let i = 0; i < 3; i += 1) await runtime.loop.submit({ text: `warm ${i}` }).done;
    const tasks = Math.max(3, Math.round(150 / steps));
    const before = runtime.store.writeStats();
    const started = performance.now();
    for (let i = 0; i < tasks; i += 1) {
      const outcome = await runtime.loop.submit({ text: `plan ${i}` }).done;
      if (outcome.state !== "completed") throw new Error(`a ${steps}-step plan ended ${outcome.state}: ${outcome.error?.message}`);
    }
    const ms = (performance.now() - started) / tasks;
    const after = runtime.store.writeStats();
    return { ms, bytes: (after.eventBytes - before.eventBytes + after.checkpointBytes - before.checkpointBytes) / tasks };
  } finally {
    await runtime.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function planSteps(): Promise<void> {
  const sizes = [1, 10, 100];
  const runs = new Map<number, Array<{ ms: number; bytes: number }>>(sizes.map((size) => [size, []]));
  for (let round = 0; round < ROUNDS; round += 1) for (const size of round % 2 === 0 ? sizes : [...sizes].reverse()) runs.get(size)!.push(await planRun(size));
  const at = (size: number) => ({ ms: median(runs.get(size)!.map((run) => run.ms)), bytes: median(runs.get(size)!.map((run) => run.bytes)) });
  for (const size of sizes) console.log(`  plan of ${size.toString().padStart(3)} steps: ${at(size).ms.toFixed(2)} ms and ${(at(size).bytes / 1024).toFixed(1)} KiB written per task (${(at(size).ms / size).toFixed(3)} ms, ${(at(size).bytes / size / 1024).toFixed(2)} KiB per step)`);
  // A step's own cost: what the longer plan adds per step beyond the 10-step one, against the 10-step
  // plan's steps beyond the first.
  const marginal = (from: number, to: number, key: "ms" | "bytes") => (at(to)[key] - at(from)[key]) / (to - from);
  show({ what: "plan step: wall time", unit: "ms/step", small: { size: 10, perUnit: marginal(1, 10, "ms") }, large: { size: 100, perUnit: marginal(10, 100, "ms") } });
  show({ what: "plan step: bytes written", unit: "B/step", small: { size: 10, perUnit: marginal(1, 10, "bytes") }, large: { size: 100, perUnit: marginal(10, 100, "bytes") } });
}

async function catchUp(): Promise<void> {
  const dir = scratch();
  const runtime = createTestRuntime({ ...benchFolders(dir), runtime: { storage: { synchronous: "NORMAL" } } });
  try {
    const store = runtime.store;
    const taskOf = (events: number) => {
      const id = store.createTask({ text: `${events} events`, workspace: dir }).task_id;
      for (let seq = 2; seq <= events; seq += 1) store.append(id, "model-output-delta", { role: "thinker", purpose: "draft", text: `chunk ${seq} of streamed output ` });
      store.flush();
      return id;
    };
    const sizes = [1_000, 10_000];
    const tasks = new Map(sizes.map((size) => [size, taskOf(size)]));
    const read = (size: number) =>
      new Promise<number>((done) => {
        const started = performance.now();
        let stop: (() => void) | null = null;
        stop = runtime.bus.subscribe(
          tasks.get(size)!,
          (event) => {
            if (event.seq !== size) return;
            done((performance.now() - started) / size);
            queueMicrotask(() => stop?.());
          },
          { fromSeq: 1 },
        );
      });
    const times = new Map<number, number[]>(sizes.map((size) => [size, []]));
    for (let round = 0; round < ROUNDS; round += 1) for (const size of round % 2 === 0 ? sizes : [...sizes].reverse()) times.get(size)!.push(await read(size));
    show({ what: "catch-up from the first event", unit: "µs/event", small: { size: 1_000, perUnit: median(times.get(1_000)!) * 1000 }, large: { size: 10_000, perUnit: median(times.get(10_000)!) * 1000 } });
  } finally {
    await runtime.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function taskListing(): Promise<void> {
  const perListing = async (tasks: number) => {
    const dir = scratch();
    const runtime = createTestRuntime({ ...benchFolders(dir), runtime: { storage: { synchronous: "NORMAL" } } });
    try {
      const store = runtime.store;
      for (let i = 0; i < tasks; i += 1) {
        const id = store.createTask({ text: `task ${i}`, workspace: dir, ...(i % 3 === 0 ? { session_id: `s${i % 50}` } : {}) }).task_id;
        store.append(id, "task-started", {});
        store.append(id, "answer-completed", { answer: `answer ${i}` });
        store.append(id, "task-completed", { answer: `answer ${i}` });
        if (i % 500 === 0) store.flush();
      }
      store.flush();
      const listings = 200;
      const samples: number[] = [];
      for (let round = 0; round < ROUNDS; round += 1) {
        const started = performance.now();
        for (let i = 0; i < listings; i += 1) if (store.listTasks({ limit: 50 }).length !== 50) throw new Error("listing came back short");
        samples.push(((performance.now() - started) / listings) * 1000);
      }
      return median(samples);
    } finally {
      await runtime.close();
      rmSync(dir, { recursive: true, force: true });
    }
  };
  show({ what: "task listing (newest 50)", unit: "µs/list", small: { size: 1_000, perUnit: await perListing(1_000) }, large: { size: 10_000, perUnit: await perListing(10_000) } });
}

function indexLoad(sizes: number[]): void {
  const DIM = 384;
  const perVector = (count: number) => {
    const dir = scratch();
    try {
      const random = seededRandom(count);
      const vectors = Array.from({ length: count }, () => Float32Array.from({ length: DIM }, () => random() - 0.5));
      const index = new VectorIndex(join(dir, "memory.hnsw"), DIM, "cosine", "bench", 64);
      index.rebuild(vectors.map((vector, i) => ({ id: i + 1, vector })));
      index.save();
      const ids = vectors.map((_, i) => i + 1);
      const samples: number[] = [];
      for (let round = 0; round < ROUNDS; round += 1) {
        const started = performance.now();
        if (!new VectorIndex(join(dir, "memory.hnsw"), DIM, "cosine", "bench", 64).load({ ids })) throw new Error("saved index did not load");
        samples.push(((performance.now() - started) / count) * 1000);
      }
      return median(samples);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  const [small, large] = sizes;
  show({ what: "vector index load", unit: "µs/vector", small: { size: small!, perUnit: perVector(small!) }, large: { size: large!, perUnit: perVector(large!) } });
}

console.log(`scaling: cost per unit of work at a small and a large size, median of ${ROUNDS} rounds`);
await planSteps();
await catchUp();
await taskListing();
const vectorSizes = values.vectors.split(",").map(Number);
if (vectorSizes.length === 2 && vectorSizes.every((size) => Number.isInteger(size) && size > 0)) indexLoad(vectorSizes);
else console.log("  vector index load: skipped (--vectors takes two sizes, like 10000,100000)");
