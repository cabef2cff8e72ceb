import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { afterEach, describe, expect, it } from "vitest";
import { TaskLeases } from "../src/state/task-leases.js";
import { checkDatabase } from "./helpers/database-checks.js";
import { codeOf } from "./helpers/error-codes.js";
import { ofType } from "./helpers/event-payloads.js";
import { createTestRuntime, makeTempDir, useTestRuntimes } from "./helpers/test-runtime.js";
import { createEchoTool } from "./helpers/test-tools.js";
import { join } from "node:path";
import { hostname } from "node:os";
import { scriptedAgent } from "./helpers/scripted-agent.js";

const tsxLoader = import.meta.resolve("tsx");
const setup = useTestRuntimes(afterEach);
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill("SIGKILL");
});

/** Another DuckLM process on `home` running one slow task; resolves with its task id once the tool call has started. */
function otherProcess(home: string, workspace: string, options: { waitMs: number; ttlMs: number }) {
  const child = spawn(process.execPath, ["--import", tsxLoader, "test/fixtures/lease-child.ts", home, workspace, String(options.waitMs), String(options.ttlMs)], { stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let stderr = "";
  child.stderr.on("data", (chunk) => (stderr += chunk));
  const lines = createInterface({ input: child.stdout });
  let outcome: (state: string) => void;
  const ended = new Promise<string>((resolve) => (outcome = resolve));
  const running = new Promise<string>((resolve, reject) => {
    lines.on("line", (line) => {
      const [word, value] = line.split(" ");
      if (word === "running") resolve(value!);
      if (word === "outcome") outcome(value!);
    });
    child.on("exit", (code) => reject(new Error(`the other process exited (${code}) before its task ran: ${stderr}`)));
  });
  return { child, running, ended };
}

async function until<T>(read: () => T | null | undefined, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = read();
    if (value) return value;
    if (Date.now() > deadline) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("task leases between processes on one home", () => {
  it("leaves a task another live process drives alone, even past its lease time, and cancels it through that process", async () => {
    const home = makeTempDir("ducklm-lease-home-");
    const workspace = makeTempDir("ducklm-lease-ws-");
    const other = otherProcess(home, workspace, { waitMs: 15_000, ttlMs: 3_000 });
    const taskId = await other.running;
    const here = setup({ home, workspace, tools: [createEchoTool()], runtime: { task_leases: { ttl_ms: 3_000 } } });
    const report = await here.start();
    expect(report.resume.tasks).toEqual([]);
    expect(report.resume.ownedElsewhere).toEqual([taskId]);
    expect(codeOf(() => here.loop.resume(taskId, "take it"))).toBe("DUCK_ERR_TASK_OWNED_ELSEWHERE");
    // Past the lease's time to live: the owner renews it, so it is still the owner's.
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    expect(here.resumeUnfinished().ownedElsewhere).toEqual([taskId]);
    expect(here.store.listEvents(taskId).filter((event) => event.type === "task-resumed")).toEqual([]);

    expect(here.loop.cancel(taskId, "cancelled from the other process")).toBe("asked-owner");
    expect(await other.ended).toBe("cancelled");
    await new Promise((resolve) => other.child.once("exit", resolve));
    here.store.evict(taskId);
    const events = here.store.listEvents(taskId);
    expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
    expect(ofType(events, "task-cancelled").map((payload) => payload.reason)).toEqual(["cancelled from the other process"]);
    expect(events.filter((event) => event.type === "task-resumed")).toEqual([]);
    await here.dispose();
    const check = checkDatabase(join(home, "ducklm.sqlite3"));
    expect(check.integrity).toBe("ok");
    expect(check.tasksWithGaps).toEqual([]);
    expect(check.projectionsDiffering).toEqual([]);
  }, 60_000);

  it("carries on at once a task whose process died on this machine, without waiting for its lease to run out", async () => {
    const home = makeTempDir("ducklm-lease-home-");
    const workspace = makeTempDir("ducklm-lease-ws-");
    // A server-like process that keeps taking on what stopped processes leave.
    const here = setup({ home, workspace, tools: [createEchoTool()], runtime: { task_leases: { ttl_ms: 60_000 } } });
    await here.start({ adoptOrphans: true });
    const other = otherProcess(home, workspace, { waitMs: 3_000, ttlMs: 60_000 });
    const taskId = await other.running;
    other.child.kill("SIGKILL");
    // The echo step is read-only: carried on without a question, the task completes here — well
    // within the dead process's 60 s lease, so its dead PID, not the lease's expiry, let it go.
    const done = await until(() => (here.store.getTask(taskId)?.state === "completed" ? here.store.getTask(taskId) : null), 40_000);
    expect(done.state).toBe("completed");
    const events = here.store.listEvents(taskId);
    expect(ofType(events, "task-resumed").map((payload) => payload.reason)).toEqual(["the process that drove it stopped"]);
    expect(events.filter((event) => event.type === "permission-requested")).toEqual([]);
    expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
  }, 90_000);
});

describe("TaskLeases", () => {
  it("gives a task to one owner at a time, until it is released, its lease runs out, or its owner closes", () => {
    let now = Date.parse("2026-12-01T12:00:00Z");
    const clock = () => new Date(now);
    const runtime = createTestRuntime({});
    try {
      const first = new TaskLeases(runtime.db, { ttlMs: 10_000, clock });
      const second = new TaskLeases(runtime.db, { ttlMs: 10_000, clock });
      const task = runtime.store.createTask({ text: "lease me", workspace: runtime.workspace }, { durable: true });
      expect(first.acquire(task.task_id)).toEqual({ acquired: true });
      expect(second.acquire(task.task_id)).toMatchObject({ acquired: false, holder: { owner: first.owner, pid: process.pid } });
      expect(second.orphans()).toEqual([]);
      first.release(task.task_id);
      expect(second.orphans()).toEqual([task.task_id]);
      expect(second.acquire(task.task_id)).toEqual({ acquired: true });

      // Renewed, a lease outlives its time to live; not renewed, it runs out.
      now += 8_000;
      second.renew();
      now += 8_000;
      expect(first.acquire(task.task_id).acquired).toBe(false);
      now += 3_000;
      expect(first.acquire(task.task_id)).toMatchObject({ acquired: true, previous: { owner: second.owner } });

      // A cancel asked for by another owner reaches the holder once, at its next renewal.
      expect(second.requestCancel(task.task_id, "stop it")).toBe(true);
      expect(first.requestCancel(task.task_id, "mine anyway")).toBe(false);
      expect(first.renew()).toEqual([{ taskId: task.task_id, reason: "stop it" }]);
      expect(first.renew()).toEqual([]);

      // An owner of this process that closed holds nothing: its leases are free.
      first.close();
      expect(second.acquire(task.task_id)).toEqual({ acquired: true });
      second.close();
    } finally {
      void runtime.close();
    }
  });

  it("writes a new task's lease in the task's own first commit, and drops a finished one's at the next renewal", async () => {
    const runtime = createTestRuntime({});
    try {
      const rows = () => (runtime.db.prepare("SELECT task_id FROM task_leases").all() as Array<{ task_id: string }>).map((row) => row.task_id);
      const handle = runtime.loop.submit({ text: "read file nothing.txt" });
      // Not yet committed: neither the task nor its lease is on disk.
      expect(rows()).toEqual([]);
      expect(runtime.store.getTask(handle.taskId)).toBeNull();
      runtime.store.flush();
      expect(rows()).toEqual([handle.taskId]);
      expect(runtime.leases.holds(handle.taskId)).toBe(true);
      const outcome = await handle.done;
      expect(outcome.state).toBe("failed");
      // Finished: not held any more; the row goes at the next renewal (the runtime's lease timer).
      expect(runtime.leases.holds(handle.taskId)).toBe(false);
      runtime.leases.renew();
      expect(rows()).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("writes no lease for a task that ends in its first commit, and writes one for a task that commits before it ends", async () => {
    const runtime = createTestRuntime({ models: scriptedAgent({ directive: { kind: "respond", answer: "quack" } }) });
    try {
      const everWritten = new Set<string>();
      // Every row in any commit, seen inside the commit itself (the renewal removes finished ones after).
      runtime.store.alsoInEachCommit(() => {
        for (const row of runtime.db.prepare("SELECT task_id FROM task_leases").all() as Array<{ task_id: string }>) everWritten.add(row.task_id);
      });
      // An instant model and no tool: nothing commits before the task ends, so one commit holds it whole.
      const quick = runtime.loop.submit({ text: "say quack" });
      expect((await quick.done).state).toBe("completed");
      expect(runtime.store.getTask(quick.taskId)?.state).toBe("completed");
      expect(everWritten.has(quick.taskId)).toBe(false);
      // Committed while it runs (as before a side effect): other processes see it unfinished, and its lease.
      const seen = runtime.loop.submit({ text: "say quack again" });
      runtime.store.flush();
      expect(everWritten.has(seen.taskId)).toBe(true);
      expect((await seen.done).state).toBe("completed");
      runtime.leases.renew();
      expect(runtime.db.prepare("SELECT count(*) AS n FROM task_leases").get()).toEqual({ n: 0 });
    } finally {
      await runtime.close();
    }
  });

  it("keeps a cancel asked of a holder that stopped for whoever takes the task next, and lets no hand-edited row hold a task", () => {
    const runtime = createTestRuntime({});
    try {
      const first = new TaskLeases(runtime.db, { ttlMs: 10_000 });
      const second = new TaskLeases(runtime.db, { ttlMs: 10_000 });
      const task = runtime.store.createTask({ text: "lease me", workspace: runtime.workspace }, { durable: true });
      expect(first.acquire(task.task_id).acquired).toBe(true);
      expect(second.requestCancel(task.task_id, "stop it")).toBe(true);
      // The holder stops before its next renewal would have shown it the request.
      first.close();
      expect(second.orphans()).toEqual([task.task_id]);
      expect(second.acquire(task.task_id)).toMatchObject({ acquired: true, cancelRequested: "stop it" });
      second.release(task.task_id);

      // Rows edited by hand: a PID that names a process group, an expiry that is not a time.
      const third = new TaskLeases(runtime.db, { ttlMs: 10_000 });
      for (const forged of [
        { pid: 0, expires_at: "2999-01-01T00:00:00.000Z" },
        { pid: process.pid + 1_000_000, expires_at: "garbage-not-a-date" },
        { pid: -1, expires_at: "2999-01-01T00:00:00.000Z" },
      ]) {
        runtime.db
          .prepare("INSERT OR REPLACE INTO task_leases (task_id, owner, pid, host, acquired_at, expires_at) VALUES (?, 'forged', ?, ?, '2026-01-01', ?)")
          .run(task.task_id, forged.pid, hostname(), forged.expires_at);
        expect(third.orphans(), JSON.stringify(forged)).toEqual([task.task_id]);
        expect(third.acquire(task.task_id).acquired, JSON.stringify(forged)).toBe(true);
        third.release(task.task_id);
      }
      third.close();
    } finally {
      void runtime.close();
    }
  });
});

/** A runtime on a fresh home whose one task is inside a slow tool call; a second runtime on `home` plays the other process. */
async function slowTaskOnSharedHome(waitMs: number) {
  const home = makeTempDir("ducklm-lease-home-");
  const owner = setup({ home, tools: [createEchoTool()], models: scriptedAgent({ directive: { kind: "tool", tool: "echo", arguments: { text: "slow", wait_ms: waitMs }, reason: "" } }) });
  const handle = owner.loop.submit({ text: "a slow task" });
  await until(() => owner.store.listEvents(handle.taskId).some((event) => event.type === "tool-called"), 10_000);
  return { home, owner, handle };
}

describe("cancels between processes", () => {
  it("carries out a cancel asked just before the owner stops, instead of losing it", async () => {
    const { home, owner, handle } = await slowTaskOnSharedHome(5_000);
    const other = setup({ home, workspace: owner.workspace });
    expect(other.loop.cancel(handle.taskId, "asked from elsewhere")).toBe("asked-owner");
    // Stopping at once, before a renewal could have shown the owner the request.
    await owner.close();
    const events = other.store.listEvents(handle.taskId);
    expect(ofType(events, "task-cancelled").map((payload) => payload.reason)).toEqual(["asked from elsewhere"]);
    expect(other.resumeUnfinished().tasks).toEqual([]);
  });

  it("carries out a cancel its owner never saw when the task is taken over", async () => {
    const { home, owner, handle } = await slowTaskOnSharedHome(3_000);
    const other = setup({ home, workspace: owner.workspace, tools: [createEchoTool()] });
    expect(other.loop.cancel(handle.taskId, "asked of an owner about to die")).toBe("asked-owner");
    // The owner is gone as far as leases tell (as after a kill), before it renewed.
    owner.leases.close();
    const report = other.resumeUnfinished();
    expect(report.tasks.map((task) => task.taskId)).toEqual([handle.taskId]);
    expect(await report.tasks[0]!.done).toMatchObject({ state: "cancelled" });
    const events = other.store.listEvents(handle.taskId);
    expect(ofType(events, "task-cancelled").map((payload) => payload.reason)).toEqual(["asked of an owner about to die"]);
    expect(events.filter((event) => event.type === "task-resumed")).toEqual([]);
  });

  it("counts as owned elsewhere, and does not fail to start, a task another process takes between the look and the lease", async () => {
    const { home, owner, handle } = await slowTaskOnSharedHome(2_000);
    const other = setup({ home, workspace: owner.workspace });
    // The look at the task's lease, as it was a moment before the other process took it.
    other.leases.otherHolder = () => null;
    const before = other.store.listEvents(handle.taskId).length;
    const report = other.resumeUnfinished();
    expect(report.tasks).toEqual([]);
    expect(report.ownedElsewhere).toEqual([handle.taskId]);
    expect(other.store.listEvents(handle.taskId)).toHaveLength(before);
  });

  it("writes nothing into a task another process holds when asked to resume or answer it", async () => {
    const { home, owner, handle } = await slowTaskOnSharedHome(2_000);
    const other = setup({ home, workspace: owner.workspace });
    const before = other.store.listEvents(handle.taskId).length;
    expect(codeOf(() => other.loop.resume(handle.taskId, "take it"))).toBe("DUCK_ERR_TASK_OWNED_ELSEWHERE");
    expect(codeOf(() => other.loop.resolvePermission(handle.taskId, "no-such-request", "allow"))).toBe("DUCK_ERR_TASK_OWNED_ELSEWHERE");
    other.store.flush();
    expect(other.store.listEvents(handle.taskId)).toHaveLength(before);
    expect((await handle.done).state).toBe("completed");
    const events = owner.store.listEvents(handle.taskId);
    expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
  });
});
