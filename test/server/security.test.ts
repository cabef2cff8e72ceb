import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/test-server.js";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
});

/** Sends raw bytes and returns the status line and body: what a browser or a script could send. */
function raw(request: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(server.port, "127.0.0.1");
    let text = "";
    socket.on("data", (chunk) => {
      text += chunk.toString();
      // A WebSocket upgrade that succeeded stays open: its status line is enough.
      if (/^HTTP\/1\.1 101/.test(text)) socket.destroy();
    });
    socket.on("close", () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text }));
    socket.on("error", reject);
    socket.write(request);
    socket.setTimeout(5_000, () => socket.destroy());
  });
}

function httpRequest(method: string, path: string, headers: Record<string, string>, body?: string): string {
  const lines = [`${method} ${path} HTTP/1.1`, "Connection: close", ...Object.entries(headers).map(([key, value]) => `${key}: ${value}`)];
  if (body !== undefined) lines.push("Content-Type: application/json", `Content-Length: ${Buffer.byteLength(body)}`);
  return `${lines.join("\r\n")}\r\n\r\n${body ?? ""}`;
}

const ROUTES: Array<[string, string, string?]> = [
  ["GET", "/events"],
  ["POST", "/chat", '{"text":"run `echo hi`"}'],
  ["GET", "/tasks"],
  ["GET", "/tasks/abc"],
  ["GET", "/tasks/abc/events?since=1"],
  ["POST", "/tasks/abc/cancel", "{}"],
  ["POST", "/permissions/resolve", '{"task_id":"a","request_id":"b","decision":"allow"}'],
  ["POST", "/secrets/resolve", '{"task_id":"a","request_id":"b","secret":"x"}'],
  ["POST", "/password/resolve", '{"task_id":"a","request_id":"b","secret":"x"}'],
  ["POST", "/critic/feedback", '{"task_id":"a","rating":"up"}'],
  ["GET", "/memory"],
  ["POST", "/memory", '{"text":"x"}'],
  ["DELETE", "/memory/1"],
  ["GET", "/approvals"],
  ["DELETE", "/approvals/x"],
  ["GET", "/openapi.json"],
];

describe("the server refuses what does not come from its own page or holder of its token", () => {
  const host = () => `127.0.0.1:${server.port}`;
  const auth = () => ({ Authorization: `Bearer ${server.token}` });

  it.each(ROUTES)("%s %s: foreign Host 403, no token 401, wrong token 401, foreign Origin 403", async (method, path, body) => {
    for (const foreign of ["evil.example", "127.0.0.1.nip.io", "", `localhost:${server.port + 1}`]) {
      const response = await raw(httpRequest(method, path, { Host: foreign, ...auth() }, body));
      expect(response.status, `Host: ${foreign}`).toBe(403);
    }
    expect((await raw(httpRequest(method, path, { Host: host() }, body))).status).toBe(401);
    expect((await raw(httpRequest(method, path, { Host: host(), Authorization: "Bearer wrong" }, body))).status).toBe(401);
    expect((await raw(httpRequest(method, path, { Host: host(), Cookie: "ducklm_token=wrong" }, body))).status).toBe(401);
    if (method !== "GET") {
      for (const origin of ["http://evil.example", "null", `http://127.0.0.1:${server.port + 1}`]) {
        expect((await raw(httpRequest(method, path, { Host: host(), Origin: origin, ...auth() }, body))).status, `Origin: ${origin}`).toBe(403);
      }
    }
  });

  it("refuses a request without any Host and an absolute-form target", async () => {
    expect((await raw(`GET /tasks HTTP/1.0\r\nAuthorization: Bearer ${server.token}\r\n\r\n`)).status).toBe(403);
    expect((await raw(httpRequest("GET", `http://evil.example/tasks`, { Host: host(), ...auth() }))).status).toBe(403);
  });

  it("accepts the token as a header or as the page's cookie, and never from the query string", async () => {
    expect((await raw(httpRequest("GET", "/tasks", { Host: host(), ...auth() }))).status).toBe(200);
    expect((await raw(httpRequest("GET", "/tasks", { Host: `localhost:${server.port}`, Cookie: `ducklm_token=${server.token}` }))).status).toBe(200);
    expect((await raw(httpRequest("GET", `/tasks?token=${server.token}`, { Host: host() }))).status).toBe(401);
  });

  it("serves the page without a token, handing it over as an HttpOnly SameSite=Strict cookie", async () => {
    const page = await raw(httpRequest("GET", "/", { Host: host() }));
    expect(page.status).toBe(200);
    expect(page.text).toMatch(/set-cookie: ducklm_token=[0-9a-f]{64}; HttpOnly; SameSite=Strict; Path=\//i);
    expect(page.text).toMatch(/content-security-policy: default-src 'self'/i);
    expect((await raw(httpRequest("GET", "/", { Host: "attacker.example" }))).status).toBe(403);
  });

  it("checks Host, Origin and the token on the WebSocket upgrade", async () => {
    const task = server.runtime.loop.submit({ text: "run `echo ws`" });
    await task.done;
    const upgrade = (headers: Record<string, string>) =>
      raw(httpRequest("GET", `/stream/${task.taskId}?since=1`, { Upgrade: "websocket", Connection: "Upgrade", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", ...headers }));
    expect((await upgrade({ Host: host(), Origin: "http://evil.example", ...auth() })).status).toBe(403);
    expect((await upgrade({ Host: "evil.example", ...auth() })).status).toBe(403);
    expect((await upgrade({ Host: host(), Origin: `http://${host()}` })).status).toBe(401);
    expect((await upgrade({ Host: host(), Origin: `http://${host()}`, Cookie: `ducklm_token=${server.token}` })).status).toBe(101);
  });

  it("keeps the token file private", async () => {
    const { statSync } = await import("node:fs");
    expect(statSync(`${server.runtime.home}/token`).mode & 0o777).toBe(0o600);
  });
});
