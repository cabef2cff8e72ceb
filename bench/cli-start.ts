// How long a `ducklm` command takes from spawn to exit, against `node -e 0` (Node's own start), and
// how long `ducklm serve` takes from spawn to its first answer on /health, against a bare Fastify app
// with one /health route, in the same run. Rounds interleave the subjects, so a busy moment of the
// machine hits all of them alike. Each runs once first, unmeasured (the home's database is created
// then). CPU time is the child's user + system time, read from the shell's `times` after it exits.
//
//   npm run bench:cli-start [-- --rounds 9]
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { median, REPO_ROOT, spread } from "./bench-stats.js";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "9" } } });
const ROUNDS = Number(values.rounds);
const TARGET_SECONDS = 0.4;
/** `ducklm run` with no model, against `node -e 0`; and server spawn to /health, against bare Fastify. */
const RUN_TARGET_RATIO = 4;
const SERVE_TARGET_RATIO = 2;
const root = REPO_ROOT;
const bin = join(root, "bin", "ducklm.js");
const home = mkdtempSync(join(tmpdir(), "ducklm-bench-cli-"));
const workspace = mkdtempSync(join(tmpdir(), "ducklm-bench-cli-ws-"));
writeFileSync(join(workspace, "README.md"), "# A workspace\n");
// An empty config folder of its own: every file comes from the bundled defaults.
const configDir = join(home, "config");
mkdirSync(configDir);
const env = { ...process.env, DUCKLM_HOME: home, DUCKLM_CONFIG: configDir, NO_COLOR: "1" };
// The peer of `ducklm serve`: Fastify, as DuckLM's server uses it, answering /health and nothing else.
const bareFastify = join(workspace, "bare-fastify.mjs");
writeFileSync(
  bareFastify,
  `import Fastify from ${JSON.stringify(createRequire(import.meta.url).resolve("fastify"))};
const app = Fastify();
app.get("/health", async () => ({ ok: true }));
await app.listen({ host: "127.0.0.1", port: Number(process.argv[2]) });
`,
);

interface Subject {
  name: string;
  args: string[];
  /** Compared with the target (the 0.4 s); the others are shown for what they cost. */
  targeted: boolean;
}
const SUBJECTS: Subject[] = [
  { name: "node -e 0", args: ["-e", "0"], targeted: false },
  { name: "ducklm --version", args: [bin, "--version"], targeted: true },
  { name: "ducklm tasks", args: [bin, "tasks"], targeted: true },
  { name: 'ducklm run "read file README.md"', args: [bin, "--workspace", workspace, "run", "read file README.md"], targeted: false },
];
const SERVERS: Array<{ name: string; args: (port: number) => string[] }> = [
  { name: "bare Fastify, spawn to /health", args: (port) => [bareFastify, String(port)] },
  { name: "ducklm serve, spawn to /health", args: (port) => [bin, "--workspace", workspace, "serve", "--port", String(port)] },
];

interface Timing {
  wall: number;
  cpu: number;
}

/** The children's CPU seconds as bash's `times` prints them on its second line ("0m0.120s 0m0.030s"). */
function childCpuSeconds(timesOutput: string): number {
  const line = timesOutput.trim().split("\n").at(-1) ?? "";
  return [...line.matchAll(/(\d+)m([\d.]+)s/g)].reduce((sum, match) => sum + Number(match[1]) * 60 + Number(match[2]), 0);
}

