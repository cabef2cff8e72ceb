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
  /** A browser session, got the only way there is: a one-time login link. */
  const logIn = async () => {
    const answer = await raw(httpRequest("GET", `/login?code=${server.runtime.logins.issueCode()}`, { Host: host() }));
    return /ducklm_session=([A-Za-z0-9_-]+)/.exec(answer.text)![1]!;
  };

  it.each(ROUTES)("%s %s: foreign Host 403, no token 401, wrong token 401, foreign Origin 403", async (method, path, body) => {
    for (const foreign of ["evil.example", "127.0.0.1.nip.io", "", `localhost:${server.port + 1}`]) {
      const response = await raw(httpRequest(method, path, { Host: foreign, ...auth() }, body));
      expect(response.status, `Host: ${foreign}`).toBe(403);
    }
    expect((await raw(httpRequest(method, path, { Host: host() }, body))).status).toBe(401);
    expect((await raw(httpRequest(method, path, { Host: host(), Authorization: "Bearer wrong" }, body))).status).toBe(401);
    expect((await raw(httpRequest(method, path, { Host: host(), Cookie: `ducklm_token=${server.token}` }, body))).status).toBe(401);
    expect((await raw(httpRequest(method, path, { Host: host(), Cookie: "ducklm_session=wrong" }, body))).status).toBe(401);
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

  it("accepts the token as a header and a browser session as a cookie, never from the query string or the old token cookie", async () => {
    expect((await raw(httpRequest("GET", "/tasks", { Host: host(), ...auth() }))).status).toBe(200);
    expect((await raw(httpRequest("GET", "/tasks", { Host: `localhost:${server.port}`, Cookie: `ducklm_token=${server.token}` }))).status).toBe(401);
    expect((await raw(httpRequest("GET", `/tasks?token=${server.token}`, { Host: host() }))).status).toBe(401);
    const session = await logIn();
    expect((await raw(httpRequest("GET", "/tasks", { Host: host(), Cookie: `ducklm_session=${session}` }))).status).toBe(200);
    expect((await raw(httpRequest("GET", `/tasks?session=${session}`, { Host: host() }))).status).toBe(401);
  });

  it("serves the page to anyone without handing out a token or a session", async () => {
    const page = await raw(httpRequest("GET", "/", { Host: host() }));
    expect(page.status).toBe(200);
    expect(page.text).not.toMatch(/set-cookie/i);
    expect(page.text).not.toContain(server.token);
    expect(page.text).toMatch(/content-security-policy: default-src 'self'/i);
    expect((await raw(httpRequest("GET", "/", { Host: "attacker.example" }))).status).toBe(403);
    const session = await raw(httpRequest("GET", "/session", { Host: host() }));
    expect(JSON.parse(session.text.slice(session.text.indexOf("\r\n\r\n") + 4))).toEqual({ authenticated: false, via: null });
  });

  it("turns a one-time login link into an HttpOnly SameSite=Strict session, once, and ends it on logout", async () => {
    const code = server.runtime.logins.issueCode();
    const first = await raw(httpRequest("GET", `/login?code=${code}`, { Host: host() }));
    expect(first.status).toBe(303);
    expect(first.text).toMatch(/\r\nlocation: \/\r\n/i);
    const cookie = /set-cookie: ducklm_session=([A-Za-z0-9_-]{32}); HttpOnly; SameSite=Strict; Path=\/; Max-Age=\d+/i.exec(first.text);
    expect(cookie, first.text).not.toBeNull();
    // The same link a second time: refused, and no cookie.
    const again = await raw(httpRequest("GET", `/login?code=${code}`, { Host: host() }));
    expect(again.status).toBe(401);
    expect(again.text).not.toMatch(/set-cookie: ducklm_session=[A-Za-z0-9_-]/i);
    expect((await raw(httpRequest("GET", "/login?code=made-up", { Host: host() }))).status).toBe(401);
    const session = cookie![1]!;
    expect((await raw(httpRequest("GET", "/tasks", { Host: host(), Cookie: `ducklm_session=${session}` }))).status).toBe(200);
    expect((await raw(httpRequest("POST", "/logout", { Host: host(), Cookie: `ducklm_session=${session}` }, "{}"))).status).toBe(200);
    expect((await raw(httpRequest("GET", "/tasks", { Host: host(), Cookie: `ducklm_session=${session}` }))).status).toBe(401);
    // Neither the code nor the session is stored as itself.
    const stored = JSON.stringify(server.runtime.db.prepare("SELECT * FROM web_logins").all());
    expect(stored).not.toContain(code);
    expect(stored).not.toContain(session);
  });

  it("sends a browser opening the API docs to log in", async () => {
    const docs = await raw(httpRequest("GET", "/docs", { Host: host() }));
    expect(docs.status).toBe(302);
    expect(docs.text).toMatch(/\r\nlocation: \/login\r\n/i);
    const login = await raw(httpRequest("GET", "/login", { Host: host() }));
    expect(login.status).toBe(200);
    expect(login.text).toContain("ducklm login");
  });

  it("refuses a request with two Host headers", async () => {
    const request = `GET /tasks HTTP/1.1\r\nHost: ${host()}\r\nHost: evil.example\r\nAuthorization: Bearer ${server.token}\r\nConnection: close\r\n\r\n`;
    expect((await raw(request)).status).toBe(400);
  });

  it("lets no one without the token or a session answer a permission request", async () => {
    const handle = server.runtime.loop.submit({ text: "run `cp a.txt b.txt`" });
    const waiting = await handle.done;
    const request = waiting.pending_permissions[0]!;
    const body = JSON.stringify({ task_id: handle.taskId, request_id: request.request_id, decision: "allow" });
    const attempts: Array<Record<string, string>> = [{}, { Cookie: `ducklm_token=${server.token}` }, { Cookie: "ducklm_session=guessed" }, { Authorization: "Bearer guessed" }];
    for (const headers of attempts) {
      expect((await raw(httpRequest("POST", "/permissions/resolve", { Host: host(), ...headers }, body))).status).toBe(401);
    }
    expect(server.runtime.store.getTask(handle.taskId)?.state).toBe("awaiting_permission");
    server.runtime.loop.cancel(handle.taskId);
  });

  it("checks Host, Origin and the login on the WebSocket upgrade", async () => {
    const task = server.runtime.loop.submit({ text: "run `echo ws`" });
    await task.done;
    const upgrade = (headers: Record<string, string>) =>
      raw(httpRequest("GET", `/stream/${task.taskId}?since=1`, { Upgrade: "websocket", Connection: "Upgrade", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", ...headers }));
    expect((await upgrade({ Host: host(), Origin: "http://evil.example", ...auth() })).status).toBe(403);
    expect((await upgrade({ Host: "evil.example", ...auth() })).status).toBe(403);
    expect((await upgrade({ Host: host(), Origin: `http://${host()}` })).status).toBe(401);
    expect((await upgrade({ Host: host(), Origin: `http://${host()}`, Cookie: `ducklm_token=${server.token}` })).status).toBe(401);
    expect((await upgrade({ Host: host(), Origin: `http://${host()}`, Cookie: `ducklm_session=${await logIn()}` })).status).toBe(101);
  });

  it("keeps the token file, the database and the home private", async () => {
    const { statSync } = await import("node:fs");
    expect(statSync(`${server.runtime.home}/token`).mode & 0o777).toBe(0o600);
    expect(statSync(server.runtime.home).mode & 0o777).toBe(0o700);
    for (const file of ["ducklm.sqlite3", "ducklm.sqlite3-wal", "ducklm.sqlite3-shm", "logs/ducklm.log"]) {
      expect(statSync(`${server.runtime.home}/${file}`).mode & 0o777, file).toBe(0o600);
    }
  });
});
