// One worker of bench/workers: a runtime on the store the environment names, which waits for "go"
// on its standard input, then runs COUNT tasks of a fixed mix without a model, and prints how long
// they took. DUCKLM_BENCH_BACKEND=postgres (with DUCKLM_POSTGRES_URL) or sqlite.
//   workers-child.ts HOME WORKSPACE COUNT
import { createInterface } from "node:readline";
import { RuntimeConfigSchema } from "../src/config/config-schemas.js";
import { BUNDLED_CONFIG_DIR, loadConfig } from "../src/config/load-config.js";
import { createRuntime } from "../src/runtime/create-runtime.js";

const [home, workspace, countText] = process.argv.slice(2);
if (!home || !workspace || !countText) throw new Error("usage: workers-child HOME WORKSPACE COUNT");
const bundled = loadConfig(BUNDLED_CONFIG_DIR);
const runtimeConfig = RuntimeConfigSchema.parse({
  ...bundled.runtime,
  storage: { ...bundled.runtime.storage, backend: process.env.DUCKLM_BENCH_BACKEND === "postgres" ? "postgres" : "sqlite" },
  scheduler: { ...bundled.runtime.scheduler, max_running_tasks: 4, max_queued_tasks: 10_000 },
});
const runtime = createRuntime({ home, workspace, config: { ...bundled, runtime: runtimeConfig }, models: null, checkPermissionExamples: false });
await runtime.start({ adoptOrphans: true });
// The mix: a file read, a command, a memory written — what a no-model task does.
const MIX = ["read file notes.md", "run `echo hello`", "remember that the heron nests by the mill"];
process.stdout.write("ready\n");
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (line !== "go") continue;
  const started = performance.now();
  const outcomes = await Promise.all(Array.from({ length: Number(countText) }, (_, i) => runtime.loop.submit({ text: MIX[i % MIX.length]! }).done));
  const elapsed = performance.now() - started;
  const completed = outcomes.filter((outcome) => outcome.state === "completed").length;
  process.stdout.write(`done ${elapsed.toFixed(1)} ${completed}\n`);
  break;
}
lines.close();
await runtime.close();
