import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPostgres, type TestPostgres } from "./helpers/postgres-server.js";
import { createTestRuntime, type TestRuntime } from "./helpers/test-runtime.js";

// A local PostgreSQL server trusts a socket peer (here: any connection, as trust auth does; in a
// real install: peer auth, the same OS user). A shell command that reached DuckLM's server could
// write approvals straight into its tables, past every question: it must not reach it.

let postgres: TestPostgres;
let socketDir: string;
let runtime: TestRuntime;
let url: string;
let database: string;
const bwrap = spawnSync("sh", ["-c", "command -v bwrap"]).status === 0;

beforeAll(async () => {
  // Outside /tmp, which commands get a private one of: the socket is where a real install keeps it.
  socketDir = mkdtempSync("/var/tmp/ducklm-pg-socket-");
  postgres = await startTestPostgres({ socketDir });
  // Open to every user, as a distribution's /run/postgresql is.
  chmodSync(socketDir, 0o755);
  url = postgres.createDatabase();
  database = new URL(url).pathname.slice(1);
  // Over TCP, under a variable name of the user's choosing: the socket folder is named nowhere in it,
  // so only the server itself can say where its sockets are; and nothing in the value looks secret,
  // so only its name keeps it from commands. Another credential rides in a query parameter.
  process.env.DATABASE_URL = `postgresql://ducklm@127.0.0.1:${new URL(url).port}/${database}`;
  process.env.REPORTING_DB = `postgresql://reporter@db.example/reports?password=hunter2`;
  runtime = createTestRuntime({
    runtime: { storage: { backend: "postgres", postgres_url_env: "DATABASE_URL" }, sandbox: { mode: bwrap ? "bwrap" : "auto" }, retry: { max_step_retries: 0 } },
    env: process.env,
  });
  await runtime.ready();
}, 60_000);

afterAll(async () => {
  delete process.env.DATABASE_URL;
  delete process.env.REPORTING_DB;
  await runtime?.dispose();
  postgres?.stop();
  rmSync(socketDir, { recursive: true, force: true });
});

/** Runs a command as a task whose user allows whatever it asks: what it printed; fails the test if it never ran. */
async function attempt(command: string): Promise<string> {
  const handle = runtime.loop.submit({ text: `run \`${command}\``, auto_approve: ["unknown"] });
  let outcome = await handle.done;
  for (let asked = 0; outcome.state === "awaiting_permission" && asked < 3; asked += 1) {
    outcome = await runtime.loop.resolvePermission(handle.taskId, outcome.pending_permissions[0]!.request_id, "allow").done;
  }
  const result = runtime.store.listEvents(outcome.task_id).find((event) => event.type === "tool-result")?.payload.result as { output: string } | undefined;
  expect(result, `${command} did not run: ${outcome.state} ${JSON.stringify(outcome.error)}`).toBeDefined();
  return result!.output;
}

describe.runIf(bwrap)("a task on a runtime whose store is PostgreSQL", () => {
  it("cannot reach DuckLM's database server, by its socket or over loopback, and so cannot grant itself an approval", async () => {
    const insert = `INSERT INTO approvals (id, command, cwd, category, created_at) VALUES ('planted', 'make deploy', '/', 'unknown', '2026-01-01')`;
    // Outside a sandbox the same command works: what stops it below is the confinement.
    const port = new URL(postgres.url()).port;
    expect(execFileSync("psql", ["-h", socketDir, "-p", port, "-U", "ducklm", "-d", database, "-Atc", "SELECT 1"], { encoding: "utf8" }).trim()).toBe("1");
    const bySocket = await attempt(`psql -h ${socketDir} -p ${port} -U ducklm -d ${database} -c "${insert}" 2>&1; ls -a ${socketDir}`);
    expect(bySocket).not.toContain("INSERT 0 1");
    // Its socket folder is hidden, and no Unix socket can be opened anyway.
    expect(bySocket).toMatch(/No such file or directory|Operation not permitted/);
    expect(bySocket.split("\n").filter((line) => line.includes(".s.PGSQL") && !line.startsWith("psql: error"))).toEqual([]);
    const byLoopback = await attempt(`psql -h 127.0.0.1 -p ${port} -U ducklm -d ${database} -c "${insert}" 2>&1`);
    expect(byLoopback).not.toContain("INSERT 0 1");
    const byDefaultSockets = await attempt("ls -a /run/postgresql /var/run/postgresql 2>&1");
    expect(byDefaultSockets).not.toContain(".s.PGSQL");
    const byEnvironment = await attempt("env");
    expect(byEnvironment).not.toContain("hunter2");
    expect(byEnvironment).not.toContain("DATABASE_URL");
    expect(runtime.approvals.list()).toEqual([]);
    expect(execFileSync("psql", ["-h", socketDir, "-p", port, "-U", "ducklm", "-d", database, "-Atc", "SELECT COUNT(*) FROM approvals"], { encoding: "utf8" }).trim()).toBe("0");
  });
});
