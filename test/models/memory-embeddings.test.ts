import pino from "pino";
import { describe, expect, it } from "vitest";
import { LlamaCppProvider } from "../../src/models/llama/llama-cpp-provider.js";
import { fixtureModelsConfig } from "../helpers/fixture-models.js";
import { createTestRuntime, makeTempDir } from "../helpers/test-runtime.js";

describe("memory on the fixture embedding model", () => {
  it("embeds entries, finds them through the vector index, and rebuilds the index for a fresh process", async () => {
    const home = makeTempDir();
    const provider = () => new LlamaCppProvider({ config: fixtureModelsConfig(), modelsDir: "/", logger: pino({ level: "silent" }) });
    const first = createTestRuntime({ home, models: provider() });
    await first.ready();
    expect(first.memory.vectorSearch).toBe(true);
    for (const text of ["the pond freezes in January", "ducks migrate south", "the barn door squeaks"]) await first.memory.remember(text, "fact", null);
    const hits = await first.memory.recall("ducks migrate south", 3);
    expect(hits[0]!.entry.text).toBe("ducks migrate south");
    expect(hits[0]!.matched_by).toContain("vector");
    expect(first.memory.stats()).toMatchObject({ entries: 3, with_embedding: 3, vector_index: { entries: 3 } });
    await first.dispose();

    const second = createTestRuntime({ home, models: provider() });
    await second.ready();
    expect(second.memory.index!.size).toBe(3);
    expect((await second.memory.recall("ducks migrate south", 1))[0]!.entry.text).toBe("ducks migrate south");
    await second.dispose();
  }, 60_000);
});
