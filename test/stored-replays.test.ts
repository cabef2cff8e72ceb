import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readRecording } from "../src/replay/recording-file.js";
import { replayTask } from "../src/replay/replay-task.js";
import { testConfig } from "./helpers/test-runtime.js";

// Recorded task logs kept as regression tests: the current code must drive each to the same events.
const folder = join(import.meta.dirname, "replays");
const files = readdirSync(folder).filter((name) => name.endsWith(".jsonl")).sort();

describe("stored task logs replay against the current code", () => {
  it("has stored logs", () => {
    expect(files.length).toBeGreaterThanOrEqual(8);
  });

  it.each(files)("%s", async (file) => {
    const report = await replayTask(readRecording(join(folder, file)), testConfig());
    expect(report.first_difference).toBeNull();
    expect(report.matches).toBe(true);
  });
});
