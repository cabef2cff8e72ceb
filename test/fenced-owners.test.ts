import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { isTerminalTaskState, type DuckEvent } from "../src/contracts/index.js";
import { replayTask } from "../src/replay/replay-task.js";
import { REPO_ROOT } from "./helpers/cli-child.js";
import { checkDatabase } from "./helpers/database-checks.js";
import { startTestPostgres, type TestPostgres } from "./helpers/postgres-server.js";
import { createTestRuntime, makeTempDir, type TestRuntime } from "./helpers/test-runtime.js";
import { COMMAND_STARTED, FENCE_STEP_MS, FENCE_TTL_MS, ownerScript, SIDE_EFFECTS } from "./fixtures/fence-shapes.js";

// An owner frozen past its lease (SIGSTOP: a long GC pause, a suspended laptop, a stopped container)
// while another process takes its task over, then thawed: it must write nothing more, run nothing
// more, and each side effect must happen once — or be asked about only once the first copy has surely
// ended. Tried where it hurts: waiting for the model, during a command, between two steps.

const tsxLoader = import.meta.resolve("tsx");
const children: ChildProcess[] = [];
const runtimes: TestRuntime[] = [];
let postgres: TestPostgres | null = null;

beforeAll(async () => {
  postgres = await startTestPostgres();
}, 60_000);

afterEach(async () => {
  for (const child of children.splice(0)) {
    child.kill("SIGCONT");
    child.kill("SIGKILL");
  }
  for (const runtime of runtimes.splice(0)) await runtime.dispose().catch(() => undefined);
});

afterAll(() => postgres?.stop());

/** Where each shape's owner is frozen: the line of its event stream that says it is there (or, for a command, the file it makes). */
const FREEZE_AT: Record<string, RegExp | null> = {
  model: /^event model-output-started \d+ (draft|directive)/,
  command: null,
  between: /^event model-output-started \d+ critic:one/,
};

async function until<T>(read: () => T | null | undefined | false, timeoutMs: number, what: string | (() => string)): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = read();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${typeof what === "string" ? what : what()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function sideEffects(workspace: string): string[] {
  const file = join(workspace, SIDE_EFFECTS);
  return existsSync(file) ? readFileSync(file, "utf8").trim().split("\n").filter(Boolean) : [];
}

describe.each(["sqlite", "postgres"] as const)("an owner paused past its lease, on %s", (backend) => {
  it.each([
    ["model", ["ran"]],
    ["command", ["ran", "ran"]],
    ["between", ["one", "two"]],
  ] as const)("paused at %s: it writes and runs nothing more once thawed, and each side effect happens once", async (shape, expected) => {
    const home = makeTempDir("ducklm-fence-home-");
    const workspace = makeTempDir("ducklm-fence-ws-");
    const url = backend === "postgres" ? postgres!.createDatabase() : null;
    const owner = spawn(process.execPath, ["--import", tsxLoader, join(REPO_ROOT, "test/fixtures/fence-child.ts"), home, workspace, shape, ...(url ? [url] : [])], { stdio: ["ignore", "pipe", "pipe"] });
    children.push(owner);
    let stderr = "";
    owner.stderr!.on("data", (chunk) => (stderr += chunk));
    const lines: string[] = [];
    createInterface({ input: owner.stdout! }).on("line", (line) => lines.push(line));
    const exited = new Promise<number | null>((resolve) => owner.on("exit", (code) => resolve(code)));
    const taskId = (await until(() => lines.find((line) => line.startsWith("task "))?.slice(5), 30_000, `the owner's task (${stderr})`))!;
    const freezeAt = FREEZE_AT[shape];
    await until(() => (freezeAt ? lines.some((line) => freezeAt.test(line)) : existsSync(join(workspace, COMMAND_STARTED))), 30_000, `the owner to reach ${shape}`);
    owner.kill("SIGSTOP");

    // Another process on the same store takes the task over once the frozen owner's lease runs out.
    const taker = createTestRuntime({
      home,
      workspace,
      models: ownerScript(shape, { slow: false }),
      runtime: { task_leases: { ttl_ms: FENCE_TTL_MS }, timeouts: { step_ms: FENCE_STEP_MS }, retry: { max_step_retries: 0 }, ...(url ? { storage: { backend: "postgres" } } : {}) },
      ...(url ? { env: { ...process.env, DUCKLM_POSTGRES_URL: url } } : {}),
    });
    runtimes.push(taker);
    await taker.start({ adoptOrphans: true });
    const state = () => {
      taker.store.forgetIfChangedElsewhere(taskId);
      return taker.store.projection(taskId);
    };
    const stopped = await until(() => {
      const projection = state();
      return (isTerminalTaskState(projection.state) || projection.state === "awaiting_permission") && projection;
    }, 60_000, () => `the taker to finish the task or ask (state ${state().state}; last events ${taker.store.listEvents(taskId).slice(-4).map((event) => event.type).join(", ")})`);
    if (shape === "command") {
      // Its command ran on while the owner was frozen: the question comes only once that copy has surely ended.
      expect(stopped.state).toBe("awaiting_permission");
      expect(sideEffects(workspace)).toEqual(["ran"]);
      const asked = taker.store.listEvents(taskId).find((event) => event.type === "permission-requested")!;
      const called = taker.store.listEvents(taskId).find((event) => event.type === "tool-called")!;
      expect(Date.parse(asked.time) - Date.parse(called.time)).toBeGreaterThanOrEqual(FENCE_STEP_MS);
      await taker.loop.resolvePermission(taskId, (asked.payload as { request_id: string }).request_id, "allow").done;
    }
    const finished = await until(() => isTerminalTaskState(state().state) && state(), 40_000, "the task to end");
    expect(finished.state).toBe("completed");
    const before = taker.store.listEvents(taskId).length;

    owner.kill("SIGCONT");
    expect(await Promise.race([exited, new Promise((resolve) => setTimeout(() => resolve("still running"), 30_000))]), `the thawed owner's exit (its stderr: ${stderr.slice(-2000)})`).toBe(0);
    // Nothing after the end, no second run of anything, no gap.
    const events: DuckEvent[] = taker.store.listEvents(taskId);
    expect(events.length).toBe(before);
    expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
    expect(events.filter((event) => ["task-completed", "task-failed", "task-cancelled"].includes(event.type))).toHaveLength(1);
    expect(events.at(-1)!.type).toBe("task-completed");
    expect(sideEffects(workspace)).toEqual(expected);
    expect((await replayTask(events, taker.config)).first_difference ?? null).toBeNull();
    if (backend === "sqlite") {
      await taker.close();
      const check = checkDatabase(join(home, "ducklm.sqlite3"));
      expect(check.integrity).toBe("ok");
      expect(check.tasksWithGaps).toEqual([]);
      expect(check.projectionsDiffering).toEqual([]);
    }
  }, 180_000);
});
