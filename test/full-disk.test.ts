import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { closeSync, existsSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterEach, describe, expect, it } from "vitest";
import { REPO_ROOT } from "./helpers/cli-child.js";
import { makeTempDir } from "./helpers/test-runtime.js";

// DuckLM's home on a small filesystem of its own (a tmpfs in a mount namespace of the test's, so
// nothing of the machine fills up) that fills while the server runs: an outage, not a crash. The
// server must stay responsive and calm, say so over HTTP, lose nothing, pick the cut-off task up as
// soon as there is room, write its log again, and stop when told. Started on a full disk, it says so.

const tsxLoader = import.meta.resolve("tsx");
const main = join(REPO_ROOT, "src/cli/main.ts");
const canMount = spawnSync("unshare", ["-Urm", "true"]).status === 0;
const children: ChildProcess[] = [];

afterEach(() => {
  for (const child of children.splice(0)) child.kill("SIGKILL");
});

/** A shell in a user and mount namespace of its own, with a `size` tmpfs mounted at `mount`. */
function inSmallDisk(mount: string, size: string, script: string): ChildProcess {
  const child = spawn("unshare", ["-Urm", "sh", "-c", `mount -t tmpfs -o size=${size} none "${mount}" && ${script}`], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, DUCKLM_LOG_LEVEL: "info" } });
  children.push(child);
  return child;
}

/** Fills the filesystem under `folder` to the last byte; returns the file that holds the filling. */
function fill(folder: string): string {
  const file = join(folder, "filler");
  const fd = openSync(file, "w");
  const chunk = Buffer.alloc(256 * 1024);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error;
  }
  // And the last crumbs a smaller write still finds.
  try {
    for (;;) writeSync(fd, Buffer.alloc(512));
  } catch {
    // Full.
  }
  closeSync(fd);
  return file;
}

/** CPU seconds a process has used (user and system), from /proc. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function until<T>(read: () => T | null | undefined | false | Promise<T | null | undefined | false>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Bytes of the server's log files so far. */
function logBytes(logs: string): number {
  if (!existsSync(logs)) return 0;
  return readdirSync(logs).filter((name) => name.startsWith("server")).reduce((total, name) => total + statSync(join(logs, name)).size, 0);
}

describe.runIf(canMount)("a full disk under a running server", () => {
  it("is an outage: calm, said over HTTP, nothing lost, the cut-off task carried on once there is room, the log written again, and SIGTERM obeyed", async () => {
    const mount = makeTempDir("ducklm-full-");
    const workspace = makeTempDir("ducklm-full-ws-");
    const server = inSmallDisk(mount, "24m", `exec "${process.execPath}" --import "${tsxLoader}" "${main}" --home "${mount}/home" --workspace "${workspace}" serve --port 0`);
    let stderr = "";
    server.stderr!.on("data", (chunk) => (stderr += chunk));
    const lines: string[] = [];
    createInterface({ input: server.stdout! }).on("line", (line) => lines.push(line));
    const base = await until(() => /serving the chat at (http:\/\/\S+?)\/? /.exec(lines.join("\n"))?.[1], 60_000, `the server to start (${stderr})`);
    // The tmpfs as the test sees it: through the server's own root.
    const disk = `/proc/${server.pid}/root${mount}`;
    const token = readFileSync(join(disk, "home", "token"), "utf8").trim();
    const post = (body: unknown) => fetch(`${base}/chat`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify(body) });
    const taskState = async (taskId: string) => ((await (await fetch(`${base}/tasks/${taskId}`, { headers: { authorization: `Bearer ${token}` } })).json()) as { state?: string; task?: { state: string } });

    // A task that is running when the disk fills: its next record cannot be stored.
    const started = (await (await post({ text: "run `sleep 3 && echo carried-on`", auto_approve: ["unknown"] })).json()) as { task_id: string };
    await new Promise((resolve) => setTimeout(resolve, 600));
    const filler = fill(disk);
    const filledAt = Date.now();

    // While full: writes are refused with a 503 that says when to try again; the process keeps calm.
    const refused = await until(async () => {
      const answer = await post({ text: "say hello" });
      return answer.status === 503 && answer;
    }, 20_000, "a write to be refused");
    expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("DUCK_ERR_DISK_FULL");
    const health = (await (await fetch(`${base}/health`, { headers: { authorization: `Bearer ${token}` } })).json()) as { status: string };
    expect(health.status).toBe("degraded");
    const cpuBefore = cpuSeconds(server.pid!);
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    // Not the 100% of a log stream failing over and over: well under half a core.
    expect((cpuSeconds(server.pid!) - cpuBefore) / 4).toBeLessThan(0.5);
    expect(Date.now() - filledAt).toBeGreaterThan(3_000);

    // Room again: the cut-off task carries on within seconds, and the log is written again.
    const logs = join(disk, "home", "logs");
    const logBefore = logBytes(logs);
    rmSync(filler);
    const freedAt = Date.now();
    await until(async () => {
      const state = await taskState(started.task_id);
      return (state.state ?? state.task?.state) === "completed";
    }, 10_000, "the cut-off task to complete after space returned").catch(async (error: Error) => {
      throw new Error(`${error.message}: ${JSON.stringify(await taskState(started.task_id)).slice(0, 400)}; ${stderr.slice(-3000)}`);
    });
    expect(Date.now() - freedAt).toBeLessThan(10_000);
    expect((await post({ text: "say hello" })).status).toBe(202);
    await until(() => logBytes(logs) > logBefore, 15_000, "the log to be written again");
    // The log's writer died of the full disk: its records went to standard error meanwhile, and it came back.
    expect(stderr).toMatch(/the log file cannot be written/);
    expect(stderr).toMatch(/the log file is written again/);

    const stopping = Date.now();
    server.kill("SIGTERM");
    const code = await new Promise<number | null>((resolve) => server.on("exit", (exitCode) => resolve(exitCode)));
    expect(Date.now() - stopping).toBeLessThan(12_000);
    expect(code).toBe(0);
  }, 180_000);

  it("refuses to start on a full disk with DUCK_ERR_DISK_FULL, and `db check` says the disk is full, not that the database is damaged", async () => {
    const mount = makeTempDir("ducklm-full-start-");
    const home = `${mount}/home`;
    const cli = `"${process.execPath}" --import "${tsxLoader}" "${main}" --home "${home}"`;
    // A home with a database, then the disk filled, then the server started.
    const child = inSmallDisk(mount, "8m", `${cli} tasks > /dev/null && dd if=/dev/zero of="${mount}/filler" bs=64k 2>/dev/null; ${cli} serve --port 0; echo "serve exit $?"; ${cli} db check; echo "check exit $?"`);
    let output = "";
    child.stdout!.on("data", (chunk) => (output += chunk));
    child.stderr!.on("data", (chunk) => (output += chunk));
    await new Promise((resolve) => child.on("exit", resolve));
    expect(output).toMatch(/error DUCK_ERR_DISK_FULL: the disk that holds .*home is full/);
    expect(output).toMatch(/serve exit 1/);
    expect(output).toMatch(/check exit 1/);
    expect(output).not.toMatch(/damaged/);
    expect(output).not.toMatch(/SIGBUS|Emitted 'error' event/);
  }, 120_000);
});
