import { afterEach, describe, expect, it } from "vitest";
import type { ExecutionDirective } from "../../src/contracts/index.js";
import { replayTask } from "../../src/replay/replay-task.js";
import { codeOf } from "../helpers/error-codes.js";
import { scriptedAgent } from "../helpers/scripted-agent.js";
import { makeTempDir, testConfig, useTestRuntimes, type TestRuntimeOptions } from "../helpers/test-runtime.js";
import { startTestServer } from "../helpers/test-server.js";
import { createEchoTool } from "../helpers/test-tools.js";

const setup = useTestRuntimes(afterEach);

/** A runtime whose tasks ("job N") each echo "job N" after `waitMs`, with the echo calls logged. */
function queueRuntime(scheduler: { max_running_tasks: number; max_queued_tasks?: number }, waitMs = 150, extra: TestRuntimeOptions = {}) {
  const log: Array<{ text: string; start: number; end: number }> = [];
  const directive = (request: unknown): ExecutionDirective => ({ kind: "tool", tool: "echo", arguments: { text: /job \d+/.exec(JSON.stringify(request))?.[0] ?? "?", wait_ms: waitMs }, reason: "" });
  const runtime = setup({ tools: [createEchoTool(log)], models: scriptedAgent({ directive, verdict: () => "pass" }), runtime: { scheduler }, ...extra });
  return { runtime, log };
}

function mostAtOnce(log: ReadonlyArray<{ start: number; end: number }>): number {
  return Math.max(...log.map((call) => log.filter((other) => other.start <= call.start && call.start < other.end).length));
}

