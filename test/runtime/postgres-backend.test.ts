import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { z } from "zod";
import type { DuckEvent, ExecutionDirective } from "../../src/contracts/index.js";
import { defineTool } from "../../src/tools/tool-definition.js";
import { scriptedAgent } from "../helpers/scripted-agent.js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { projectEvents } from "../../src/state/task-projection.js";
import { SyncPostgres } from "../../src/storage/postgres/sync-postgres.js";
import { startTestPostgres, type TestPostgres } from "../helpers/postgres-server.js";
import { createTestRuntime, makeTempDir, useTestRuntimes } from "../helpers/test-runtime.js";

const setup = useTestRuntimes(afterEach);
const onPostgres = { storage: { backend: "postgres" } };

let postgres: TestPostgres;
beforeAll(async () => {
  postgres = await startTestPostgres();
}, 60_000);
afterAll(() => postgres?.stop());

/** A runtime whose tasks, events and memory live in `url`'s database. */
const runtimeOn = (url: string, options: Parameters<typeof setup>[0] = {}) => setup({ ...options, runtime: { ...options.runtime, ...onPostgres }, env: { DUCKLM_POSTGRES_URL: url } });

/** A step that takes a while, so that a task's events keep coming while another process watches; `ran` hears of each run. */
function pauseTool(ran?: (run: { task: string; start: number; end: number }) => void) {
  return defineTool({
    name: "pause",
    description: "Waits, then says so.",
    inputSchema: z.object({ ms: z.number() }),
    effect: "read-only",
    async execute(input, context) {
      const start = Date.now();
      await delay(input.ms, undefined, { signal: context.signal });
      ran?.({ task: context.taskId, start, end: Date.now() });
      return { ok: true, output: `paused ${input.ms} ms` };
    },
  });
}
const pause = pauseTool();

const threePauses: ExecutionDirective = {
  kind: "plan",
  goal: "",
  steps: ["a", "b", "c"].map((id, index) => ({ id, kind: "tool" as const, description: "", depends_on: index === 0 ? [] : [["a", "b", "c"][index - 1]!], tool: "pause", arguments: { ms: 150 } })),
};

