import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "vitest";
import type { DuckEvent } from "../../src/contracts/index.js";
import { replayTask } from "../../src/replay/replay-task.js";
import { testConfig } from "./test-runtime.js";

/**
 * What the crash harnesses check of the tasks a run left (see test/fixtures/crash-task.ts): a marker
 * step that ran twice did so only after the user was asked about its unknown outcome and allowed it;
 * no such question was about a step that only reads; and every task replays to its own events.
 * Returns how many steps ran again and how many questions there were.
 */
export async function checkCrashedTasks(byTask: ReadonlyMap<string, DuckEvent[]>, markers: string): Promise<{ repeated: number; unknownOutcome: number }> {
  let repeated = 0;
  for (const file of readdirSync(markers)) {
    const runs = readFileSync(join(markers, file), "utf8").trim().split("\n").length;
    if (runs < 2) continue;
    repeated += 1;
    const [taskId, stepId] = file.split("--") as [string, string];
    const log = byTask.get(taskId) ?? [];
    const asked = log.filter((event) => event.type === "permission-requested" && event.payload.step_id === stepId && String(event.payload.reason).includes("outcome is unknown"));
    const answered = log.filter((event) => event.type === "permission-resolved" && event.payload.step_id === stepId && event.payload.decision === "allow");
    expect(asked.length, `${file} ran ${runs} times`).toBeGreaterThanOrEqual(runs - 1);
    expect(answered.length, `${file} ran ${runs} times`).toBeGreaterThanOrEqual(runs - 1);
  }
  const unknownOutcome = [...byTask.values()].flat().filter((event) => event.type === "permission-requested" && String(event.payload.reason).includes("outcome is unknown"));
  expect(unknownOutcome.filter((event) => (event.payload.call as { tool: string }).tool === "echo")).toEqual([]);
  const config = testConfig();
  const differing: string[] = [];
  for (const [taskId, log] of byTask) {
    const report = await replayTask(log, config);
    if (!report.matches) differing.push(`${taskId}: ${JSON.stringify(report.first_difference).slice(0, 500)}`);
  }
  expect(differing).toEqual([]);
  return { repeated, unknownOutcome: unknownOutcome.length };
}
