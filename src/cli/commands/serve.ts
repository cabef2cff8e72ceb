import { spawn } from "node:child_process";
import { readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createNetServer } from "node:net";
import { join } from "node:path";
import type { Command } from "commander";
import { DuckError, ErrorCode } from "../../errors/duck-error.js";
import type { DuckLM } from "../../runtime/ducklm.js";
import { isProcessAlive } from "../../utils/process-alive.js";
import { startAndResume } from "../follow-task.js";
import { TASK_RUNNER, withDuckLM, type GlobalOptions } from "../with-ducklm.js";

const LOOPBACK = new Set(["127.0.0.1", "localhost", "::1"]);

/** Where the running servers say how to reach them, so `ducklm login` can print a link for one. */
function serverFile(home: string): string {
  return join(home, "server.json");
}

interface RunningServer {
  url: string;
  pid: number;
}

/** The servers server.json names (one or more may have died without taking their line out). */
function readServers(home: string): RunningServer[] {
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(serverFile(home), "utf8"));
  } catch {
    return [];
  }
  const listed = value && typeof value === "object" && "servers" in value && Array.isArray(value.servers) ? (value.servers as unknown[]) : [value];
  return listed.filter((entry): entry is RunningServer => !!entry && typeof entry === "object" && typeof (entry as RunningServer).url === "string" && Number.isInteger((entry as RunningServer).pid));
}

/** Written whole, then renamed over: a reader never sees half a file. */
function writeServers(home: string, servers: RunningServer[]): void {
  if (servers.length === 0) {
    rmSync(serverFile(home), { force: true });
    return;
  }
  const partial = `${serverFile(home)}.${process.pid}.tmp`;
  writeFileSync(partial, `${JSON.stringify({ servers })}\n`, { mode: 0o600 });
  renameSync(partial, serverFile(home));
}

/** Another `ducklm serve` on this home keeps its line: each takes out only its own. */
function recordServer(home: string, url: string | null): void {
  const others = readServers(home).filter((server) => server.pid !== process.pid && isProcessAlive(server.pid));
  writeServers(home, url === null ? others : [...others, { url, pid: process.pid }]);
}

/** A server named in server.json that answers at its address as the process it was recorded as. */
async function answers(server: RunningServer): Promise<boolean> {
  if (!isProcessAlive(server.pid)) return false;
  try {
    const response = await fetch(new URL("health", server.url), { signal: AbortSignal.timeout(3000) });
    const health = (await response.json()) as { worker?: { pid?: number } };
    return response.ok && health.worker?.pid === server.pid;
  } catch {
    return false;
  }
}

