import Database from "better-sqlite3";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { afterEach, describe, expect, it } from "vitest";
import { type TestRuntime, useTestRuntimes } from "../helpers/test-runtime.js";
import { defineTool } from "../../src/tools/tool-definition.js";
import { projectEvents } from "../../src/state/task-projection.js";

const setup = useTestRuntimes(afterEach);
function countOnDisk(runtime: TestRuntime, taskId: string): number {
  const reader = new Database(join(runtime.home, "ducklm.sqlite3"), { readonly: true });
  try {
    return (reader.prepare("SELECT COUNT(*) AS n FROM events WHERE task_id = ?").get(taskId) as { n: number }).n;
  } finally {
    reader.close();
  }
}

describe("TaskStore", () => {
  it("commits the events of one turn together and publishes them only after the commit", async () => {
    const runtime = setup();
    const published: number[] = [];
    const task = runtime.store.createTask({ text: "t", workspace: runtime.workspace });
    runtime.bus.subscribe(task.task_id, (event) => void published.push(event.seq));
    runtime.store.append(task.task_id, "task-started", {});
    expect(published).toEqual([]);
    expect(countOnDisk(runtime, task.task_id)).toBe(0);
    await new Promise((resolve) => setImmediate(resolve));
    expect(countOnDisk(runtime, task.task_id)).toBe(2);
    expect(published).toEqual([1, 2]);
  });

  it("keeps only the newest finished tasks in memory, and reads older ones back whole", () => {
    const runtime = setup();
    const ids: string[] = [];
    for (let i = 0; i < 400; i += 1) {
      const task = runtime.store.createTask({ text: `t${i}`, workspace: runtime.workspace });
      runtime.store.append(task.task_id, "task-started", {});
      runtime.store.append(task.task_id, "answer-completed", { answer: `answer ${i}` });
      runtime.store.append(task.task_id, "task-completed", { answer: `answer ${i}` }, { durable: true });
      ids.push(task.task_id);
    }
    const running = runtime.store.createTask({ text: "still going", workspace: runtime.workspace }, { durable: true });
    expect(runtime.store.cachedProjections).toBeLessThanOrEqual(257);
    // Reading an old task back gives what its events say, and does not grow the cache past its bound.
    expect(runtime.store.projection(ids[0]!)).toMatchObject({ state: "completed", answer: "answer 0" });
    expect(runtime.store.projection(running.task_id).state).toBe("received");
    expect(runtime.store.cachedProjections).toBeLessThanOrEqual(258);
  });

  it("keeps fewer finished tasks in memory when they hold large texts, and reads them back whole", () => {
    const runtime = setup();
    const ids: string[] = [];
    // 60 tasks of about 1 MB of text each: the byte bound (32 MiB) lets go of most before the count bound would.
    for (let i = 0; i < 60; i += 1) {
      const big = `${i} ${"ducks like bread\n".repeat(30_000)}`;
      const task = runtime.store.createTask({ text: `t${i}`, workspace: runtime.workspace });
      runtime.store.append(task.task_id, "task-started", {});
      runtime.store.append(task.task_id, "task-completed", { answer: big }, { durable: true });
      ids.push(task.task_id);
    }
    expect(runtime.store.cachedFinishedBytes).toBeLessThanOrEqual(32 * 1024 * 1024);
    expect(runtime.store.cachedProjections).toBeLessThan(40);
    expect(runtime.store.cachedProjections).toBeGreaterThan(5);
    expect(runtime.store.projection(ids[0]!).answer).toBe(`0 ${"ducks like bread\n".repeat(30_000)}`);
    expect(runtime.store.cachedFinishedBytes).toBeLessThanOrEqual(32 * 1024 * 1024);
  });

  it("lists tasks newest first, and pages on, by reading an index rather than sorting every task", () => {
    const runtime = setup();
    const plan = (sql: string) => (runtime.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as Array<{ detail: string }>).map((row) => row.detail).join("; ");
    expect(plan("SELECT * FROM tasks ORDER BY created_at DESC, id LIMIT 50")).toMatch(/USING INDEX tasks_by_created/);
    expect(plan("SELECT * FROM tasks WHERE (created_at < 'x' OR (created_at = 'x' AND id > 'y')) ORDER BY created_at DESC, id LIMIT 50")).toMatch(/USING INDEX tasks_by_created/);
    expect(plan("SELECT * FROM tasks ORDER BY created_at DESC, id LIMIT 50")).not.toMatch(/TEMP B-TREE/);
  });

  it("has a durable append on disk when it returns", () => {
    const runtime = setup();
    const task = runtime.store.createTask({ text: "t", workspace: runtime.workspace }, { durable: true });
    expect(countOnDisk(runtime, task.task_id)).toBe(1);
    runtime.store.append(task.task_id, "task-started", {}, { durable: true });
    expect(countOnDisk(runtime, task.task_id)).toBe(2);
  });

  it("records a side-effecting call on disk before the tool runs", async () => {
    let seenByTool: string[] = [];
    const home = { dir: "" };
    const probe = defineTool({
      name: "probe",
      description: "Looks at the database from a second connection while it runs.",
      inputSchema: z.object({}),
      effect: "side-effecting",
      async execute(_input, context) {
        const reader = new Database(join(home.dir, "ducklm.sqlite3"), { readonly: true });
        seenByTool = (reader.prepare("SELECT type FROM events WHERE task_id = ? ORDER BY seq").all(context.taskId) as Array<{ type: string }>).map((row) => row.type);
        reader.close();
        return { ok: true, output: "probed" };
      },
    });
    const runtime = setup({ tools: [probe] });
    home.dir = runtime.home;
    // Without a model the parser cannot call `probe`; drive a stored task whose plan names it.
    const task = runtime.store.createTask({ text: "probe", workspace: runtime.workspace });
    runtime.store.appendAll(task.task_id, [
      { type: "task-started", payload: {} },
      { type: "directive-decided", payload: { directive: { kind: "tool", tool: "probe", arguments: {}, reason: "" }, source: "model" } },
    ]);
    const outcome = await runtime.loop.drive(task.task_id);
    expect(outcome.state).toBe("completed");
    expect(seenByTool.at(-1)).toBe("tool-called");
  });

  it("rebuilds the same projection from the checkpoint plus later events as from all events", async () => {
    const runtime = setup();
    const handle = runtime.loop.submit({ text: "run `echo one`" });
    await handle.done;
    const all = runtime.store.listEvents(handle.taskId);
    expect(runtime.store.checkpoint(handle.taskId)?.seq).toBe(all.length);
    expect(runtime.store.loadProjection(handle.taskId)).toEqual(projectEvents(all));
  });

  it("writes snapshots in proportion to events, so what a step writes stays flat as a plan grows", () => {
    /** Runs a plan of `steps` echo steps straight through the store, a commit per step; returns what was written. */
    const runPlan = (steps: number) => {
      const runtime = setup();
      const store = runtime.store;
      const before = store.writeStats();
      const task = store.createTask({ text: `plan of ${steps}`, workspace: runtime.workspace }, { durable: true });
      const id = task.task_id;
      store.append(id, "task-started", {});
      const planSteps = Array.from({ length: steps }, (_, i) => ({ id: `s${i + 1}`, kind: "tool" as const, description: `step ${i + 1} of the plan`, depends_on: [], tool: "echo", arguments: { text: `output of step ${i + 1} `.repeat(8) } }));
      store.append(id, "plan-accepted", { steps: planSteps, order: planSteps.map((step) => step.id) }, { durable: true });
      let midway: { stored: unknown; rebuilt: unknown } | null = null;
      for (const step of planSteps) {
        store.append(id, "step-started", { step_id: step.id, attempt: 1 });
        store.append(id, "tool-called", { step_id: step.id, attempt: 1, call: { tool: "echo", arguments: step.arguments }, effect: "read-only" });
        store.append(id, "tool-result", { step_id: step.id, attempt: 1, result: { tool: "echo", ok: true, output: String(step.arguments.text), truncated: false, duration_ms: 1 } });
        store.append(id, "step-completed", { step_id: step.id, attempt: 1 }, { durable: true });
        // Halfway, the stored snapshot is older than the last event; the rebuild from it plus the tail is exact.
        if (step.id === `s${Math.ceil(steps / 2)}`) midway = { stored: store.loadProjection(id), rebuilt: projectEvents(store.listEvents(id)) };
      }
      store.append(id, "answer-completed", { answer: "done" });
      store.append(id, "task-completed", { answer: "done" }, { durable: true });
      const after = store.writeStats();
      const final = store.checkpoint(id)!;
      return {
        eventBytes: after.eventBytes - before.eventBytes,
        checkpointBytes: after.checkpointBytes - before.checkpointBytes,
        checkpoints: after.checkpoints - before.checkpoints,
        finalSeq: final.seq,
        lastSeq: store.listEvents(id).at(-1)!.seq,
        finalBytes: JSON.stringify(final.snapshot).length,
        midway: midway!,
      };
    };
    const short = runPlan(5);
    const long = runPlan(50);
    for (const run of [short, long]) {
      // A finished task's snapshot is its last event's; a running one's may lag, and rebuilds the same.
      expect(run.finalSeq).toBe(run.lastSeq);
      expect(run.midway.stored).toEqual(run.midway.rebuilt);
      // Apart from the first and the final snapshot, no more snapshot bytes than event bytes.
      expect(run.checkpointBytes - run.finalBytes - 2_000).toBeLessThanOrEqual(run.eventBytes);
    }
    // Snapshot on every step would write ~25 KiB per step at 50 steps (the whole plan each time) against
    // ~3 KiB at 5; in proportion to events, a step writes about the same at both lengths.
    const perStep = (run: typeof short, steps: number) => (run.eventBytes + run.checkpointBytes) / steps;
    expect(perStep(long, 50)).toBeLessThan(perStep(short, 5) * 1.5);
    expect(long.checkpoints).toBeLessThan(50 / 2);
  });

  it("stores a long output once, however many records refer to it, and lets it go with the last task that does", async () => {
    const runtime = setup({ runtime: { tools: { output_cap_bytes: 2_000_000 } } });
    const output = Array.from({ length: 20_000 }, (_, i) => `line ${i}: ducks like bread`).join("\n");
    writeFileSync(join(runtime.workspace, "big.txt"), output);
    const first = await runtime.loop.submit({ text: "read file big.txt" }).done;
    expect(first.state).toBe("completed");
    expect(runtime.store.getTask(first.task_id)?.answer).toContain(output);
    expect(runtime.store.listEvents(first.task_id).find((event) => event.type === "tool-result")?.payload).toMatchObject({ result: { output } });

    const db = runtime.db;
    const blobs = () => db.prepare("SELECT hash, length(text) AS length FROM blobs").all() as Array<{ hash: string; length: number }>;
    expect(blobs().map((blob) => blob.length)).toContain(output.length);
    const storedOnce = blobs().reduce((sum, blob) => sum + blob.length, 0);
    // Everything else about the task (its events, checkpoint and row) refers to the text instead of holding it.
    const rest = db.prepare(
      `SELECT (SELECT sum(length(payload)) FROM events WHERE task_id = @id) + (SELECT sum(length(snapshot)) FROM checkpoints WHERE task_id = @id)
            + (SELECT coalesce(length(answer), 0) FROM tasks WHERE id = @id) AS bytes`,
    ).get({ id: first.task_id }) as { bytes: number };
    expect(storedOnce).toBeLessThan(output.length * 1.1);
    expect(rest.bytes).toBeLessThan(output.length * 0.1);

    // The same output from another task is not stored again; it stays until neither task is left.
    const second = await runtime.loop.submit({ text: "read file big.txt" }).done;
    expect(blobs().reduce((sum, blob) => sum + blob.length, 0)).toBe(storedOnce);
    const prune = (keepNewest: number) => runtime.store.prune({ olderThan: null, keepNewest, action: "delete", archiveDir: join(runtime.home, "archive") });
    expect(prune(1).pruned).toEqual([first.task_id]);
    expect(blobs().reduce((sum, blob) => sum + blob.length, 0)).toBe(storedOnce);
    expect(runtime.store.getTask(second.task_id)?.answer).toContain(output);
    expect(prune(0).pruned).toEqual([second.task_id]);
    expect(blobs()).toEqual([]);
    expect(db.prepare("SELECT count(*) AS n FROM blob_refs").get()).toEqual({ n: 0 });
  });
});
