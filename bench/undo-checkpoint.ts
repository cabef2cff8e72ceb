// What keeping a workspace for undo costs before a step: DuckLM's checkpoint of a workspace of FILES
// files, first in full, then after a one-file change (the usual case: a step changed a file or two),
// against git itself doing the same in the same run: `git add -A && git commit` in a plain repository
// of a copy of the same workspace. The target is the issue's: a checkpoint after a one-file change
// well under a second, at most twice git's own time (DuckLM runs a few more git commands, to keep
// files over the size limit out and write its own refs).
//
//   npm run bench:undo-checkpoint [-- --files 10000 --rounds 5]
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { WorkspaceCheckpoints } from "../src/undo/workspace-checkpoints.js";
import { median, spread } from "./bench-stats.js";

const { values } = parseArgs({ options: { files: { type: "string", default: "10000" }, rounds: { type: "string", default: "5" } } });
const FILES = Number(values.files);
const ROUNDS = Number(values.rounds);

/** A source tree: FILES files of about 2 KB in folders of 100, and a .gitignore that leaves out a build folder. */
function writeWorkspace(dir: string): void {
  for (let i = 0; i < FILES; i += 1) {
    const folder = join(dir, "src", `module-${Math.floor(i / 100)}`);
    if (i % 100 === 0) mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, `file-${i}.ts`), `export const value${i} = ${i};\n`.repeat(60));
  }
  mkdirSync(join(dir, "build"));
  writeFileSync(join(dir, "build", "out.js"), "ignored\n");
  writeFileSync(join(dir, ".gitignore"), "build/\n");
}

const git = (cwd: string, args: string[]) => execFileSync("git", ["-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "gc.auto=0", "-c", "maintenance.auto=false", ...args], { cwd, stdio: "ignore" });

function timed(work: () => void): number {
  const started = process.hrtime.bigint();
  work();
  return Number(process.hrtime.bigint() - started) / 1e6;
}

async function timedAsync(work: () => Promise<unknown>): Promise<number> {
  const started = process.hrtime.bigint();
  await work();
  return Number(process.hrtime.bigint() - started) / 1e6;
}

const dir = mkdtempSync(join(tmpdir(), "ducklm-bench-undo-"));
try {
  const workspace = join(dir, "workspace");
  const peerWorkspace = join(dir, "peer");
  mkdirSync(workspace);
  writeWorkspace(workspace);
  cpSync(workspace, peerWorkspace, { recursive: true });
  git(peerWorkspace, ["init", "-q"]);

  const checkpoints = new WorkspaceCheckpoints(join(dir, "home"), { maxFileBytes: 10 * 1024 * 1024 });
  let seq = 0;
  const firstOurs = await timedAsync(() => checkpoints.snapshot(workspace, "bench", (seq += 1), "first"));
  const firstPeer = timed(() => {
    git(peerWorkspace, ["add", "-A"]);
    git(peerWorkspace, ["commit", "-q", "-m", "first"]);
  });

  const ours: number[] = [];
  const peer: number[] = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    const changed = `src/module-${round % 10}/file-${round * 100 + 7}.ts`;
    // Alternating who goes first, so that neither always finds the page cache warmed by the other.
    const runOurs = async () => {
      writeFileSync(join(workspace, changed), `export const changed = ${round};\n`);
      ours.push(await timedAsync(() => checkpoints.snapshot(workspace, "bench", (seq += 1), `round ${round}`)));
    };
    const runPeer = () => {
      writeFileSync(join(peerWorkspace, changed), `export const changed = ${round};\n`);
      peer.push(
        timed(() => {
          git(peerWorkspace, ["add", "-A"]);
          git(peerWorkspace, ["commit", "-q", "-m", `round ${round}`]);
        }),
      );
    };
    if (round % 2 === 0) {
      await runOurs();
      runPeer();
    } else {
      runPeer();
      await runOurs();
    }
  }

  const oursMs = median(ours);
  const peerMs = median(peer);
  const ratio = oursMs / peerMs;
  console.log(`undo checkpoint of a workspace of ${FILES} files (${ROUNDS} rounds after a one-file change; peer: git add -A && git commit, same run)`);
  console.log(`  first checkpoint: DuckLM ${firstOurs.toFixed(0)} ms, git ${firstPeer.toFixed(0)} ms`);
  console.log(`  after a one-file change: DuckLM ${oursMs.toFixed(1)} ms ${spread(ours, 1)}, git ${peerMs.toFixed(1)} ms ${spread(peer, 1)}`);
  console.log(`    DuckLM's time as a multiple of git's: ${ratio.toFixed(2)} (target: under 1000 ms and ≤ 2.00× git: ${oursMs < 1000 && ratio <= 2 ? "met" : "NOT met"})`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
