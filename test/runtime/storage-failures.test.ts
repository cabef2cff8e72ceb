import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ducklmOf } from "../../src/runtime/ducklm.js";
import { checkDatabase } from "../helpers/database-checks.js";
import { scriptedAgent } from "../helpers/scripted-agent.js";
import { useTestRuntimes } from "../helpers/test-runtime.js";
import { createEchoTool } from "../helpers/test-tools.js";
import { startTestServer } from "../helpers/test-server.js";

const setup = useTestRuntimes(afterEach);

/** What SQLite throws when the disk is full. */
function diskFull(): Error {
  return Object.assign(new Error("database or disk is full"), { code: "SQLITE_FULL" });
}

async function until(condition: () => boolean, timeoutMs: number): Promise<void> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > timeoutMs) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("a store that stops taking writes (a full disk)", () => {
  it("keeps the process up, reports degraded, and finishes every task once writes succeed again", async () => {
    const runtime = setup({
      tools: [createEchoTool()],
      models: scriptedAgent({ directive: { kind: "tool", tool: "echo", arguments: { text: "quack", wait_ms: 20 }, reason: "say it" } }),
    });
    const ducklm = ducklmOf(runtime);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      // Commits succeed for a while, then fail until the "disk" has space again.
      let commits = 0;
      let full = false;
      runtime.store.commitGuard = () => {
        commits += 1;
        if (commits === 3) full = true;
        if (full) throw diskFull();
      };
      // Submitted as the server does: nobody awaits the tasks.
      const handles = Array.from({ length: 8 }, (_, index) => runtime.loop.submit({ text: `task ${index}` }));
      await until(() => full, 10_000);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const degraded = ducklm.status().storage;
      expect(degraded.ok).toBe(false);
      if (!degraded.ok) expect(degraded.message).toContain("database or disk is full");
      // The outcomes that came back while writes failed name the storage error; none is a crash.
      const early = await Promise.race([Promise.all(handles.map((handle) => handle.done)), new Promise<null>((resolve) => setTimeout(() => resolve(null), 500))]);
      if (early) for (const outcome of early) expect(["completed", "failed", "running", "received", "queued"]).toContain(outcome.state);

      full = false;
      await until(() => {
        try {
          return runtime.store.listTasks({ limit: 100 }).filter((task) => !["completed", "failed", "cancelled"].includes(task.state)).length === 0 && !handles.some((handle) => runtime.loop.isActive(handle.taskId));
        } catch {
          return false;
        }
      }, 40_000);
      const tasks = runtime.store.listTasks({ limit: 100 });
      expect(tasks).toHaveLength(8);
      // A full disk is not the task's fault: none is failed for it.
      expect(tasks.map((task) => task.state)).toEqual(Array(8).fill("completed"));
      expect(ducklm.status().storage.ok).toBe(true);
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
      runtime.store.commitGuard = null;
    }
    await runtime.close();
    const report = checkDatabase(join(runtime.home, "ducklm.sqlite3"));
    expect(report.integrity).toBe("ok");
    expect(report.tasksWithGaps).toEqual([]);
    expect(report.rowsOutOfStep).toEqual([]);
    expect(report.projectionsDiffering).toEqual([]);
  }, 60_000);

  it("leaves a task another writer changed to that writer, without failing it or stopping the others", async () => {
    const runtime = setup({ models: scriptedAgent({ directive: { kind: "respond", answer: "fine" } }) });
    // Once the task is stored, every commit of it meets another writer's events.
    let conflicting = false;
    runtime.store.commitGuard = () => {
      if (conflicting) throw Object.assign(new Error("UNIQUE constraint failed: events.task_id, events.seq"), { code: "SQLITE_CONSTRAINT_UNIQUE" });
    };
    const handle = runtime.loop.submit({ text: "one" }, { durable: true });
    conflicting = true;
    const first = await handle.done;
    expect(first.error?.code).toBe("DUCK_ERR_SEQ_CONFLICT");
    // Not failed by this process: the other writer's record stands.
    expect(runtime.store.getTask(first.task_id)?.state).not.toBe("failed");
    conflicting = false;
    const second = await runtime.loop.submit({ text: "two" }).done;
    expect(second.state).toBe("completed");
  });

  it("answers /health as degraded over HTTP while writes fail, and a chat submitted then still finishes", async () => {
    const server = await startTestServer({ models: scriptedAgent({ directive: { kind: "respond", answer: "quack" } }) });
    try {
      const get = async (path: string, init: RequestInit = {}) => {
        const response = await fetch(`${server.url}${path}`, { ...init, headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json", ...(init.headers ?? {}) } });
        return { status: response.status, body: (await response.json()) as Record<string, unknown> };
      };
      expect((await get("/health")).body.status).toBe("ok");
      let full = false;
      server.runtime.store.commitGuard = () => {
        if (full) throw diskFull();
      };
      full = true;
      // A task that cannot be stored is refused with a coded error, not a dropped connection.
      const refused = await fetch(`${server.url}/chat`, { method: "POST", body: JSON.stringify({ text: "hello" }), headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" } });
      // An outage, said as one: try again shortly.
      expect(refused.status).toBe(503);
      expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(await refused.json()).toMatchObject({ error: { code: "DUCK_ERR_DISK_FULL" } });
      const health = await get("/health");
      expect(health.status).toBe(200);
      expect(health.body).toMatchObject({ status: "degraded", storage: { ok: false } });
      full = false;
      const chat = await get("/chat", { method: "POST", body: JSON.stringify({ text: "hello again" }) });
      expect(chat.status).toBe(202);
      const taskId = chat.body.task_id as string;
      await until(() => server.runtime.store.getTask(taskId)?.state === "completed", 20_000);
      expect((await get("/health")).body.status).toBe("ok");
    } finally {
      await server.close();
    }
  }, 40_000);
});

