import { get } from "node:http";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { DuckEvent, ExecutionDirective } from "../../src/contracts/index.js";
import { startTestServer, type TestServer } from "../helpers/test-server.js";
import { createEchoTool } from "../helpers/test-tools.js";
import { scriptedAgent } from "../helpers/scripted-agent.js";

let server: TestServer;
let directive: ExecutionDirective = { kind: "respond", answer: "hi" };
beforeAll(async () => {
  const models = scriptedAgent({ directive: () => directive, draft: "Thinking about it.", verdict: () => "pass", streaming: { chunkSize: 4 } });
  // Every chunk recorded as it comes (stream_gather_ms 0), so the live stream carries token chunks.
  server = await startTestServer({ models, tools: [createEchoTool()], runtime: { storage: { stream_gather_ms: 0 } } });
});
afterAll(async () => {
  await server.close();
});

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${server.token}`, ...(body !== undefined ? { "content-type": "application/json" } : {}), ...headers },
    ...(body !== undefined ? { body: typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

describe("the HTTP API", () => {
  it("says in /health which store it uses, which worker answers and how many tasks it runs, but not where the data is", async () => {
    const health = (await fetch(`${server.url}/health`).then((response) => response.json())) as Record<string, unknown>;
    expect(health.storage).toEqual({ ok: true, backend: "sqlite" });
    expect(health.worker).toEqual({ id: server.ducklm.status().worker.id, pid: process.pid, host: expect.any(String) });
    expect(health.tasks).toEqual({ running: expect.any(Number), queued: expect.any(Number) });
    expect(JSON.stringify(health)).not.toContain(server.ducklm.home);
  });

  it("pages through tasks with a cursor, newest first, without gaps or repeats", async () => {
    directive = { kind: "respond", answer: "paged" };
    for (let i = 0; i < 7; i += 1) await call("POST", "/chat", { text: `page me ${i}`, wait: true });
    const all = (await call("GET", "/tasks?limit=500")).body.tasks.map((task: { id: string }) => task.id);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { status: number; body: { tasks: Array<{ id: string }>; next: string | null } } = await call("GET", `/tasks?limit=3${cursor ? `&cursor=${cursor}` : ""}`);
      expect(page.status).toBe(200);
      seen.push(...page.body.tasks.map((task) => task.id));
      cursor = page.body.next;
    } while (cursor);
    expect(seen).toEqual(all);
    expect((await call("GET", "/tasks?cursor=not-a-cursor")).body.error.code).toBe("DUCK_ERR_INVALID_INPUT");
  });

  it("lists conversations, the most recently active first, each with its tasks oldest first", async () => {
    directive = { kind: "respond", answer: "noted" };
    const session = `api-conversation-${Date.now()}`;
    const first = await call("POST", "/chat", { text: "first of a conversation", session_id: session, wait: true });
    const lone = await call("POST", "/chat", { text: "a task on its own", wait: true });
    const second = await call("POST", "/chat", { text: "second of the conversation", session_id: session, wait: true });
    const listed = await call("GET", "/conversations?limit=5");
    expect(listed.status).toBe(200);
    const [newest, next] = listed.body.conversations as Array<{ id: string; session_id: string | null; title: string; tasks: number; latest_task_id: string; state: string }>;
    expect(newest).toMatchObject({ id: session, session_id: session, title: "first of a conversation", tasks: 2, latest_task_id: second.body.task_id, state: "completed" });
    expect(next).toMatchObject({ id: lone.body.task_id, session_id: null, title: "a task on its own", tasks: 1 });
    const opened = await call("GET", `/conversations/${session}`);
    expect(opened.body.tasks.map((task: { id: string }) => task.id)).toEqual([first.body.task_id, second.body.task_id]);
    expect((await call("GET", `/conversations/${lone.body.task_id}`)).body.tasks).toHaveLength(1);
    const missing = await call("GET", "/conversations/no-such-conversation");
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe("DUCK_ERR_TASK_NOT_FOUND");
    expect((await call("GET", "/conversations?limit=0")).status).toBe(400);
  });

  it("runs a chat task and answers with its outcome when asked to wait", async () => {
    directive = { kind: "respond", answer: "quack" };
    const result = await call("POST", "/chat", { text: "say something", wait: true });
    expect(result.status).toBe(200);
    expect(result.body).toMatchObject({ state: "completed", answer: "quack" });
    const quick = await call("POST", "/chat", { text: "say something else" });
    expect(quick.status).toBe(202);
    expect(quick.body.task_id).toMatch(/^[0-9a-f-]{36}$/);
    const task = await call("GET", `/tasks/${quick.body.task_id}`);
    expect(task.status).toBe(200);
    expect(task.body.task.id).toBe(quick.body.task_id);
  });

  it("lists tasks and a task's events from `since`, and recent events", async () => {
    const { body } = await call("POST", "/chat", { text: "again", wait: true });
    const events = await call("GET", `/tasks/${body.task_id}/events?since=3`);
    expect(events.body.events[0].seq).toBe(3);
    expect(events.body.events.at(-1).type).toBe("task-completed");
    expect((await call("GET", "/tasks?state=completed&limit=2")).body.tasks).toHaveLength(2);
    expect((await call("GET", "/events?limit=5")).body.events).toHaveLength(5);
  });

  it("pauses for permission and continues when answered through /permissions/resolve", async () => {
    directive = { kind: "tool", tool: "shell_exec", arguments: { command: "cp a.txt b.txt || echo copied-or-not" }, reason: "" };
    const waiting = await call("POST", "/chat", { text: "copy", wait: true });
    expect(waiting.body.state).toBe("awaiting_permission");
    const request = waiting.body.pending_permissions[0];
    const resolved = await call("POST", "/permissions/resolve", { task_id: waiting.body.task_id, request_id: request.request_id, decision: "allow" });
    expect(resolved.status).toBe(200);
    const again = await call("POST", "/permissions/resolve", { task_id: waiting.body.task_id, request_id: request.request_id, decision: "allow" });
    expect(again.status).toBe(200);
    for (let i = 0; i < 50 && (await call("GET", `/tasks/${waiting.body.task_id}`)).body.state !== "completed"; i += 1) await new Promise((r) => setTimeout(r, 50));
    expect((await call("GET", `/tasks/${waiting.body.task_id}`)).body.state).toBe("completed");
    const wrong = await call("POST", "/permissions/resolve", { task_id: waiting.body.task_id, request_id: "not-a-request", decision: "allow" });
    expect(wrong.status).toBe(409);
    expect(wrong.body.error.code).toBe("DUCK_ERR_PERMISSION_REQUEST_UNKNOWN");
  });

  it("records feedback, manages memory and approvals, cancels", async () => {
    const { body } = await call("POST", "/chat", { text: "hello", wait: true });
    expect((await call("POST", "/critic/feedback", { task_id: body.task_id, rating: "down", comment: "meh" })).status).toBe(200);
    const stepless = await call("POST", "/critic/feedback", { task_id: body.task_id, iteration: 1, rating: "down" });
    expect(stepless.status).toBe(400);
    expect(stepless.body.error.code).toBe("DUCK_ERR_INVALID_INPUT");
    expect((await call("POST", "/critic/feedback", { task_id: body.task_id, step_id: "step-1", iteration: 0, rating: "down" })).status).toBe(400);
    const created = await call("POST", "/memory", { text: "the pond is north of the barn" });
    expect(created.status).toBe(201);
    expect((await call("GET", "/memory?query=pond")).body.hits[0].entry.text).toBe("the pond is north of the barn");
    expect((await call("DELETE", `/memory/${created.body.entry.id}`)).status).toBe(200);
    expect((await call("DELETE", `/memory/${created.body.entry.id}`)).status).toBe(404);
    expect((await call("GET", "/approvals")).body.approvals).toEqual([]);
    directive = { kind: "tool", tool: "echo", arguments: { text: "slow", wait_ms: 10_000 }, reason: "" };
    const slow = await call("POST", "/chat", { text: "slow" });
    await new Promise((r) => setTimeout(r, 100));
    expect((await call("POST", `/tasks/${slow.body.task_id}/cancel`, { reason: "changed my mind" })).status).toBe(200);
    for (let i = 0; i < 50 && (await call("GET", `/tasks/${slow.body.task_id}`)).body.state !== "cancelled"; i += 1) await new Promise((r) => setTimeout(r, 50));
    expect((await call("GET", `/tasks/${slow.body.task_id}`)).body.state).toBe("cancelled");
    const events = (await call("GET", `/tasks/${slow.body.task_id}/events`)).body.events as Array<{ type: string; payload: { reason?: string } }>;
    expect(events.find((event) => event.type === "task-cancelled")?.payload.reason).toBe("changed my mind");
    expect((await call("POST", `/tasks/${slow.body.task_id}/cancel`)).status).toBe(409);
  });

  it("serves the page's files with what a browser caches them by, and nothing beside them", async () => {
    const script = await fetch(`${server.url}/app.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get("content-type")).toMatch(/^application\/javascript/);
    const etag = script.headers.get("etag");
    expect(etag).toBeTruthy();
    expect((await script.text()).length).toBeGreaterThan(1000);
    // Asked again as a browser revalidates (fetch would add "cache-control: no-cache", which always refetches).
    const revalidated = await new Promise<number | undefined>((resolve, reject) => get(`${server.url}/app.js`, { headers: { "if-none-match": etag! } }, (response) => resolve(response.resume().statusCode)).on("error", reject));
    expect(revalidated).toBe(304);
    const library = await fetch(`${server.url}/vendor/marked.js`);
    expect(library.status).toBe(200);
    expect(library.headers.get("cache-control")).toBe("public, max-age=86400");
    expect(await library.text()).toContain("marked");
    // Only the named files: a path that climbs out of the page's folder is no file of the page.
    const climbing = await fetch(`${server.url}/app.js/../../package.json`);
    expect(climbing.status).not.toBe(200);
    expect(await climbing.text()).not.toContain('"dependencies"');
  });

  it("publishes an OpenAPI document generated from the schemas, and a docs page", async () => {
    const spec = await call("GET", "/openapi.json");
    expect(Object.keys(spec.body.paths)).toEqual(expect.arrayContaining(["/chat", "/tasks/{id}/events", "/permissions/resolve", "/secrets/resolve", "/memory"]));
    expect(spec.body.paths["/chat"].post.requestBody.content["application/json"].schema.properties.text).toBeTruthy();
    const authorization = `Bearer ${server.token}`;
    const docs = await fetch(`${server.url}/docs/`, { headers: { authorization } });
    expect(docs.status).toBe(200);
    expect(docs.headers.get("content-type")).toMatch(/^text\/html/);
    expect(await docs.text()).toContain("swagger-ui");
    // The page's own assets and the document it shows, all behind the token.
    const style = await fetch(`${server.url}/docs/static/swagger-ui.css`, { headers: { authorization } });
    expect(style.status).toBe(200);
    expect(style.headers.get("content-type")).toMatch(/^text\/css/);
    expect((await style.text()).length).toBeGreaterThan(10_000);
    const shown = await fetch(`${server.url}/docs/json`, { headers: { authorization } });
    expect(Object.keys(((await shown.json()) as { paths: Record<string, unknown> }).paths)).toEqual(Object.keys(spec.body.paths));
    const missing = await fetch(`${server.url}/docs/nothing-here`, { headers: { authorization } });
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe("DUCK_ERR_NOT_FOUND");
    // Without the token: sent to log in (a browser) or refused, never the document.
    const anonymous = await fetch(`${server.url}/docs/json`, { redirect: "manual" });
    expect([302, 401]).toContain(anonymous.status);
    expect(await anonymous.text()).not.toContain("/permissions/resolve");
  });
});

