import { afterEach, describe, expect, it } from "vitest";
import { scriptedAgent } from "../helpers/scripted-agent.js";
import { useTestRuntimes } from "../helpers/test-runtime.js";
import { createEchoTool } from "../helpers/test-tools.js";

const setup = useTestRuntimes(afterEach);

// Resident memory itself is the soak bench's to measure (`npm run bench:soak`); this checks that the
// structures holding something per task let finished tasks go, so that memory cannot grow with them.
describe("memory held per task", () => {
  it("stays bounded after many tasks: projections, subscribers, delivery marks and leases", async () => {
    const runtime = setup({ tools: [createEchoTool()], models: scriptedAgent({ directive: { kind: "tool", tool: "echo", arguments: { text: "quack" }, reason: "" }, verdict: () => "pass" }) });
    // As the server does: one subscriber to every task (the log), one per task streamed to a client.
    const stopLog = runtime.bus.subscribeAll(() => undefined);
    const TASKS = 600;
    for (let i = 0; i < TASKS; i += 1) {
      const handle = runtime.loop.submit({ text: `soak ${i}` });
      const unsubscribe = runtime.bus.subscribe(handle.taskId, () => undefined, { fromSeq: 1 });
      expect((await handle.done).state).toBe("completed");
      unsubscribe();
    }
    runtime.leases.renew();
    expect(runtime.store.cachedProjections).toBeLessThanOrEqual(256);
    expect(runtime.store.listTasks({ limit: 1000 })).toHaveLength(TASKS);
    expect(runtime.bus.footprint()).toEqual({ tasksWithSubscribers: 0, everyTaskMarks: 0 });
    expect(runtime.leases.footprint).toEqual({ held: 0, releasing: 0, offered: 0 });
    expect(runtime.db.prepare("SELECT count(*) AS n FROM task_leases").get()).toEqual({ n: 0 });
    stopLog();
  }, 120_000);
});