describe("the task queue", () => {
  it("drives at most max_running_tasks at once; the others wait in line and run first come, first served", async () => {
    const { runtime, log } = queueRuntime({ max_running_tasks: 2 });
    const handles = [1, 2, 3, 4, 5].map((n) => runtime.loop.submit({ text: `job ${n}` }));
    const outcomes = await Promise.all(handles.map((handle) => handle.done));
    expect(outcomes.map((outcome) => outcome.state)).toEqual(Array(5).fill("completed"));
    expect(mostAtOnce(log)).toBe(2);
    expect(log.map((call) => call.text)).toEqual(["job 1", "job 2", "job 3", "job 4", "job 5"]);
    const queuedAs = handles.map((handle) => runtime.store.listEvents(handle.taskId).find((event) => event.type === "task-queued")?.payload ?? null);
    expect(queuedAs).toEqual([null, null, { position: 1, running: 2, limit: 2 }, { position: 2, running: 2, limit: 2 }, { position: 3, running: 2, limit: 2 }]);
    // A waiting task is let in before it starts; replay follows the recording through both events.
    const third = runtime.store.listEvents(handles[2]!.taskId).map((event) => event.type);
    expect(third.slice(0, 4)).toEqual(["task-received", "task-queued", "task-dequeued", "task-started"]);
    for (const handle of handles) {
      const report = await replayTask(runtime.store.listEvents(handle.taskId), testConfig({ scheduler: { max_running_tasks: 2 } }));
      expect(report.first_difference, handle.taskId).toBeNull();
    }
  });

  it("is fair between conversations: one that sent many tasks does not hold up another's one", async () => {
    const { runtime, log } = queueRuntime({ max_running_tasks: 2 }, 120);
    const busy = [1, 2, 3, 4, 5, 6].map((n) => runtime.loop.submit({ text: `job ${n}`, session_id: "busy" }));
    const other = runtime.loop.submit({ text: "job 7", session_id: "other" });
    const alone = runtime.loop.submit({ text: "job 8" });
    // Two of "busy" run; job 7's and job 8's conversations have none running, so they go first.
    expect(runtime.loop.queuePosition(other.taskId)).toBe(1);
    expect(runtime.loop.queuePosition(alone.taskId)).toBe(2);
    expect(runtime.loop.queuePosition(busy[2]!.taskId)).toBe(3);
    await Promise.all([...busy, other, alone].map((handle) => handle.done));
    // Its event says where it stood when it joined the line: first, ahead of four of "busy".
    expect(runtime.store.listEvents(other.taskId).find((event) => event.type === "task-queued")?.payload).toMatchObject({ position: 1 });
    // Job 7 when one of "busy"'s places frees; job 8 when the other does, though "busy" then runs
    // none: "busy" was served more recently than job 8's conversation, which never was.
    expect(log.map((call) => call.text)).toEqual(["job 1", "job 2", "job 7", "job 8", "job 3", "job 4", "job 5", "job 6"]);
    expect(mostAtOnce(log)).toBe(2);
  });

  it("is fair with one place too: a conversation that had its turn waits for the one that had none", async () => {
    const { runtime, log } = queueRuntime({ max_running_tasks: 1 }, 60);
    const handles = [
      runtime.loop.submit({ text: "job 1", session_id: "A" }),
      runtime.loop.submit({ text: "job 2", session_id: "A" }),
      runtime.loop.submit({ text: "job 3", session_id: "A" }),
      runtime.loop.submit({ text: "job 4", session_id: "B" }),
    ];
    expect(handles.slice(1).map((handle) => runtime.loop.queuePosition(handle.taskId))).toEqual([2, 3, 1]);
    await Promise.all(handles.map((handle) => handle.done));
    expect(log.map((call) => call.text)).toEqual(["job 1", "job 4", "job 2", "job 3"]);
  });

  it("refuses a task when the line is full, recording nothing of it, and takes tasks again once there is room", async () => {
    const { runtime } = queueRuntime({ max_running_tasks: 1, max_queued_tasks: 1 });
    const first = runtime.loop.submit({ text: "job 1" });
    const second = runtime.loop.submit({ text: "job 2" });
    expect(runtime.loop.queuePosition(second.taskId)).toBe(1);
    expect(codeOf(() => runtime.loop.submit({ text: "job 3" }))).toBe("DUCK_ERR_QUEUE_FULL");
    runtime.store.flush();
    expect(runtime.store.listTasks().map((task) => task.text).sort()).toEqual(["job 1", "job 2"]);
    expect((await first.done).state).toBe("completed");
    expect((await second.done).state).toBe("completed");
    expect((await runtime.loop.submit({ text: "job 3" }).done).state).toBe("completed");
  });

  it("always lets a CLI run's own task into the line, however many resumed tasks fill it", async () => {
    const { runtime } = queueRuntime({ max_running_tasks: 1, max_queued_tasks: 0 });
    const resumedOne = runtime.loop.submit({ text: "job 1" });
    expect(codeOf(() => runtime.loop.submit({ text: "job 2" }))).toBe("DUCK_ERR_QUEUE_FULL");
    const own = runtime.loop.submit({ text: "job 3" }, { evenWhenLineIsFull: true });
    expect(runtime.loop.queuePosition(own.taskId)).toBe(1);
    expect((await resumedOne.done).state).toBe("completed");
    expect((await own.done).state).toBe("completed");
  });

  it("cancels a waiting task at once: it never runs", async () => {
    const { runtime, log } = queueRuntime({ max_running_tasks: 1 }, 400);
    const running = runtime.loop.submit({ text: "job 1" });
    const waiting = runtime.loop.submit({ text: "job 2" });
    const controller = new AbortController();
    const alsoWaiting = runtime.loop.submit({ text: "job 3" }, { signal: controller.signal });
    expect(runtime.loop.cancel(waiting.taskId, "not needed")).toBe("cancelled");
    controller.abort();
    expect((await waiting.done).state).toBe("cancelled");
    expect((await alsoWaiting.done).state).toBe("cancelled");
    expect((await running.done).state).toBe("completed");
    expect(log.map((call) => call.text)).toEqual(["job 1"]);
    expect(runtime.store.listEvents(waiting.taskId).map((event) => event.type)).toEqual(["task-received", "task-queued", "task-cancelled"]);
  });

  it("keeps waiting tasks across a restart, in their order, and runs them after it", async () => {
    const home = makeTempDir("ducklm-queue-home-");
    const { runtime: first } = queueRuntime({ max_running_tasks: 1 }, 2_000, { home });
    const handles = [1, 2, 3].map((n) => first.loop.submit({ text: `job ${n}` }));
    await new Promise((resolve) => setTimeout(resolve, 200));
    await first.close();
    const { runtime: second, log } = queueRuntime({ max_running_tasks: 1 }, 50, { home });
    expect(second.store.getTask(handles[1]!.taskId)?.state).toBe("queued");
    const report = await second.start();
    expect(report.resume.tasks.map((task) => task.taskId)).toEqual(handles.map((handle) => handle.taskId));
    const outcomes = await Promise.all(report.resume.tasks.map((task) => task.done!));
    expect(outcomes.map((outcome) => outcome.state)).toEqual(["completed", "completed", "completed"]);
    expect(log.map((call) => call.text)).toEqual(["job 1", "job 2", "job 3"]);
    const last = second.store.listEvents(handles[2]!.taskId);
    expect(last.filter((event) => event.type === "task-queued")).toHaveLength(2);
    const replayed = await replayTask(last, testConfig({ scheduler: { max_running_tasks: 1 } }));
    expect(replayed.first_difference).toBeNull();
  });

  it("answers a full line over HTTP with 429 and Retry-After", async () => {
    const server = await startTestServer({ tools: [createEchoTool()], models: scriptedAgent({ directive: { kind: "tool", tool: "echo", arguments: { text: "slow", wait_ms: 1_000 }, reason: "" } }), runtime: { scheduler: { max_running_tasks: 1, max_queued_tasks: 1 } } });
    try {
      const headers = { authorization: `Bearer ${server.token}`, "content-type": "application/json" };
      const post = (text: string) => fetch(`${server.url}/chat`, { method: "POST", headers, body: JSON.stringify({ text }) });
      const first = await post("first");
      expect(first.status).toBe(202);
      const running = (await first.json()) as { task_id: string; state: string };
      expect(running).toMatchObject({ state: "received" });
      const second = await post("second");
      const accepted = (await second.json()) as { task_id: string; state: string; queue_position: number };
      expect(accepted).toMatchObject({ state: "queued", queue_position: 1 });
      const view = await fetch(`${server.url}/tasks/${accepted.task_id}`, { headers });
      expect(await view.json()).toMatchObject({ state: "queued", queue_position: 1 });
      const refused = await post("third");
      expect(refused.status).toBe(429);
      expect(refused.headers.get("retry-after")).toBe("5");
      expect(((await refused.json()) as { error: { code: string; message: string } }).error).toMatchObject({ code: "DUCK_ERR_QUEUE_FULL", message: expect.stringContaining("max_running_tasks") });
      // Cancelling the waiting task ends it at once, and the answer says so; the running one is being stopped.
      const cancelWaiting = await fetch(`${server.url}/tasks/${accepted.task_id}/cancel`, { method: "POST", headers });
      expect(await cancelWaiting.json()).toEqual({ task_id: accepted.task_id, state: "cancelled" });
      const cancelRunning = await fetch(`${server.url}/tasks/${running.task_id}/cancel`, { method: "POST", headers });
      expect(await cancelRunning.json()).toEqual({ task_id: running.task_id, state: "cancelling" });
    } finally {
      await server.close();
    }
  });
});