describe("bad input gets a 4xx JSON error and the server stays up", () => {
  const deep = `${"[".repeat(5000)}${"]".repeat(5000)}`;
  const cases: Array<[string, string, unknown, number]> = [
    ["POST", "/chat", { text: 42 }, 400],
    ["POST", "/chat", { text: "" }, 400],
    ["POST", "/chat", { text: "x", extra: true }, 400],
    ["POST", "/chat", "{not json", 400],
    ["POST", "/chat", { text: "x".repeat(2 * 1024 * 1024) }, 413],
    ["POST", "/chat", new Uint8Array([0x7b, 0x22, 0x74, 0x65, 0x78, 0x74, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]), 400],
    ["POST", "/chat", { text: "x", session_id: "../../etc" }, 400],
    ["GET", "/tasks?state=dreaming", undefined, 400],
    ["GET", "/tasks?limit=-1", undefined, 400],
    ["GET", "/tasks/no-such-task", undefined, 404],
    ["GET", "/tasks/bad%20id", undefined, 400],
    ["GET", "/tasks/x/events?since=-1", undefined, 400],
    ["POST", "/tasks/no-such-task/cancel", undefined, 404],
    ["POST", "/permissions/resolve", { task_id: "a", request_id: "b", decision: "maybe" }, 400],
    ["POST", "/permissions/resolve", { task_id: "nope", request_id: "b", decision: "allow" }, 404],
    ["POST", "/secrets/resolve", { task_id: "a", request_id: "b", secret: "" }, 400],
    ["POST", "/password/resolve", { task_id: "a" }, 400],
    ["POST", "/critic/feedback", { task_id: "a", rating: "sideways" }, 400],
    ["GET", "/memory?limit=abc", undefined, 400],
    ["POST", "/memory", { text: ["not", "a", "string"] }, 400],
    ["DELETE", "/memory/abc", undefined, 400],
    ["GET", "/nowhere", undefined, 404],
  ];

  it.each(cases)("%s %s → %i", async (method, path, body, status) => {
    const result = await call(method, path, body as string);
    expect(result.status).toBe(status);
    expect(result.body.error.code).toMatch(/^DUCK_ERR_/);
    expect(typeof result.body.error.message).toBe("string");
    expect((await call("GET", "/health")).status).toBe(200);
  });

  it("says in plain words what is wrong with a value, and refuses a body that is not JSON with 415", async () => {
    expect((await call("GET", "/tasks?limit=abc")).body.error.message).toBe("limit: must be a number");
    expect((await call("POST", "/chat", { text: 5 })).body.error.message).toBe("text: must be a string, not a number");
    const plain = await call("POST", "/chat", "tell me a joke", { "content-type": "text/plain" });
    expect(plain.status).toBe(415);
    expect(plain.body.error.code).toBe("DUCK_ERR_UNSUPPORTED_MEDIA_TYPE");
    expect(plain.body.error.message).toBe("a body of type text/plain is not taken: send JSON with content-type: application/json");
    const form = await call("POST", "/chat", "text=hi", { "content-type": "application/x-www-form-urlencoded" });
    expect(form.status).toBe(415);
    expect(form.body.error.message).toContain("application/x-www-form-urlencoded is not taken: send JSON");
  });

  it("rejects deep nesting in a body without falling over", async () => {
    const result = await call("POST", "/chat", deep);
    expect(result.status).toBe(400);
  });
});