function openInBrowser(url: string): void {
  const opener = process.platform === "darwin" ? "open" : process.platform === "win32" ? "explorer" : "xdg-open";
  const child = spawn(opener, [url], { stdio: "ignore", detached: true });
  child.on("error", () => console.error(`could not start ${opener}; open the link yourself`));
  child.unref();
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

/** `ducklm serve`: the HTTP API, live streaming and the web chat, on 127.0.0.1:8000 unless told otherwise. */
async function serve(ducklm: DuckLM, options: { host?: string; port?: string; open?: boolean }): Promise<number> {
  const host = options.host ?? "127.0.0.1";
  const port = Number(options.port ?? 8000);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error("error DUCK_ERR_INVALID_INPUT: --port must be a number from 0 to 65535");
    return 2;
  }
  try {
    await (await import("node:dns/promises")).lookup(host);
  } catch {
    throw new DuckError(ErrorCode.InvalidInput, `--host ${host} is neither an address nor a name this machine can resolve: give one of its addresses (127.0.0.1 stays local, 0.0.0.0 listens on all of them)`);
  }
  const { loadInstallToken } = await import("../../server/install-token.js");
  const { buildServer } = await import("../../server/build-server.js");
  const token = loadInstallToken(ducklm.home);
  const listenFailure = (error: unknown, listenPort: number): unknown => {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EADDRINUSE") return new DuckError(ErrorCode.InvalidInput, `port ${listenPort} on ${host} is already in use (another DuckLM, or another program): choose another with --port, or --port 0 for any free one`);
    if (code === "EADDRNOTAVAIL") return new DuckError(ErrorCode.InvalidInput, `${host} is not an address of this machine: choose one with --host (127.0.0.1 to stay local)`);
    if (code === "EACCES") return new DuckError(ErrorCode.InvalidInput, `port ${listenPort} needs privileges this user does not have: choose one above 1023 with --port`);
    return error;
  };
  let listenPort = port;
  try {
    if (port === 0) listenPort = await freePort(host);
  } catch (error) {
    throw listenFailure(error, port);
  }
  const app = await buildServer({ ducklm, token, port: listenPort, extraHosts: LOOPBACK.has(host) ? [] : [host], requestLog: ducklm.logger.child({ component: "http" }) });
  try {
    await app.listen({ host, port: listenPort });
  } catch (error) {
    await app.close();
    throw listenFailure(error, listenPort);
  }
  if (!LOOPBACK.has(host)) console.error(`warning: serving on ${host}, reachable from other machines. Every request needs a login or the token in ${ducklm.home}/token.`);
  const shown = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
  const base = `http://${shown}:${listenPort}/`;
  recordServer(ducklm.home, base);
  const login = `${base}login?code=${ducklm.logins.issueCode()}`;
  console.log(`DuckLM is serving the chat at ${base} (API docs at /docs)`);
  console.log(`Log in by opening ${login}`);
  console.log("(the link works once, for 15 minutes; `ducklm login` prints a new one)");
  if (options.open) openInBrowser(login);
  // The last resort: an error nothing caught is logged, and the server goes on serving the other tasks.
  // Never through a logger that is itself what failed: an error while logging one is written plainly.
  let inLastResort = false;
  const lastResort = (kind: string) => (error: unknown) => {
    if (inLastResort) return;
    inLastResort = true;
    try {
      ducklm.logger.error({ err: error }, `${kind}: kept serving`);
    } catch {
      try {
        process.stderr.write(`${kind}: ${error instanceof Error ? error.message : String(error)}: kept serving\n`);
      } catch {
        // Nowhere left to say it.
      }
    } finally {
      inLastResort = false;
    }
  };
  process.on("unhandledRejection", lastResort("unhandled rejection"));
  process.on("uncaughtException", lastResort("uncaught exception"));
  // A server runs for long: it also carries on tasks whose process stops while it runs.
  await startAndResume(ducklm, { adoptOrphans: true });
  await new Promise<void>((resolve) => {
    process.once("SIGINT", () => resolve());
    process.once("SIGTERM", () => resolve());
    process.once("SIGHUP", () => resolve());
    // Started by `npm start`: a process manager that stops npm without passing the signal on (or
    // kills it outright) must not leave this server running without a parent.
    if (process.env.npm_lifecycle_event === "start") {
      const parent = process.ppid;
      setInterval(() => {
        if (process.ppid !== parent) resolve();
      }, 1000).unref();
    }
  });
  console.log("stopping: unfinished tasks will resume at the next start");
  // Stopping never waits for ever (a log writer or a tool that does not end): past the grace period
  // the process exits all the same, and a second signal exits at once.
  setTimeout(() => {
    process.stderr.write(`could not stop within ${STOP_GRACE_MS / 1000} s: exiting anyway; unfinished tasks resume at the next start\n`);
    process.exit(1);
  }, STOP_GRACE_MS).unref();
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.once(signal, () => process.exit(130));
  recordServer(ducklm.home, null);
  await app.close();
  return 0;
}

/**
 * `ducklm login`: a new one-time login link for a server running on this home: the newest one that
 * answers at its address as the process server.json names (a dead server's line, or a PID taken
 * since by another program, gets no link).
 */
async function login(ducklm: DuckLM, options: { open?: boolean }): Promise<number> {
  let running: RunningServer | null = null;
  for (const server of readServers(ducklm.home).reverse()) {
    if (await answers(server)) {
      running = server;
      break;
    }
  }
  if (!running) {
    throw new DuckError(ErrorCode.ServerNotRunning, `no DuckLM server is running on ${ducklm.home}; start one with \`ducklm serve\` (it prints a login link)`);
  }
  const link = `${running.url}login?code=${ducklm.logins.issueCode()}`;
  console.log(link);
  if (options.open) openInBrowser(link);
  return 0;
}

/** How long `serve` may take to stop after a signal before it exits regardless. */
export const STOP_GRACE_MS = 10_000;

export function registerServe(program: Command): void {
  program
    .command("serve")
    .description("serve the HTTP API, live streaming and the web chat (default http://127.0.0.1:8000/)")
    .option("--host <host>", "address to bind (default 127.0.0.1; anything else is reachable from other machines)")
    .option("--port <port>", "port (default 8000; 0 picks a free one)")
    .option("--open", "open the one-time login link in the browser")
    .action(async (options: { host?: string; port?: string; open?: boolean }) => withDuckLM(program.opts<GlobalOptions>(), (ducklm) => serve(ducklm, options), { ...TASK_RUNNER, longRunning: true }));

  program
    .command("login")
    .description("print a new one-time link that logs a browser into the running `ducklm serve`")
    .option("--open", "open it in the browser")
    .action(async (options: { open?: boolean }) => withDuckLM(program.opts<GlobalOptions>(), (ducklm) => login(ducklm, options)));
}
