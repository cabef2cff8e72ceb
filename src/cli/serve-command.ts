import { createServer as createNetServer } from "node:net";
import { buildServer } from "../server/build-server.js";
import { loadInstallToken } from "../server/install-token.js";
import type { Runtime } from "../runtime/create-runtime.js";
import { resumeLeftovers } from "./run-command.js";

const LOOPBACK = new Set(["127.0.0.1", "localhost", "::1"]);

/** `ducklm serve`: the HTTP API, live streaming and the web chat, on 127.0.0.1:8000 unless told otherwise. */
export async function serveCommand(runtime: Runtime, options: { host?: string; port?: string }): Promise<number> {
  const host = options.host ?? "127.0.0.1";
  const port = Number(options.port ?? 8000);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error("error DUCK_ERR_INVALID_INPUT: --port must be a number from 0 to 65535");
    return 2;
  }
  const token = loadInstallToken(runtime.home);
  if (!LOOPBACK.has(host)) {
    console.error(`warning: serving on ${host}, reachable from other machines. Every request needs the token in ${runtime.home}/token.`);
  }
  const listenPort = port === 0 ? await freePort(host) : port;
  const app = await buildServer({ runtime, token, port: listenPort, extraHosts: LOOPBACK.has(host) ? [] : [host] });
  await app.listen({ host, port: listenPort });
  const shown = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
  console.log(`DuckLM is serving the chat at http://${shown}:${listenPort}/ (API docs at /docs)`);
  await resumeLeftovers(runtime);
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
  console.log("stopping: unfinished tasks will resume at the next start");
  await app.close();
  return 0;
}

function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createNetServer();
    server.once("error", reject);
    server.listen(0, host, () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}