function timeOnce(subject: Subject): Timing {
  const started = process.hrtime.bigint();
  // The command runs in bash, whose `times` then reports the CPU of its finished children.
  const result = spawnSync("bash", ["-c", '"$@" >/dev/null; status=$?; times >&2; exit $status', "bash", process.execPath, ...subject.args], { cwd: workspace, env, encoding: "utf8" });
  const wall = Number(process.hrtime.bigint() - started) / 1e9;
  if (result.status !== 0) throw new Error(`${subject.name} exited ${result.status}: ${result.stderr}`);
  return { wall, cpu: childCpuSeconds(result.stderr) };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

/** Spawn to the first 200 from /health, polled every 5 ms; then the server is stopped. */
async function timeServer(server: (typeof SERVERS)[number]): Promise<Timing> {
  const port = await freePort();
  const started = process.hrtime.bigint();
  const child = spawn("bash", ["-c", 'trap \'kill -TERM "$pid" 2>/dev/null\' TERM; "$@" >/dev/null 2>&1 & pid=$!; wait "$pid"; wait "$pid"; times >&2', "bash", process.execPath, ...server.args(port)], { cwd: workspace, env, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let wall: number;
  for (;;) {
    const answered = await fetch(`http://127.0.0.1:${port}/health`).then((response) => response.ok, () => false);
    if (answered) {
      wall = Number(process.hrtime.bigint() - started) / 1e9;
      break;
    }
    if (child.exitCode !== null) throw new Error(`${server.name}: the server exited before answering: ${stderr}`);
    if (Number(process.hrtime.bigint() - started) > 30e9) throw new Error(`${server.name}: no answer on /health within 30 s`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  child.kill("SIGTERM");
  await exited;
  // CPU to the first answer is not separable from the shutdown's; both are small next to the start.
  return { wall, cpu: childCpuSeconds(stderr) };
}

try {
  for (const subject of SUBJECTS) timeOnce(subject);
  for (const server of SERVERS) await timeServer(server);
  const timings = new Map<string, Timing[]>([...SUBJECTS, ...SERVERS].map((subject) => [subject.name, []]));
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const subject of SUBJECTS) timings.get(subject.name)!.push(timeOnce(subject));
    for (const server of SERVERS) timings.get(server.name)!.push(await timeServer(server));
  }
  const walls = (name: string) => timings.get(name)!.map((timing) => timing.wall);
  const cpus = (name: string) => timings.get(name)!.map((timing) => timing.cpu);
  const baseline = median(walls("node -e 0"));
  const baselineCpu = median(cpus("node -e 0"));
  console.log(`cli-start: ${ROUNDS} interleaved rounds, median [min–max] seconds; bin/ducklm.js runs dist/ unless src/ is newer (npm run build)`);
  console.log(`  ${"".padEnd(34)} ${"wall s".padEnd(22)} ${"CPU s".padEnd(22)} wall vs node -e 0`);
  for (const subject of SUBJECTS) {
    const seconds = median(walls(subject.name));
    const verdict = subject.targeted ? `  target ≤ ${TARGET_SECONDS} s: ${seconds <= TARGET_SECONDS ? "met" : "NOT met"}` : "";
    console.log(`  ${subject.name.padEnd(34)} ${seconds.toFixed(3)} ${spread(walls(subject.name))}  ${median(cpus(subject.name)).toFixed(3)} ${spread(cpus(subject.name))}  ${(seconds / baseline).toFixed(1).padStart(5)}×${verdict}`);
  }
  for (const server of SERVERS) {
    console.log(`  ${server.name.padEnd(34)} ${median(walls(server.name)).toFixed(3)} ${spread(walls(server.name))}  ${median(cpus(server.name)).toFixed(3)} ${spread(cpus(server.name))}`);
  }
  const run = 'ducklm run "read file README.md"';
  const runRatio = median(walls(run)) / baseline;
  const runCpuRatio = median(cpus(run)) / baselineCpu;
  console.log(`  target: ducklm run (no model) ≤ ${RUN_TARGET_RATIO}× node -e 0, wall time: ${runRatio.toFixed(2)}× — ${runRatio <= RUN_TARGET_RATIO ? "met" : "NOT met"} (CPU ${runCpuRatio.toFixed(2)}×)`);
  const serveRatio = median(walls(SERVERS[1]!.name)) / median(walls(SERVERS[0]!.name));
  const serveCpuRatio = median(cpus(SERVERS[1]!.name)) / median(cpus(SERVERS[0]!.name));
  console.log(`  target: server spawn to /health ≤ ${SERVE_TARGET_RATIO}× bare Fastify, wall time: ${serveRatio.toFixed(2)}× — ${serveRatio <= SERVE_TARGET_RATIO ? "met" : "NOT met"} (CPU to exit ${serveCpuRatio.toFixed(2)}×)`);
} finally {
  rmSync(home, { recursive: true, force: true });
  rmSync(workspace, { recursive: true, force: true });
}
