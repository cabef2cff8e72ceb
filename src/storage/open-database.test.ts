import { existsSync, readdirSync, readlinkSync, statSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { makeTempDir } from "../../test/helpers/test-runtime.js";
import { openDatabase } from "./open-database.js";

/** Commits about 8 MiB, one 8 KiB row at a time, without ever yielding: the checkpoint timer never runs. */
function writeWithoutYielding(walBackstopPages: number): number {
  const file = join(makeTempDir("ducklm-wal-"), "ducklm.sqlite3");
  const database = openDatabase(file, { walBackstopPages, checkpointIntervalMs: 60_000 });
  try {
    database.db.exec("CREATE TABLE filler (id INTEGER PRIMARY KEY, text TEXT NOT NULL)");
    const insert = database.db.prepare("INSERT INTO filler (text) VALUES (?)");
    let largest = 0;
    for (let row = 0; row < 1_000; row += 1) {
      insert.run("x".repeat(8 * 1024));
      if (row % 50 === 0) largest = Math.max(largest, statSync(`${file}-wal`).size);
    }
    return largest;
  } finally {
    database.close();
  }
}

describe("the WAL of a busy process", () => {
  it("stays near its backstop size when the checkpoint timer never gets a turn", () => {
    const MiB = 1024 * 1024;
    // 256 pages: 1 MiB. Without the backstop the WAL holds everything written since the last checkpoint.
    expect(writeWithoutYielding(256)).toBeLessThan(2 * MiB);
    expect(writeWithoutYielding(1_000_000)).toBeGreaterThan(6 * MiB);
  });
});

describe("WAL checkpoints", () => {
  it("copy the WAL back into the file from a worker thread, while the main thread is busy", async () => {
    const file = join(makeTempDir("ducklm-wal-"), "ducklm.sqlite3");
    const database = openDatabase(file, { checkpointIntervalMs: 50 });
    try {
      // The worker starts at the first interval; give it time to open its connection.
      await sleep(1_000);
      const MiB = 1024 * 1024;
      expect(statSync(file).size).toBeLessThan(MiB);
      // The main thread never yields from here on: only another thread can copy the pages back.
      database.db.exec("CREATE TABLE filler (id INTEGER PRIMARY KEY, text TEXT NOT NULL)");
      const insert = database.db.prepare("INSERT INTO filler (text) VALUES (?)");
      for (let row = 0; row < 256; row += 1) insert.run("x".repeat(8 * 1024));
      const started = Date.now();
      while (statSync(file).size < 2 * MiB && Date.now() - started < 10_000);
      expect(statSync(file).size).toBeGreaterThanOrEqual(2 * MiB);
    } finally {
      database.close();
    }
  });
});

describe("closing a database", () => {
  it("leaves no connection of the process open: the checkpoint worker's is closed too", async () => {
    const file = join(makeTempDir("ducklm-wal-"), "ducklm.sqlite3");
    const database = openDatabase(file, { checkpointIntervalMs: 20 });
    await sleep(1_000);
    database.db.exec("CREATE TABLE filler (id INTEGER PRIMARY KEY, text TEXT NOT NULL)");
    database.close();
    // Read at once as close returns: no descriptor of this process (any thread) refers to the file.
    const open = readdirSync("/proc/self/fd").map((fd) => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        return "";
      }
    });
    expect(open.filter((target) => target.startsWith(file))).toEqual([]);
    // The last connection to close folded the WAL back and removed it.
    expect(existsSync(`${file}-wal`)).toBe(false);
  });
});
