import type { FastifyInstance } from "fastify";
import type { AddressInfo } from "node:net";
import { ducklmOf, type DuckLM } from "../../src/runtime/ducklm.js";
import { buildServer } from "../../src/server/build-server.js";
import { loadInstallToken } from "../../src/server/install-token.js";
import { createTestRuntime, type TestRuntimeOptions, type TestRuntime } from "./test-runtime.js";

export interface TestServer {
  runtime: TestRuntime;
  /** The API the server itself is built on. */
  ducklm: DuckLM;
  app: FastifyInstance;
  token: string;
  port: number;
  url: string;
  /** A one-time login link, the way `ducklm serve` and `ducklm login` print one. */
  loginUrl(): string;
  close(): Promise<void>;
}

/** A real server on a free loopback port, over a test runtime. */
export async function startTestServer(options: TestRuntimeOptions & { stream?: { bufferCapBytes?: number; heartbeatMs?: number } } = {}): Promise<TestServer> {
  const runtime = createTestRuntime(options);
  const token = loadInstallToken(runtime.home);
  // Listen first on port 0 to learn the port, then build the app that checks Host against it.
  const probe = (await import("node:net")).createServer();
  const port = await new Promise<number>((resolve) => probe.listen(0, "127.0.0.1", () => resolve((probe.address() as AddressInfo).port)));
  await new Promise((resolve) => probe.close(resolve));
  const ducklm = ducklmOf(runtime);
  const app = await buildServer({ ducklm, token, port, ...(options.stream ? { stream: options.stream } : {}) });
  await app.listen({ host: "127.0.0.1", port });
  return {
    runtime,
    ducklm,
    app,
    token,
    port,
    url: `http://127.0.0.1:${port}`,
    loginUrl: () => `http://127.0.0.1:${port}/login?code=${runtime.logins.issueCode()}`,
    async close() {
      await app.close();
      await runtime.dispose();
    },
  };
}