describe("the runtime on PostgreSQL (storage.backend: postgres)", () => {
  it("runs a task whose events, task row and memory are in PostgreSQL, and no SQLite file is made", async () => {
    const url = postgres.createDatabase();
    const home = makeTempDir();
    const runtime = runtimeOn(url, { home });
    writeFileSync(join(runtime.workspace, "notes.md"), "# Notes\nducks and geese\n");
    const handle = runtime.loop.submit({ text: "read file notes.md" });
    const outcome = await handle.done;
    expect(outcome.error).toBeNull();
    expect(outcome.state).toBe("completed");
    expect(outcome.answer).toContain("ducks and geese");
    expect((await runtime.loop.submit({ text: "remember that the staging server is called heron" }).done).state).toBe("completed");
    expect(existsSync(join(home, "ducklm.sqlite3"))).toBe(false);

    // Read back by a connection of its own: what is in the server, not what the runtime keeps in memory.
    const reader = new SyncPostgres(url);
    try {
      const seqs = reader.query("SELECT seq FROM events WHERE task_id = $1 ORDER BY seq", [handle.taskId]).rows.map((row) => row.seq);
      expect(seqs).toEqual(seqs.map((_, index) => index + 1));
      expect(reader.query("SELECT state FROM tasks WHERE id = $1", [handle.taskId]).rows).toEqual([{ state: "completed" }]);
      expect(reader.query("SELECT text FROM memories").rows.map((row) => row.text)).toEqual([expect.stringContaining("heron")]);
    } finally {
      reader.close();
    }
    expect(projectEvents(runtime.store.listEvents(handle.taskId))).toEqual(runtime.store.projection(handle.taskId));
    const recalled = await runtime.loop.submit({ text: "what do you remember about staging?" }).done;
    expect(recalled.answer).toContain("the staging server is called heron");
  });

  it("keeps a task paused for permission across a restart, and finishes it when allowed afterwards", async () => {
    const url = postgres.createDatabase();
    const home = makeTempDir();
    const workspace = makeTempDir("ducklm-ws-");
    const first = createTestRuntime({ home, workspace, runtime: onPostgres, env: { DUCKLM_POSTGRES_URL: url } });
    const handle = first.loop.submit({ text: "run `awk 'BEGIN{print \"resumed\"}' > after-restart.txt`" });
    const paused = await handle.done;
    expect(paused.state).toBe("awaiting_permission");
    await first.close();

    const second = runtimeOn(url, { home, workspace });
    expect(second.store.getTask(handle.taskId)?.state).toBe("awaiting_permission");
    const outcome = await second.loop.resolvePermission(handle.taskId, paused.pending_permissions[0]!.request_id, "allow_always").done;
    expect(outcome.state).toBe("completed");
    expect(readFileSync(join(workspace, "after-restart.txt"), "utf8")).toBe("resumed\n");
    expect(second.approvals.list().map((approval) => approval.command)).toHaveLength(1);
    const seqs = second.store.listEvents(handle.taskId).map((event) => event.seq);
    expect(seqs).toEqual(seqs.map((_, index) => index + 1));
  });

  it("streams a task run by one process to a subscriber of another, gap-free and in order, live", async () => {
    const url = postgres.createDatabase();
    const driver = runtimeOn(url, { models: scriptedAgent({ directive: threePauses, draft: null, verdict: () => "pass" }), tools: [pause] });
    const watcher = runtimeOn(url, { tools: [pause] });
    const handle = driver.loop.submit({ text: "pause three times" });
    driver.store.flush();
    const seen: DuckEvent[] = [];
    const finished = new Promise<void>((resolve) => {
      watcher.bus.subscribe(handle.taskId, (event) => {
        seen.push(event);
        if (event.type === "task-completed" || event.type === "task-failed") resolve();
      }, { fromSeq: 1 });
    });
    // Subscribed while the first commit is all there is: the rest can only come live, from the other process.
    expect(seen.map((event) => event.type)).toEqual(["task-received"]);
    await Promise.race([finished, delay(20_000).then(() => { throw new Error(`the watcher saw only ${seen.map((event) => event.type).join(", ")}`); })]);
    const outcome = await handle.done;
    expect(outcome.state).toBe("completed");
    const stored = driver.store.listEvents(handle.taskId);
    expect(seen.map((event) => event.seq)).toEqual(stored.map((event) => event.seq));
    expect(seen.map((event) => event.type)).toEqual(stored.map((event) => event.type));
    expect(seen.filter((event) => event.type === "step-completed")).toHaveLength(3);
    // What the watcher says of the task follows the other process's commits, not what it read first.
    expect(watcher.store.projection(handle.taskId).state).toBe("completed");
  });

  it("gives a subscriber to every task in one process the tasks another process runs, each in order", async () => {
    const url = postgres.createDatabase();
    const driver = runtimeOn(url, { models: scriptedAgent({ directive: threePauses, draft: null, verdict: () => "pass" }), tools: [pause] });
    const watcher = runtimeOn(url, { tools: [pause] });
    await watcher.ready();
    const seen: DuckEvent[] = [];
    const finished = new Set<string>();
    let bothDone: () => void = () => undefined;
    const done = new Promise<void>((resolve) => (bothDone = resolve));
    watcher.bus.subscribeAll((event) => {
      seen.push(event);
      if (event.type === "task-completed" || event.type === "task-failed") finished.add(event.task_id);
      if (finished.size === 2) bothDone();
    });
    // One after the other: a second task waiting in the driver's line would be offered to the watcher, which takes offers.
    const first = driver.loop.submit({ text: "pause three times" });
    await first.done;
    const handles = [first, driver.loop.submit({ text: "pause three times again" })];
    await Promise.race([done, delay(20_000).then(() => { throw new Error(`the watcher saw only ${seen.map((event) => `${event.task_id.slice(0, 4)}:${event.type}`).join(", ")}`); })]);
    for (const handle of handles) {
      expect((await handle.done).state).toBe("completed");
      const stored = driver.store.listEvents(handle.taskId);
      expect(seen.filter((event) => event.task_id === handle.taskId).map((event) => event.seq)).toEqual(stored.map((event) => event.seq));
    }
  });

  it("lets a second process answer a permission the first asked for, and the first sees the task finish", async () => {
    const url = postgres.createDatabase();
    const workspace = makeTempDir("ducklm-ws-");
    const first = runtimeOn(url, { workspace });
    const second = runtimeOn(url, { workspace });
    const handle = first.loop.submit({ text: "run `awk 'BEGIN{print \"answered elsewhere\"}' > answered.txt`" });
    const paused = await handle.done;
    expect(paused.state).toBe("awaiting_permission");
    const seenByFirst: string[] = [];
    const done = new Promise<void>((resolve) => first.bus.subscribe(handle.taskId, (event) => {
      seenByFirst.push(event.type);
      if (event.type === "task-completed") resolve();
    }));
    const outcome = await second.loop.resolvePermission(handle.taskId, paused.pending_permissions[0]!.request_id, "allow").done;
    expect(outcome.state).toBe("completed");
    await Promise.race([done, delay(10_000)]);
    expect(seenByFirst, seenByFirst.join(",")).toContain("permission-resolved");
    expect(seenByFirst.at(-1)).toBe("task-completed");
    expect(readFileSync(join(workspace, "answered.txt"), "utf8")).toBe("answered elsewhere\n");
    expect(first.store.getTask(handle.taskId)?.state).toBe("completed");
  });

  it("shares the line of waiting tasks between workers: a free worker takes what a busy one offers, each task runs once", async () => {
    const url = postgres.createDatabase();
    const ran: Array<{ worker: string; task: string; start: number; end: number }> = [];
    const worker = async (name: string) => {
      const logged = pauseTool((run) => ran.push({ worker: name, ...run }));
      const directive: ExecutionDirective = { kind: "tool", tool: "pause", arguments: { ms: 300 }, reason: "" };
      const runtime = runtimeOn(url, { models: scriptedAgent({ directive, draft: null, verdict: () => "pass" }), tools: [logged], runtime: { scheduler: { max_running_tasks: 1 }, task_leases: { ttl_ms: 3_000 } } });
      await runtime.start({ adoptOrphans: true });
      return runtime;
    };
    const busy = await worker("busy");
    const free = await worker("free");
    const handles = Array.from({ length: 6 }, (_, index) => busy.loop.submit({ text: `pause ${index}` }));
    const outcomes = await Promise.race([Promise.all(handles.map((handle) => handle.done)), delay(30_000).then(() => { throw new Error(`not all finished: ${JSON.stringify(ran)}`); })]);
    expect(outcomes.map((outcome) => outcome.state)).toEqual(handles.map(() => "completed"));
    // Every task ran exactly once, and the free worker took some of them.
    expect(ran.map((entry) => entry.task).sort()).toEqual(handles.map((handle) => handle.taskId).sort());
    expect(ran.filter((entry) => entry.worker === "free").length).toBeGreaterThan(0);
    expect(ran.filter((entry) => entry.worker === "busy").length).toBeGreaterThan(0);
    expect(free.loop.load()).toEqual({ running: 0, queued: 0 });
    expect(busy.loop.load()).toEqual({ running: 0, queued: 0 });
    // Neither ran more than its one place at a time.
    for (const name of ["busy", "free"]) {
      const own = ran.filter((entry) => entry.worker === name).sort((a, b) => a.start - b.start);
      for (let i = 1; i < own.length; i += 1) expect(own[i]!.start).toBeGreaterThanOrEqual(own[i - 1]!.end);
    }
    for (const handle of handles) {
      const seqs = busy.store.listEvents(handle.taskId).map((event) => event.seq);
      expect(seqs).toEqual(seqs.map((_, index) => index + 1));
      expect(busy.store.listEvents(handle.taskId).filter((event) => event.type === "task-dequeued").length).toBeLessThanOrEqual(1);
    }
  });

  it("refuses to start without the connection string, saying which variable to set", () => {
    expect(() => createTestRuntime({ runtime: onPostgres, env: {} })).toThrow(/storage\.backend to "postgres", but DUCKLM_POSTGRES_URL is not set/);
  });

  it("says which server it could not reach, without the password", () => {
    const unreachable = postgres.url("postgres").replace(/:\d+\//, ":1/").replace("ducklm@", "ducklm:hunter2@");
    let message = "";
    try {
      createTestRuntime({ runtime: onPostgres, env: { DUCKLM_POSTGRES_URL: unreachable } });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/cannot connect to PostgreSQL at postgresql:\/\/ducklm:\*\*\*@127\.0\.0\.1:1\/postgres/);
    expect(message).not.toContain("hunter2");
  });
});