describe("WebSocket /stream/:id", () => {
  function collect(taskId: string, since: number, until: (events: DuckEvent[]) => boolean): Promise<DuckEvent[]> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(`ws://127.0.0.1:${server.port}/stream/${taskId}?since=${since}`, { headers: { authorization: `Bearer ${server.token}` } });
      const events: DuckEvent[] = [];
      socket.on("message", (data) => {
        const message = JSON.parse(String(data));
        if (message.type !== "event") return;
        events.push(message.event);
        if (until(events)) {
          socket.close();
          resolve(events);
        }
      });
      socket.on("error", reject);
    });
  }

  it("sends stored events from `since`, then live ones, token chunks included, with no gap or duplicate", async () => {
    directive = { kind: "tool", tool: "echo", arguments: { text: "streamed", wait_ms: 300 }, reason: "" };
    const { body } = await call("POST", "/chat", { text: "stream me" });
    await new Promise((r) => setTimeout(r, 100));
    // `since=0` is the start, as `since=1` is.
    const events = await collect(body.task_id, 0, (list) => list.at(-1)?.type === "task-completed");
    expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
    expect(events.some((event) => event.type === "model-output-delta")).toBe(true);
    // A client that reconnects with `since` gets the rest, and only the rest.
    const resumed = await collect(body.task_id, 5, (list) => list.at(-1)?.type === "task-completed");
    expect(resumed[0]?.seq).toBe(5);
    expect(resumed.map((event) => event.seq)).toEqual(events.slice(4).map((event) => event.seq));
  });

  it("cuts a text too long for a live client, says where the whole event is, and serves it whole there", async () => {
    const big = await startTestServer({ runtime: { tools: { output_cap_bytes: 2_000_000 } } });
    try {
      const output = Array.from({ length: 40_000 }, (_, i) => `row ${i} of the ledger`).join("\n");
      writeFileSync(join(big.runtime.workspace, "ledger.txt"), output);
      const submitted = await fetch(`${big.url}/chat`, { method: "POST", headers: { authorization: `Bearer ${big.token}`, "content-type": "application/json" }, body: JSON.stringify({ text: "read file ledger.txt", wait: true }) });
      const { task_id: taskId } = (await submitted.json()) as { task_id: string };
      const messages = await new Promise<Array<{ event: DuckEvent; cut?: boolean }>>((resolve, reject) => {
        const socket = new WebSocket(`ws://127.0.0.1:${big.port}/stream/${taskId}?since=1`, { headers: { authorization: `Bearer ${big.token}` } });
        const seen: Array<{ event: DuckEvent; cut?: boolean }> = [];
        socket.on("message", (data) => {
          const message = JSON.parse(String(data));
          if (message.type !== "event") return;
          seen.push(message);
          if (message.event.type === "task-completed") {
            socket.close();
            resolve(seen);
          }
        });
        socket.on("error", reject);
      });
      const result = messages.find((message) => message.event.type === "tool-result")!;
      expect(result.cut).toBe(true);
      const streamed = (result.event.payload as { result: { output: string } }).result.output;
      expect(streamed.length).toBeLessThan(output.length);
      expect(streamed.startsWith(output.slice(0, 1000))).toBe(true);
      const where = /GET (\/tasks\/\S+) has the whole text/.exec(streamed)![1]!;
      const whole = await fetch(`${big.url}${where}`, { headers: { authorization: `Bearer ${big.token}` } });
      const [stored] = ((await whole.json()) as { events: DuckEvent[] }).events;
      expect(stored).toMatchObject({ seq: result.event.seq, type: "tool-result", payload: { result: { output } } });
      // Short events are streamed whole and unmarked.
      expect(messages.find((message) => message.event.type === "task-started")?.cut).toBeUndefined();
    } finally {
      await big.close();
    }
  });

  it("closes the stream of an unknown task", async () => {
    const code = await new Promise<number>((resolve) => {
      const socket = new WebSocket(`ws://127.0.0.1:${server.port}/stream/no-such-task`, { headers: { authorization: `Bearer ${server.token}` } });
      socket.on("close", (closeCode) => resolve(closeCode));
    });
    expect(code).toBe(4404);
  });
});
