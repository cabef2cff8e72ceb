import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { startTestServer, type TestServer } from "../helpers/test-server.js";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ stream: { bufferCapBytes: 256 * 1024, heartbeatMs: 60_000 } });
});
afterAll(async () => {
  await server.close();
});

describe("a client that stops reading", () => {
  it("is disconnected at the buffer cap while another client gets every event", async () => {
    const task = server.runtime.store.createTask({ text: "fan-out", workspace: server.runtime.workspace }, { durable: true });
    const open = (onMessage: () => void) =>
      new Promise<WebSocket>((resolve, reject) => {
        const socket = new WebSocket(`ws://127.0.0.1:${server.port}/stream/${task.task_id}?since=2`, { headers: { authorization: `Bearer ${server.token}` } });
        socket.on("open", () => resolve(socket));
        socket.on("message", onMessage);
        socket.on("error", reject);
      });
    let fastReceived = 0;
    const fast = await open(() => (fastReceived += 1));
    const slow = await open(() => undefined);
    const slowClosed = new Promise<number>((resolve) => slow.on("close", (code) => resolve(code)));
    // The slow client stops reading from its socket.
    (slow as unknown as { _socket: { pause(): void } })._socket.pause();
    const chunk = "x".repeat(20_000);
    const total = 600;
    for (let i = 0; i < total; i += 1) {
      server.runtime.store.append(task.task_id, "model-output-delta", { role: "thinker", purpose: "draft", text: chunk });
      if (i % 20 === 19) {
        server.runtime.store.flush();
        // The fast client keeps up: it has everything sent so far before the next batch goes out.
        for (let wait = 0; wait < 200 && fastReceived < i + 1; wait += 1) await new Promise((resolve) => setTimeout(resolve, 5));
        expect(fastReceived).toBe(i + 1);
      }
    }
    server.runtime.store.flush();
    for (let i = 0; i < 200 && fastReceived < total; i += 1) await new Promise((resolve) => setTimeout(resolve, 25));
    expect(fastReceived).toBe(total);
    (slow as unknown as { _socket: { resume(): void } })._socket.resume();
    expect(await slowClosed).toBe(4008);
    fast.close();
  }, 30_000);
});
