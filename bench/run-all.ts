// Runs every benchmark, one at a time (the machine has two cores), and writes what they printed to
// bench/results/: `latest.md` (a table of each target and its verdict, then each bench's full output
// with its conditions) and `latest.json` (the same, for a program). Each bench measures its peer in
// the same run; this only gathers them.
//
//   npm run bench [-- --only agent-loop,event-append] [-- --quick]
//
// `npm run bench` compiles the benches first (bench/build-benches.mjs) and runs them compiled, as
// DuckLM runs from its package.
//
// `--quick` gives each bench smaller sizes (a minute or two in all): for checking that they run, not
// for figures.
import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { join, relative } from "node:path";
import { parseArgs } from "node:util";
import { benchScript, REPO_ROOT } from "./bench-stats.js";

const { values } = parseArgs({ options: { only: { type: "string" }, quick: { type: "boolean", default: false } } });
const root = REPO_ROOT;

interface Bench {
  name: string;
  args: string[];
  quickArgs: string[];
  nodeOptions?: string[];
}

const BENCHES: Bench[] = [
  { name: "agent-loop", args: [], quickArgs: ["--tasks", "10", "--rounds", "3"] },
  { name: "step-overhead", args: [], quickArgs: ["--tasks", "40", "--rounds", "3"] },
  { name: "model-work", args: [], quickArgs: ["--embd", "128", "--blocks", "2", "--ff", "256"] },
  { name: "event-append", args: [], quickArgs: ["--events", "500", "--rounds", "3"] },
  { name: "scaling", args: [], quickArgs: ["--vectors", "2000,5000", "--rounds", "3"] },
  { name: "stream-fanout", args: [], quickArgs: ["--events", "500", "--clients", "1,10", "--rounds", "3"] },
  { name: "memory-recall", args: [], quickArgs: ["--vectors", "5000", "--queries", "200", "--rounds", "3"] },
  { name: "inference", args: [], quickArgs: ["--tokens", "32", "--rounds", "3"] },
  { name: "cli-start", args: [], quickArgs: ["--rounds", "3"] },
  { name: "http-task", args: [], quickArgs: ["--tasks", "50", "--rounds", "3"] },
  { name: "soak", args: [], quickArgs: ["--tasks", "500", "--large", "5"], nodeOptions: ["--expose-gc"] },
  { name: "workers", args: [], quickArgs: ["--events", "300", "--rounds", "3", "--tasks", "30"] },
  { name: "undo-checkpoint", args: [], quickArgs: ["--files", "1000", "--rounds", "3"] },
];

interface BenchResult {
  bench: string;
  command: string;
  exit_code: number | null;
  seconds: number;
  /** The lines that state a target and whether it was met. */
  targets: Array<{ line: string; met: boolean }>;
  output: string;
}

function runBench(bench: Bench): Promise<BenchResult> {
  const script = benchScript(bench.name);
  const args = [...(bench.nodeOptions ?? []), ...script.execArgv, script.file, ...(values.quick ? bench.quickArgs : bench.args)];
  const started = Date.now();
  return new Promise((done) => {
    const child = spawn(process.execPath, args, { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    const keep = (chunk: Buffer) => {
      output += chunk.toString("utf8");
      process.stdout.write(chunk);
    };
    child.stdout.on("data", keep);
    child.stderr.on("data", keep);
    child.on("close", (code) => {
      const targets = output
        .split("\n")
        .filter((line) => /target/i.test(line) && /\bmet\b/.test(line))
        .map((line) => ({ line: line.trim(), met: !/NOT met/.test(line) }));
      done({ bench: bench.name, command: `node ${args.map((arg) => (arg === script.file ? relative(root, arg) : arg)).join(" ")}`, exit_code: code, seconds: (Date.now() - started) / 1000, targets, output });
    });
  });
}

const chosen = values.only ? values.only.split(",").map((name) => name.trim()) : BENCHES.map((bench) => bench.name);
const unknown = chosen.filter((name) => !BENCHES.some((bench) => bench.name === name));
if (unknown.length > 0) {
  console.error(`no benchmark named ${unknown.join(", ")}: choose from ${BENCHES.map((bench) => bench.name).join(", ")}`);
  process.exit(2);
}

const results: BenchResult[] = [];
for (const bench of BENCHES.filter((candidate) => chosen.includes(candidate.name))) {
  console.log(`\n### ${bench.name}`);
  results.push(await runBench(bench));
}

const machine = `${cpus().length} × ${cpus()[0]?.model ?? "unknown CPU"}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node.js ${process.versions.node}`;
const when = new Date().toISOString();
const escapeCell = (text: string) => text.replace(/\|/g, "\\|");
const table = [
  "| bench | target | verdict |",
  "| --- | --- | --- |",
  ...results.flatMap((result) =>
    result.exit_code !== 0
      ? [`| ${result.bench} | (did not finish: exit ${result.exit_code}) | — |`]
      : result.targets.length === 0
        ? [`| ${result.bench} | (no target: figures below) | — |`]
        : result.targets.map((target) => `| ${result.bench} | ${escapeCell(target.line)} | ${target.met ? "met" : "**not met**"} |`),
  ),
];
const markdown = [
  `# Benchmarks${values.quick ? " (quick sizes: for checking, not for figures)" : ""}`,
  "",
  `${when} on ${machine}. Each bench measures its peer in the same run; the full output of each follows the table.`,
  "",
  ...table,
  "",
  ...results.flatMap((result) => [`## ${result.bench}`, "", `\`${result.command}\` (${result.seconds.toFixed(0)} s, exit ${result.exit_code})`, "", "```", result.output.trimEnd(), "```", ""]),
].join("\n");

const folder = join(root, "bench", "results");
mkdirSync(folder, { recursive: true });
writeFileSync(join(folder, "latest.md"), markdown);
writeFileSync(join(folder, "latest.json"), `${JSON.stringify({ when, machine, quick: values.quick, results }, null, 2)}\n`);
console.log(`\n${table.join("\n")}\n\nwritten: bench/results/latest.md and bench/results/latest.json`);
process.exitCode = results.some((result) => result.exit_code !== 0) ? 1 : 0;
