import { spawnSync } from "node:child_process";
import { closeSync, existsSync, openSync, readdirSync, statSync, truncateSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { checkDatabaseFile, recoverDatabaseFile } from "../src/state/database-repair.js";
import { checkDatabase } from "./helpers/database-checks.js";
import { scriptedAgent } from "./helpers/scripted-agent.js";
import { createTestRuntime, makeTempDir } from "./helpers/test-runtime.js";
import { startTestServer } from "./helpers/test-server.js";
import { createEchoTool } from "./helpers/test-tools.js";

const root = join(import.meta.dirname, "..");
const tsxLoader = import.meta.resolve("tsx");
const homes: string[] = [];
afterEach(() => {
  homes.length = 0;
});

interface StoredEvent {
  id: number;
  task_id: string;
  seq: number;
  type: string;
  time: string;
  payload: string;
}

/** A home with finished tasks and memories, closed, and every event as it was stored. */
async function populatedHome(tasks = 40, options: { longOutputs?: boolean } = {}): Promise<{ home: string; file: string; original: Map<string, StoredEvent[]> }> {
  const home = makeTempDir("ducklm-damage-");
  homes.push(home);
  if (options.longOutputs) {
    // Without a model, each task reads its own long file: one blob per task, referred to by its events, checkpoint and row.
    const runtime = createTestRuntime({ home });
    for (let i = 0; i < tasks; i += 1) {
      writeFileSync(join(runtime.workspace, `f${i}.txt`), `file ${i}\n${"quack ".repeat(3000)}`);
      expect((await runtime.loop.submit({ text: `read file f${i}.txt` }).done).state).toBe("completed");
    }
    await runtime.dispose();
  } else {
    const runtime = createTestRuntime({
      home,
      tools: [createEchoTool()],
      models: scriptedAgent({ directive: { kind: "tool", tool: "echo", arguments: { text: "quack ".repeat(80) }, reason: "say it" } }),
    });
    for (let i = 0; i < tasks; i += 1) await runtime.loop.submit({ text: `task ${i}` }).done;
    runtime.memory.store.insert({ text: "Ducks like bread.", kind: "fact" });
    await runtime.dispose();
  }
  const file = join(home, "ducklm.sqlite3");
  const db = new Database(file, { readonly: true });
  const original = new Map<string, StoredEvent[]>();
  for (const row of db.prepare("SELECT id, task_id, seq, type, time, payload FROM events ORDER BY task_id, seq").all() as StoredEvent[]) {
    original.set(row.task_id, [...(original.get(row.task_id) ?? []), row]);
  }
  db.close();
  return { home, file, original };
}

function eventsIn(file: string): Map<string, StoredEvent[]> {
  const db = new Database(file, { readonly: true });
  const found = new Map<string, StoredEvent[]>();
  for (const row of db.prepare("SELECT id, task_id, seq, type, time, payload FROM events ORDER BY task_id, seq").all() as StoredEvent[]) {
    found.set(row.task_id, [...(found.get(row.task_id) ?? []), row]);
  }
  db.close();
  return found;
}

/** Each recovered task has exactly its original events from the start (all of them, or a prefix), and the file is consistent. */
function expectFaithful(file: string, original: Map<string, StoredEvent[]>): Map<string, StoredEvent[]> {
  const recovered = eventsIn(file);
  for (const [taskId, events] of recovered) expect(events, taskId).toEqual(original.get(taskId)!.slice(0, events.length));
  const report = checkDatabase(file);
  expect(report.integrity).toBe("ok");
  expect(report.tasksWithGaps).toEqual([]);
  expect(report.rowsOutOfStep).toEqual([]);
  expect(report.projectionsDiffering).toEqual([]);
  expect(checkDatabaseFile(file).ok).toBe(true);
  return recovered;
}

async function getJson(server: { url: string; token: string }, path: string) {
  const response = await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${server.token}` } });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

function ducklm(home: string, args: string[]) {
  const result = spawnSync(process.execPath, ["--import", tsxLoader, join(root, "src/cli/main.ts"), ...args], {
    env: { ...process.env, DUCKLM_HOME: home, DUCKLM_CONFIG: join(root, "config") },
    encoding: "utf8",
    timeout: 60_000,
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe("a damaged database", () => {
  it("with an overwritten page: check names the damage, recover keeps every task whose events can still be read", async () => {
    const { file, original } = await populatedHome();
    const db = new Database(file, { readonly: true });
    const pageSize = db.pragma("page_size", { simple: true }) as number;
    const leaves = (db.prepare("SELECT pageno FROM dbstat WHERE name = 'events' AND pagetype = 'leaf' ORDER BY pageno").all() as Array<{ pageno: number }>).map((row) => row.pageno);
    db.close();
    expect(leaves.length).toBeGreaterThan(4);
    const hit = leaves[Math.floor(leaves.length / 2)]!;
    const handle = openSync(file, "r+");
    writeSync(handle, Buffer.alloc(pageSize, 0xa5), 0, pageSize, (hit - 1) * pageSize);
    closeSync(handle);

    const check = checkDatabaseFile(file);
    expect(check.ok).toBe(false);
    expect([...check.integrity, ...check.problems].join("\n")).not.toBe("ok");

    // The oracle: a task is intact when every one of its original rows reads back unchanged.
    const damaged = new Database(file, { readonly: true });
    const read = damaged.prepare("SELECT id, task_id, seq, type, time, payload FROM events WHERE id = ?");
    const intact = [...original].filter(([, events]) =>
      events.every((event) => {
        try {
          return JSON.stringify(read.get(event.id)) === JSON.stringify(event);
        } catch {
          return false;
        }
      }),
    );
    damaged.close();
    expect(intact.length).toBeGreaterThan(original.size / 2);
    expect(intact.length).toBeLessThan(original.size);

    const report = recoverDatabaseFile(file);
    expect(existsSync(report.damaged_copy)).toBe(true);
    const recovered = expectFaithful(file, original);
    for (const [taskId, events] of intact) expect(recovered.get(taskId), taskId).toEqual(events);
    expect(report.tasks_kept).toBe(recovered.size);
    expect(report.memories_kept).toBe(1);
  }, 120_000);

  it("with the events table's root page overwritten: a task says the database is damaged, check answers at once in a few lines, recover counts what was lost", async () => {
    const { home, file, original } = await populatedHome(12);
    const db = new Database(file, { readonly: true });
    const pageSize = db.pragma("page_size", { simple: true }) as number;
    const root = (db.prepare("SELECT rootpage FROM sqlite_master WHERE name = 'events'").get() as { rootpage: number }).rootpage;
    db.close();
    const handle = openSync(file, "r+");
    writeSync(handle, Buffer.alloc(pageSize, 0xff), 0, pageSize, (root - 1) * pageSize);
    closeSync(handle);

    const run = ducklm(home, ["run", "read file x.txt"]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/error DUCK_ERR_DATABASE_CORRUPT: .*damaged .*ducklm db check.*ducklm db recover/);
    // No row can be found: said once, not once for each rowid there might have been.
    const check = checkDatabaseFile(file);
    expect(check.ok).toBe(false);
    expect(check.problems.filter((line) => line.startsWith("events:"))).toEqual([
      expect.stringMatching(/^events: cannot be read straight through/),
      "events: rows from 1 on cannot be read (the table's index to its last rows is damaged)",
    ]);
    const report = recoverDatabaseFile(file);
    expect(report.tasks_lost.length).toBe(original.size);
    expect(report.events_lost).toBe([...original.values()].reduce((sum, events) => sum + events.length, 0));
  }, 120_000);

  it("truncated: every command names the damage and the way forward; recover keeps what is left", async () => {
    const { home, file, original } = await populatedHome();
    truncateSync(file, Math.floor(statSync(file).size * 0.6));
    const listing = ducklm(home, ["tasks"]);
    expect(listing.code).toBe(1);
    expect(listing.stderr).toMatch(/error DUCK_ERR_DATABASE_CORRUPT: .*ducklm\.sqlite3 is damaged .*ducklm db check.*ducklm db recover/);
    const checked = ducklm(home, ["db", "check"]);
    expect(checked.code).toBe(1);
    expect(checked.stdout).toContain("damaged");
    const recovered = ducklm(home, ["db", "recover"]);
    expect(recovered.code, recovered.stderr).toBe(0);
    expect(recovered.stdout).toMatch(/tasks kept: \d+/);
    expect(readdirSync(home).some((name) => name.startsWith("ducklm.sqlite3.damaged-"))).toBe(true);
    const kept = expectFaithful(file, original);
    expect(kept.size).toBeGreaterThan(0);
    const after = ducklm(home, ["tasks"]);
    expect(after.code, after.stderr).toBe(0);
  }, 180_000);

  it("with a row that is not valid JSON: lists still answer, check finds the row, recover cuts only that task short", async () => {
    const { home, file, original } = await populatedHome(12);
    const [victim, victimEvents] = [...original][5]!;
    const broken = victimEvents[6]!;
    const writer = new Database(file);
    writer.prepare("UPDATE events SET payload = '{\"step_id\": \"step-1\", \"resu' WHERE id = ?").run(broken.id);
    writer.prepare("DELETE FROM checkpoints WHERE task_id = ?").run(victim);
    writer.close();

    const server = await startTestServer({ home });
    try {
      const get = (path: string) => getJson(server, path);
      // One bad row does not take the whole feed or the task's list down.
      const feed = await get("/events?limit=1000");
      expect(feed.status).toBe(200);
      const events = await get(`/tasks/${victim}/events`);
      expect(events.status).toBe(200);
      expect(JSON.stringify(events.body)).toContain("damaged_payload");
      // The task itself cannot be known from its events: a coded error, not a crash.
      const task = await get(`/tasks/${victim}`);
      expect(task.status).toBe(500);
      expect(task.body).toMatchObject({ error: { code: "DUCK_ERR_DATABASE_CORRUPT" } });
      expect((await get(`/tasks/${[...original.keys()][0]}`)).status).toBe(200);
    } finally {
      await server.close();
    }

    const check = checkDatabaseFile(file);
    expect(check.integrity).toEqual(["ok"]);
    expect(check.problems.join("\n")).toContain(`row ${broken.id} (task ${victim}, seq ${broken.seq}) is not valid JSON`);
    const report = recoverDatabaseFile(file);
    expect(report.tasks_cut_short).toEqual([{ task_id: victim, kept_through_seq: broken.seq - 1, events_lost: victimEvents.length - broken.seq + 1 }]);
    const recovered = expectFaithful(file, original);
    expect(recovered.get(victim)).toEqual(victimEvents.slice(0, broken.seq - 1));
    for (const [taskId, list] of original) if (taskId !== victim) expect(recovered.get(taskId), taskId).toEqual(list);
  }, 120_000);

  it("with a long text (blob) missing: lists still answer, check names it, recover keeps the task up to the event before", async () => {
    const { home, file, original } = await populatedHome(6, { longOutputs: true });
    const writer = new Database(file);
    const blobCount = (writer.prepare("SELECT count(*) AS n FROM blobs").get() as { n: number }).n;
    expect(blobCount).toBeGreaterThanOrEqual(6);
    const [victim, victimEvents] = [...original][2]!;
    // The first of the victim's events that refers to a blob: the tool result carrying the long text.
    const firstReferring = victimEvents.find((event) => event.payload.includes("\\u0000blob:"))!;
    const hash = /\\u0000blob:([0-9a-f]{64})/.exec(firstReferring.payload)![1]!;
    expect((writer.prepare("SELECT count(*) AS n FROM blob_refs WHERE hash = ?").get(hash) as { n: number }).n).toBe(1);
    writer.prepare("DELETE FROM blobs WHERE hash = ?").run(hash);
    writer.close();

    const server = await startTestServer({ home });
    try {
      const get = (path: string) => getJson(server, path);
      const list = await get("/tasks?limit=100");
      expect(list.status).toBe(200);
      expect(JSON.stringify(list.body)).toContain("the stored answer cannot be read");
      expect((await get("/events?limit=1000")).status).toBe(200);
      expect(JSON.stringify((await get(`/tasks/${victim}/events`)).body)).toContain("damaged_payload");
      const other = await get(`/tasks/${[...original.keys()][0]}`);
      expect(other.status).toBe(200);
    } finally {
      await server.close();
    }

    const check = checkDatabaseFile(file);
    expect(check.ok).toBe(false);
    expect(check.problems.join("\n")).toContain(`row ${firstReferring.id} (task ${victim}, seq ${firstReferring.seq}) refers to a long text (blob) that is missing or damaged`);
    expect(check.problems.join("\n")).toContain(`the answer of task ${victim} refers to a long text`);
    const report = recoverDatabaseFile(file);
    expect(report.tasks_cut_short).toEqual([{ task_id: victim, kept_through_seq: firstReferring.seq - 1, events_lost: victimEvents.length - firstReferring.seq + 1 }]);
    const recovered = expectFaithful(file, original);
    for (const [taskId, list] of original) if (taskId !== victim) expect(recovered.get(taskId), taskId).toEqual(list);
    const db = new Database(file, { readonly: true });
    expect((db.prepare("SELECT count(*) AS n FROM blobs").get() as { n: number }).n).toBe(blobCount - 1);
    db.close();
  }, 120_000);
});
