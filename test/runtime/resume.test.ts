import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { z } from "zod";
import { afterEach, describe, expect, it } from "vitest";
import type { ExecutionDirective } from "../../src/contracts/index.js";
import { defineTool } from "../../src/tools/tool-definition.js";
import { createTestRuntime, makeTempDir, type TestRuntime } from "../helpers/test-runtime.js";
import { createEchoTool } from "../helpers/test-tools.js";
import { scriptedAgent } from "../helpers/scripted-agent.js";

const runtimes: TestRuntime[] = [];
afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((runtime) => runtime.dispose()));
});

/** Appends a line to a marker file each time it runs: counts executions across processes. */
function markerTool(effect: "read-only" | "side-effecting", dir: string) {
  return defineTool({
    name: effect === "read-only" ? "mark_read" : "mark_write",
    description: "Writes a marker line, then waits.",
    inputSchema: z.object({ name: z.string(), wait_ms: z.number().default(0) }),
    effect,
    async execute(input, context) {
      const { appendFileSync } = await import("node:fs");
      appendFileSync(join(dir, `${input.name}.marker`), "ran\n");
      if (input.wait_ms > 0) await delay(input.wait_ms, undefined, { signal: context.signal });
      return { ok: true, output: `marked ${input.name}` };
    },
  });
}

function plan(steps: Array<{ id: string; tool: string; name: string; wait?: number; after?: string[] }>): ExecutionDirective {
  return {
    kind: "plan",
    goal: "",
    steps: steps.map((step) => ({ id: step.id, kind: "tool" as const, description: "", depends_on: step.after ?? [], tool: step.tool, arguments: { name: step.name, wait_ms: step.wait ?? 0 } })),
  };
}

function runtimeWith(home: string, markers: string, directive: ExecutionDirective): TestRuntime {
  const models = scriptedAgent({ directive, draft: null, verdict: () => "pass" });
  const runtime = createTestRuntime({ home, models, tools: [markerTool("read-only", markers), markerTool("side-effecting", markers), createEchoTool()] });
  runtimes.push(runtime);
  return runtime;
}

const lines = (file: string) => (existsSync(file) ? readFileSync(file, "utf8").trim().split("\n").length : 0);

