import { setTimeout as delay } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { reportedModelCall, type ModelStreamSink } from "./model-stream-sink.js";

describe("a model call's gathered output", () => {
  it("fails the call, not the process, when its gathered text can no longer be recorded", async () => {
    const finished = new DuckError(ErrorCode.TaskFinished, "the task has ended: nothing more is recorded of its run");
    const sink: ModelStreamSink = {
      started() {},
      delta() {
        throw finished;
      },
      completed() {},
      failed() {},
    };
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown) => uncaught.push(error);
    process.on("uncaughtException", onUncaught);
    try {
      const call = reportedModelCall({
        sink,
        role: "thinker",
        purpose: "draft",
        gatherMs: 5,
        rawOf: (text: string) => text,
        call: async (onDelta) => {
          onDelta("first words");
          // The gathering timer fires (and its write is refused) while the model goes on.
          await delay(30);
          return "first words and more";
        },
      });
      await expect(call).rejects.toBe(finished);
    } finally {
      process.off("uncaughtException", onUncaught);
    }
    expect(uncaught).toEqual([]);
  });
});
