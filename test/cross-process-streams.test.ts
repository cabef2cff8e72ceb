import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { DuckEvent } from "../src/contracts/index.js";
import { REPO_ROOT } from "./helpers/cli-child.js";
import { scriptedAgent } from "./helpers/scripted-agent.js";
import { makeTempDir } from "./helpers/test-runtime.js";
import { startTestServer, type TestServer } from "./helpers/test-server.js";
import { createEchoTool } from "./helpers/test-tools.js";
import { STREAMED_PLAN } from "./fixtures/stream-plan.js";

// Two processes on one SQLite home: another process runs tasks (and is killed part-way), a server
// streams them. SQLite tells nobody of another process's commits, so the server has to notice them;
// its clients drop their connections and come back from where they were. Every client must see
// every event of its task once, in order, up to the task's end.

const tsxLoader = import.meta.resolve("tsx");
const FINAL = new Set(["task-completed", "task-failed", "task-cancelled"]);
const children: ChildProcess[] = [];
let server: TestServer | null = null;

afterEach(async () => {
  for (const child of children.splice(0)) child.kill("SIGKILL");
  await server?.close();
  server = null;
});

/** Follows a task's stream to its end, reconnecting from the next seq after the events named in `dropAfter`. */
function follow(target: TestServer, taskId: string, dropAfter: number[]): Promise<{ events: DuckEvent[]; reconnects: number }> {
  const events: DuckEvent[] = [];
  let reconnects = 0;
  return new Promise((resolve, reject) => {
    const deadline = setTimeout(() => reject(new Error(`task ${taskId}: the stream did not end; got ${events.map((event) => event.seq).join(",")}`)), 60_000);
    const connect = () => {
      const since = (events.at(-1)?.seq ?? 0) + 1;
      const socket = new WebSocket(`ws://127.0.0.1:${target.port}/stream/${taskId}?since=${since}`, { headers: { authorization: `Bearer ${target.token}` } });
      let dropping = false;
      socket.on("message", (data) => {
        const message = JSON.parse(String(data)) as { type: string; event?: DuckEvent };
        if (message.type !== "event" || !message.event || dropping) return;
        events.push(message.event);
        if (FINAL.has(message.event.type)) {
          clearTimeout(deadline);
          socket.close();
          resolve({ events, reconnects });
          return;
        }
        if (dropAfter.includes(events.length)) {
          dropping = true;
          reconnects += 1;
          socket.terminate();
          setTimeout(connect, 50);
        }
      });
      socket.on("error", () => undefined);
    };
    connect();
  });
}

describe("streams of a task another process on the same SQLite home runs", () => {
  it("give every client each event once, in order, to the task's end, through kills of that process and reconnects", async () => {
    const home = makeTempDir("ducklm-xstream-home-");
    const workspace = makeTempDir("ducklm-xstream-ws-");
    server = await startTestServer({ home, workspace, models: scriptedAgent({ directive: STREAMED_PLAN, verdict: () => "pass" }), tools: [createEchoTool()], runtime: { task_leases: { ttl_ms: 1_500 } } });
    await server.runtime.start({ adoptOrphans: true });
    const followed: Array<Promise<{ events: DuckEvent[]; reconnects: number }>> = [];
    const taskIds: string[] = [];
    for (let round = 0; round < 3; round += 1) {
      const child = spawn(process.execPath, ["--import", tsxLoader, join(REPO_ROOT, "test/fixtures/stream-child.ts"), home, workspace, "3", "1500"], { stdio: ["ignore", "pipe", "pipe"] });
      children.push(child);
      const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
      createInterface({ input: child.stdout! }).on("line", (line) => {
        if (!line.startsWith("task ")) return;
        const taskId = line.slice(5);
        taskIds.push(taskId);
        followed.push(follow(server!, taskId, [2 + (taskIds.length % 5), 9 + (taskIds.length % 7)]));
      });
      // Killed part-way, once its tasks are in: the server carries them on, and their streams go on from there.
      for (const started = Date.now(); taskIds.length < (round + 1) * 3 && Date.now() - started < 30_000; ) await new Promise((resolve) => setTimeout(resolve, 20));
      await new Promise((resolve) => setTimeout(resolve, 300 + round * 400));
      child.kill("SIGKILL");
      await exited;
    }
    const results = await Promise.all(followed);
    expect(taskIds).toHaveLength(9);
    let reconnects = 0;
    for (const [index, { events, reconnects: count }] of results.entries()) {
      reconnects += count;
      const stored = server.runtime.store.listEvents(taskIds[index]!);
      expect(events.map((event) => event.seq), taskIds[index]).toEqual(stored.map((event) => event.seq));
      expect(events.map((event) => event.type)).toEqual(stored.map((event) => event.type));
      expect(FINAL.has(events.at(-1)!.type)).toBe(true);
    }
    // The streams did come back from where they dropped.
    expect(reconnects).toBeGreaterThan(0);
  }, 180_000);
});
