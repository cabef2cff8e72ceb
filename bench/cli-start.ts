// How long a `ducklm` command takes from spawn to exit, against `node -e 0` (Node's own start) in the
// same run. Rounds interleave the commands, so a busy moment of the machine hits all of them alike.
// Each command runs once first, unmeasured (the home's database is created then).
//
//   npm run bench:cli-start [-- --rounds 9]
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "9" } } });
const ROUNDS = Number(values.rounds);
const TARGET_SECONDS = 0.4;
const root = join(import.meta.dirname, "..");
const bin = join(root, "bin", "ducklm.js");
const home = mkdtempSync(join(tmpdir(), "ducklm-bench-cli-"));
const workspace = mkdtempSync(join(tmpdir(), "ducklm-bench-cli-ws-"));
writeFileSync(join(workspace, "README.md"), "# A workspace\n");
const env = { ...process.env, DUCKLM_HOME: home, DUCKLM_CONFIG: join(home, "config"), NO_COLOR: "1" };

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

function timeOnce(subject: Subject): number {
  const started = process.hrtime.bigint();
  const result = spawnSync(process.execPath, subject.args, { cwd: workspace, env, encoding: "utf8" });
  const wall = Number(process.hrtime.bigint() - started) / 1e9;
  if (result.status !== 0) throw new Error(`${subject.name} exited ${result.status}: ${result.stderr}`);
  return wall;
}

function median(numbers: number[]): number {
  const sorted = [...numbers].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

try {
  for (const subject of SUBJECTS) timeOnce(subject);
  const walls = new Map<string, number[]>(SUBJECTS.map((subject) => [subject.name, []]));
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const subject of SUBJECTS) walls.get(subject.name)!.push(timeOnce(subject));
  }
  const baseline = median(walls.get("node -e 0")!);
  console.log(`cli-start: ${ROUNDS} interleaved rounds (median wall time, spawn to exit); bin/ducklm.js runs dist/ unless src/ is newer (npm run build)`);
  for (const subject of SUBJECTS) {
    const seconds = median(walls.get(subject.name)!);
    const verdict = subject.targeted ? `  target ≤ ${TARGET_SECONDS} s: ${seconds <= TARGET_SECONDS ? "met" : "NOT met"}` : "";
    console.log(`  ${subject.name.padEnd(34)} ${seconds.toFixed(3)} s   ${(seconds / baseline).toFixed(1).padStart(5)}× node -e 0${verdict}`);
  }
} finally {
  rmSync(home, { recursive: true, force: true });
  rmSync(workspace, { recursive: true, force: true });
}
