import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { DuckEvent, ExecutionDirective } from "../../src/contracts/index.js";
import { startTestPostgres, type TestPostgres } from "../helpers/postgres-server.js";
import { startTestServer, type TestServer } from "../helpers/test-server.js";
import { createEchoTool } from "../helpers/test-tools.js";
import { scriptedAgent } from "../helpers/scripted-agent.js";

// Two real servers on one PostgreSQL database, as two workers behind a load balancer: a task sent to
// one is watched, over a WebSocket, through the other.

let postgres: TestPostgres;
let first: TestServer;
let second: TestServer;
const plan: ExecutionDirective = {
  kind: "plan",
  goal: "",
  steps: ["a", "b", "c"].map((id, index) => ({ id, kind: "tool" as const, description: "", depends_on: index === 0 ? [] : [["a", "b", "c"][index - 1]!], tool: "echo", arguments: { text: `step ${id}`, wait_ms: 150 } })),
};

beforeAll(async () => {
  postgres = await startTestPostgres();
  const url = postgres.createDatabase();
  const worker = () =>
    startTestServer({
      models: scriptedAgent({ directive: plan, draft: "Three echoes.", verdict: () => "pass", streaming: { chunkSize: 3, chunkDelayMs: 5 } }),
      tools: [createEchoTool()],
      runtime: { storage: { backend: "postgres", stream_gather_ms: 0 } },
      env: { DUCKLM_POSTGRES_URL: url },
    });
  first = await worker();
  second = await worker();
  await Promise.all([first.runtime.ready(), second.runtime.ready()]);
}, 60_000);

afterAll(async () => {
  await first?.close();
  await second?.close();
  postgres?.stop();
});

/** The events a WebSocket on `server` delivers for the task, until it ends; `firstAt`: when the first arrived. */
function stream(server: TestServer, taskId: string, since: number): Promise<DuckEvent[] & { firstAt?: number }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`ws://127.0.0.1:${server.port}/stream/${taskId}?since=${since}`, { headers: { authorization: `Bearer ${server.token}` } });
    const events: DuckEvent[] & { firstAt?: number } = [];
    const timer = setTimeout(() => reject(new Error(`the stream stopped at ${events.map((event) => event.type).join(", ")}`)), 20_000);
    socket.on("message", (data) => {
      const message = JSON.parse(String(data));
      if (message.type !== "event") return;
      events.firstAt ??= Date.now();
      events.push(message.event);
      if (message.event.type === "task-completed" || message.event.type === "task-failed") {
        clearTimeout(timer);
        socket.close();
        resolve(events);
      }
    });
    socket.on("error", reject);
  });
}

describe("two servers on one PostgreSQL database", () => {
  it("streams a task sent to one server over a WebSocket on the other, live, gap-free and in order", async () => {
    const response = await fetch(`${first.url}/chat`, { method: "POST", headers: { authorization: `Bearer ${first.token}`, "content-type": "application/json" }, body: JSON.stringify({ text: "echo three times" }) });
    expect(response.status).toBe(202);
    const { task_id: taskId } = (await response.json()) as { task_id: string };
    const events = await stream(second, taskId, 1);
    const stored = first.runtime.store.listEvents(taskId);
    expect(events.map((event) => event.seq)).toEqual(stored.map((event) => event.seq));
    expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
    expect(events.filter((event) => event.type === "step-completed")).toHaveLength(3);
    expect(events.some((event) => event.type === "model-output-delta")).toBe(true);
    // Live: the watcher had events while the task was still running on the other server.
    expect(events.firstAt!).toBeLessThan(Date.parse(stored.at(-1)!.time));
    // The task was driven by the first server, not taken over by the watching one.
    const health = (await fetch(`${second.url}/health`).then((reply) => reply.json())) as { storage: { backend: string }; worker: { id: string } };
    expect(health.storage.backend).toBe("postgres");
    expect(health.worker.id).toBe(second.runtime.leases.owner);
    // And a client that reconnects to the second server from a later seq gets the rest only.
    const rest = await stream(second, taskId, 5);
    expect(rest.map((event) => event.seq)).toEqual(stored.slice(4).map((event) => event.seq));
  });
});
