import { afterEach, describe, expect, it } from "vitest";
import { replayTask } from "../../src/replay/replay-task.js";
import { scriptedAgent } from "../helpers/scripted-agent.js";
import { ofType } from "../helpers/event-payloads.js";
import { useTestRuntimes } from "../helpers/test-runtime.js";

const setup = useTestRuntimes(afterEach);
const DRAFT = "I will answer at once, from what I know about ducks and their ponds.";

/** The draft's deltas and its completion, as recorded. */
function draftRecord(runtime: ReturnType<typeof setup>, taskId: string) {
  const events = runtime.store.listEvents(taskId);
  const deltas = ofType(events, "model-output-delta").filter((delta) => delta.purpose === "draft").map((delta) => delta.text);
  const completed = ofType(events, "model-output-completed").find((done) => done.purpose === "draft")!;
  return { events, deltas, completed };
}

describe("streamed model text is recorded gathered, not a row per chunk", () => {
  it("records a slow output as fewer deltas than the chunks the model sent, which add up to the whole text", async () => {
    // 4 characters every 20 ms: about 18 chunks over 340 ms, gathered every 50 ms.
    const models = scriptedAgent({ directive: { kind: "respond", answer: "ducks" }, draft: DRAFT, streaming: { chunkSize: 4, chunkDelayMs: 20 } });
    const runtime = setup({ models, runtime: { storage: { stream_gather_ms: 50 } } });
    const outcome = await runtime.loop.submit({ text: "tell me about ducks" }).done;
    expect(outcome.state).toBe("completed");
    const { events, deltas, completed } = draftRecord(runtime, outcome.task_id);
    const chunks = Math.ceil(DRAFT.length / 4);
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.length).toBeLessThan(chunks);
    expect(deltas.join("")).toBe(DRAFT);
    expect(completed.text).toBe(DRAFT);
    // The replay plays the gathered deltas where they were recorded.
    const report = await replayTask(events, runtime.config);
    expect(report.first_difference ?? null).toBeNull();
  });

  it("records an output that came whole within one interval by its completion alone", async () => {
    const models = scriptedAgent({ directive: { kind: "respond", answer: "ducks" }, draft: DRAFT, streaming: { chunkSize: 4 } });
    const runtime = setup({ models, runtime: { storage: { stream_gather_ms: 50 } } });
    const outcome = await runtime.loop.submit({ text: "tell me about ducks" }).done;
    const { events, deltas, completed } = draftRecord(runtime, outcome.task_id);
    expect(deltas).toEqual([]);
    expect(completed.text).toBe(DRAFT);
    expect(ofType(events, "model-output-delta")).toEqual([]);
    const report = await replayTask(events, runtime.config);
    expect(report.first_difference ?? null).toBeNull();
  });

  it("records every chunk with stream_gather_ms 0", async () => {
    const models = scriptedAgent({ directive: { kind: "respond", answer: "ducks" }, draft: DRAFT, streaming: { chunkSize: 4 } });
    const runtime = setup({ models, runtime: { storage: { stream_gather_ms: 0 } } });
    const outcome = await runtime.loop.submit({ text: "tell me about ducks" }).done;
    const { deltas } = draftRecord(runtime, outcome.task_id);
    expect(deltas.length).toBe(Math.ceil(DRAFT.length / 4));
    expect(deltas.join("")).toBe(DRAFT);
  });

  it("keeps what a model wrote before it was cancelled", async () => {
    const models = scriptedAgent({ directive: { kind: "respond", answer: "ducks" }, draft: DRAFT.repeat(20), streaming: { chunkSize: 4, chunkDelayMs: 5 } });
    const runtime = setup({ models, runtime: { storage: { stream_gather_ms: 1_000 } } });
    const handle = runtime.loop.submit({ text: "tell me about ducks" });
    // Cancelled mid-draft, well inside the first gathering interval: 150 ms after the draft began.
    await new Promise<void>((resolve) => {
      const stop = runtime.bus.subscribe(handle.taskId, (event) => {
        if (event.type !== "model-output-started" || event.payload.purpose !== "draft") return;
        stop();
        resolve();
      }, { fromSeq: 1 });
    });
    await new Promise((resolve) => setTimeout(resolve, 150));
    runtime.loop.cancel(handle.taskId);
    const outcome = await handle.done;
    expect(outcome.state).toBe("cancelled");
    const { deltas } = draftRecord(runtime, outcome.task_id);
    expect(deltas.length).toBe(1);
    // At least the first chunk, however busy the machine; never the whole draft.
    expect(deltas[0]!.length).toBeGreaterThanOrEqual(4);
    expect(deltas[0]!.length).toBeLessThan(DRAFT.length * 20);
    expect(DRAFT.repeat(20).startsWith(deltas[0]!)).toBe(true);
  });
});
