import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { NEWEST_POSTGRES_VERSION } from "../src/storage/postgres/postgres-schema.js";
import { startTestPostgres, type TestPostgres } from "./helpers/postgres-server.js";
import { createTestRuntime, makeTempDir, useTestRuntimes } from "./helpers/test-runtime.js";

// Resolved here, because `--import tsx` would be looked up from the child's working directory.
const tsxLoader = import.meta.resolve("tsx");
const root = resolve(import.meta.dirname, "..");
const setup = useTestRuntimes(afterEach);

let postgres: TestPostgres;
beforeAll(async () => {
  postgres = await startTestPostgres();
}, 60_000);
afterAll(() => postgres?.stop());

/** A config folder whose runtime.json puts the data in PostgreSQL. */
function postgresConfig(): string {
  const dir = makeTempDir("ducklm-pg-config-");
  writeFileSync(join(dir, "runtime.json"), JSON.stringify({ storage: { backend: "postgres" } }));
  return dir;
}

function ducklm(args: string[], env: Record<string, string>) {
  const result = spawnSync(process.execPath, ["--import", tsxLoader, join(root, "src/cli/main.ts"), ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    encoding: "utf8",
    timeout: 120_000,
    stdio: ["ignore", "pipe", "pipe"],
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe("moving a home from SQLite to PostgreSQL (ducklm migrate --to postgres)", () => {
  it("copies tasks, events, memory and approvals, after which the runtime on PostgreSQL carries on with them", async () => {
    const home = makeTempDir();
    const workspace = makeTempDir("ducklm-ws-");
    writeFileSync(join(workspace, "notes.md"), "# Notes\nducks\n");
    const before = createTestRuntime({ home, workspace });
    const read = before.loop.submit({ text: "read file notes.md" });
    await read.done;
    await before.loop.submit({ text: "remember that the staging server is called heron" }).done;
    const asked = before.loop.submit({ text: "run `awk 'BEGIN{print \"approved\"}' > approved.txt`" });
    const paused = await asked.done;
    await before.loop.resolvePermission(asked.taskId, paused.pending_permissions[0]!.request_id, "allow_always").done;
    const events = before.store.listEvents(read.taskId);
    const taskCount = before.store.listTasks({ limit: 100 }).length;
    await before.close();

    const url = postgres.createDatabase();
    const migrated = ducklm(["--home", home, "migrate", "--to", "postgres"], { DUCKLM_POSTGRES_URL: url, DUCKLM_CONFIG: join(root, "config") });
    expect(migrated.stderr).toBe("");
    expect(migrated.code).toBe(0);
    expect(migrated.stdout).toMatch(/tasks: 3\n/);
    expect(migrated.stdout).toMatch(/set "storage": \{ "backend": "postgres" \}/);

    const after = setup({ home, workspace, runtime: { storage: { backend: "postgres" } }, env: { DUCKLM_POSTGRES_URL: url } });
    expect(after.store.listTasks({ limit: 100 })).toHaveLength(taskCount);
    expect(after.store.listEvents(read.taskId)).toEqual(events);
    expect(after.approvals.list()).toHaveLength(1);
    const recalled = await after.loop.submit({ text: "what do you remember about staging?" }).done;
    expect(recalled.answer).toContain("the staging server is called heron");
    // New rows take ids after the copied ones.
    await after.loop.submit({ text: "remember that the pond freezes in January" }).done;
    const ids = after.memory.store.list(10).map((entry) => entry.id);
    expect(new Set(ids).size).toBe(ids.length);
    // The remembered approval still answers for its command: no question this time.
    const again = await after.loop.submit({ text: "run `awk 'BEGIN{print \"approved\"}' > approved.txt`" }).done;
    expect(again.state).toBe("completed");

    // And `ducklm tasks` on the PostgreSQL config lists them.
    const listed = ducklm(["--home", home, "tasks"], { DUCKLM_POSTGRES_URL: url, DUCKLM_CONFIG: postgresConfig() });
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(read.taskId);

    // Twice into the same database is refused, and changes nothing there.
    const twice = ducklm(["--home", home, "migrate", "--to", "postgres"], { DUCKLM_POSTGRES_URL: url, DUCKLM_CONFIG: join(root, "config") });
    expect(twice.code).toBe(2);
    expect(twice.stderr).toMatch(/DUCK_ERR_INVALID_INPUT: .* already holds DuckLM data .*: migrate into an empty database/);
    expect(after.store.listTasks({ limit: 100 })).toHaveLength(taskCount + 3);
  });

  it("refuses what it cannot do, with a message and a non-zero exit", () => {
    const home = makeTempDir();
    const missing = ducklm(["--home", home, "migrate", "--to", "postgres"], { DUCKLM_POSTGRES_URL: postgres.createDatabase(), DUCKLM_CONFIG: join(root, "config") });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/there is no database at .*ducklm\.sqlite3 to migrate/);
    mkdirSync(join(home, "x"));
    const elsewhere = ducklm(["--home", home, "migrate", "--to", "mysql"], { DUCKLM_CONFIG: join(root, "config") });
    expect(elsewhere.code).toBe(2);
    expect(elsewhere.stderr).toMatch(/--to mysql is not a store DuckLM can migrate to/);
  });

  it("checks the PostgreSQL database in `ducklm doctor`", () => {
    const url = postgres.createDatabase();
    const fresh = ducklm(["--home", makeTempDir(), "doctor"], { DUCKLM_POSTGRES_URL: url, DUCKLM_CONFIG: postgresConfig() });
    expect(fresh.stdout).toMatch(/warn +database +PostgreSQL .+ at postgresql:\/\/ducklm@127\.0\.0\.1:\d+\/\S+: no DuckLM tables yet/);
    setup({ runtime: { storage: { backend: "postgres" } }, env: { DUCKLM_POSTGRES_URL: url } });
    const ready = ducklm(["--home", makeTempDir(), "doctor"], { DUCKLM_POSTGRES_URL: url, DUCKLM_CONFIG: postgresConfig() });
    expect(ready.stdout).toMatch(new RegExp(`ok +database +PostgreSQL .+ at \\S+, schema version ${NEWEST_POSTGRES_VERSION} of ${NEWEST_POSTGRES_VERSION}`));
    const unset = ducklm(["--home", makeTempDir(), "doctor"], { DUCKLM_POSTGRES_URL: "", DUCKLM_CONFIG: postgresConfig() });
    expect(unset.code).toBe(1);
    expect(unset.stdout).toMatch(/FAIL +database +.*DUCKLM_POSTGRES_URL is not set/);
  });
});
