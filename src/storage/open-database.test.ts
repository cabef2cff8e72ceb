import { statSync } from "node:fs";
import { join } from "node:path";
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