describe("resuming a task an earlier process left unfinished", () => {
  it("keeps to the task's time limit across a restart: what it ran before counts, the time it was down does not", async () => {
    const home = makeTempDir();
    const markers = makeTempDir("ducklm-markers-");
    const directive = plan([
      { id: "first", tool: "mark_read", name: "first", wait: 700 },
      { id: "second", tool: "mark_read", name: "second", wait: 5_000, after: ["first"] },
    ]);
    const start = () => {
      const runtime = createTestRuntime({ home, models: scriptedAgent({ directive, draft: null, verdict: () => "pass" }), tools: [markerTool("read-only", markers)], runtime: { timeouts: { task_ms: 1_500 } } });
      runtimes.push(runtime);
      return runtime;
    };
    const first = start();
    const handle = first.loop.submit({ text: "two slow steps" });
    for (let i = 0; i < 200 && !existsSync(join(markers, "second.marker")); i += 1) await delay(20);
    await first.close();
    const ranBefore = first.store.projection(handle.taskId).running_ms;
    expect(ranBefore).toBeGreaterThanOrEqual(650);
    // Down for a while: that gap is not the task's running time.
    await delay(300);
    const second = start();
    const outcome = await second.resumeUnfinished().tasks[0]!.done!;
    expect(outcome.state).toBe("failed");
    expect(outcome.error).toMatchObject({ code: "DUCK_ERR_TASK_TIMEOUT", message: "the task ran longer than 1500 ms (runtime.json timeouts.task_ms), counting what it ran before it was resumed" });
    // The finished step was not run again; the second one ran in each process, and the limit stopped it.
    expect(lines(join(markers, "first.marker"))).toBe(1);
    expect(lines(join(markers, "second.marker"))).toBe(2);
    const total = second.store.projection(handle.taskId).running_ms;
    expect(total).toBeGreaterThanOrEqual(1_400);
    // Stopped when the two runs together reached the limit, not a whole limit after the restart.
    expect(total).toBeLessThan(1_800);
  }, 30_000);

  it("never re-runs a finished step, re-runs a read-only one in flight, and asks before repeating a side-effecting one", async () => {
    const home = makeTempDir();
    const markers = makeTempDir("ducklm-markers-");
    const directive = plan([
      { id: "done-first", tool: "mark_write", name: "first" },
      { id: "reader", tool: "mark_read", name: "reader", wait: 5_000, after: ["done-first"] },
      { id: "writer", tool: "mark_write", name: "writer", wait: 5_000, after: ["done-first"] },
    ]);
    const first = runtimeWith(home, markers, directive);
    const handle = first.loop.submit({ text: "three steps" });
    // Wait until both slow steps are running, then stop the process's loop as a shutdown would.
    for (let i = 0; i < 100 && !(existsSync(join(markers, "reader.marker")) && existsSync(join(markers, "writer.marker"))); i += 1) await delay(20);
    await first.close();
    expect((await handle.done).state).toBe("running");

    const second = runtimeWith(home, markers, directive);
    const { tasks } = second.resumeUnfinished();
    expect(tasks.map((task) => task.taskId)).toEqual([handle.taskId]);
    const waiting = await tasks[0]!.done!;
    expect(waiting.state).toBe("awaiting_permission");
    expect(waiting.pending_permissions).toHaveLength(1);
    expect(waiting.pending_permissions[0]).toMatchObject({ step_id: "writer", category: "unknown" });
    expect(waiting.pending_permissions[0]!.reason).toMatch(/outcome is unknown/);
    expect(lines(join(markers, "first.marker"))).toBe(1);
    expect(lines(join(markers, "reader.marker"))).toBe(2);
    expect(lines(join(markers, "writer.marker"))).toBe(1);

    const done = await second.loop.resolvePermission(handle.taskId, waiting.pending_permissions[0]!.request_id, "allow").done;
    expect(done.state).toBe("completed");
    expect(lines(join(markers, "writer.marker"))).toBe(2);
    expect(lines(join(markers, "first.marker"))).toBe(1);
    const events = second.store.listEvents(handle.taskId);
    expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
    expect(events.filter((event) => event.type === "task-resumed")).toHaveLength(1);
  });

  it("runs a command that is safe to repeat again without asking, and asks only about the one that writes", async () => {
    const home = makeTempDir();
    const workspace = makeTempDir("ducklm-ws-");
    const directive: ExecutionDirective = {
      kind: "plan",
      goal: "",
      steps: [
        { id: "looks", kind: "tool", description: "", depends_on: [], tool: "shell_exec", arguments: { command: "sleep 3 && echo slept" } },
        { id: "writes", kind: "tool", description: "", depends_on: [], tool: "shell_exec", arguments: { command: "sleep 3 && touch made.txt" } },
      ],
    };
    const start = () => {
      const runtime = createTestRuntime({ home, workspace, models: scriptedAgent({ directive, draft: null, verdict: () => "pass" }) });
      runtimes.push(runtime);
      return runtime;
    };
    const first = start();
    const handle = first.loop.submit({ text: "two commands" });
    const called = () => first.store.listEvents(handle.taskId).filter((event) => event.type === "tool-called").length;
    for (let i = 0; i < 200 && called() < 2; i += 1) await delay(20);
    expect(called()).toBe(2);
    await first.close();

    const second = start();
    const waiting = await second.resumeUnfinished().tasks[0]!.done!;
    expect(waiting.state).toBe("awaiting_permission");
    expect(waiting.pending_permissions.map((request) => request.step_id)).toEqual(["writes"]);
    const events = second.store.listEvents(handle.taskId);
    const calls = events.filter((event) => event.type === "tool-called").map((event) => (event.payload as { step_id: string }).step_id);
    expect(calls.filter((id) => id === "looks")).toHaveLength(2);
    expect(events.some((event) => event.type === "step-completed" && (event.payload as { step_id: string }).step_id === "looks")).toBe(true);
    // The question names the commands it is about, like any other.
    expect(waiting.pending_permissions[0]!.commands.join(" ")).toContain("touch made.txt");

    // Declining the rerun is not saying the work was not done: the next decision is told it may be.
    const declined = await second.loop.resolvePermission(handle.taskId, waiting.pending_permissions[0]!.request_id, "deny").done;
    const result = second.store.listEvents(handle.taskId).findLast((event) => event.type === "tool-result" && (event.payload as { step_id: string }).step_id === "writes");
    expect((result!.payload as { result: { error: { message: string } } }).result.error.message).toBe("its earlier run was interrupted and may have done its work; the user chose not to run it again");
    expect(["completed", "failed"]).toContain(declined.state);
  }, 30_000);

  it("leaves a task waiting for permission waiting, and lists instead of resuming when asked to", async () => {
    const home = makeTempDir();
    const first = createTestRuntime({ home });
    const waiting = first.loop.submit({ text: "run `cp a b`" });
    await waiting.done;
    await first.close();
    const second = createTestRuntime({ home });
    runtimes.push(second);
    expect(second.resumeUnfinished().tasks).toEqual([]);
    expect(second.store.getTask(waiting.taskId)?.state).toBe("awaiting_permission");

    const listing = createTestRuntime({ home: makeTempDir(), runtime: { resume: "ask" } });
    runtimes.push(listing);
    const task = listing.store.createTask({ text: "left behind", workspace: listing.workspace }, { durable: true });
    const result = listing.resumeUnfinished();
    expect(result).toMatchObject({ mode: "ask", tasks: [{ taskId: task.task_id, done: null }] });
    expect(listing.store.getTask(task.task_id)?.state).toBe("received");
  });
});

describe("retention", () => {
  it("prunes old finished tasks with their events and checkpoints, archives them, keeps memory and unfinished tasks", async () => {
    const home = makeTempDir();
    const runtime = createTestRuntime({ home });
    runtimes.push(runtime);
    const remembered = await runtime.loop.submit({ text: "remember that ducks like bread" }).done;
    const waiting = runtime.loop.submit({ text: "run `cp a b`" });
    await waiting.done;
    const result = runtime.store.prune({ olderThan: new Date(Date.now() + 1000), keepNewest: null, action: "archive", archiveDir: join(home, "archive") });
    expect(result.pruned).toEqual([remembered.task_id]);
    expect(runtime.store.getTask(remembered.task_id)).toBeNull();
    const leftover = runtime.db.prepare("SELECT (SELECT COUNT(*) FROM events WHERE task_id = ?) + (SELECT COUNT(*) FROM checkpoints WHERE task_id = ?) AS n").get(remembered.task_id, remembered.task_id) as { n: number };
    expect(leftover.n).toBe(0);
    expect(runtime.store.getTask(waiting.taskId)?.state).toBe("awaiting_permission");
    expect(runtime.memory.store.search("ducks bread", 5)).toHaveLength(1);
    const archived = readFileSync(join(home, "archive", `${remembered.task_id}.jsonl`), "utf8").trim().split("\n");
    expect(JSON.parse(archived[0]!).task.id).toBe(remembered.task_id);
    expect(JSON.parse(archived.at(-1)!).type).toBe("task-completed");
  });
});
