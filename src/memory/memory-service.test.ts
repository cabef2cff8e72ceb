import { rmSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { RuntimeConfigSchema } from "../config/config-schemas.js";
import type { EmbeddingProvider } from "../models/model-provider.js";
import { openDatabase, type DuckDatabase } from "../storage/open-database.js";
import { makeTempDir } from "../../test/helpers/test-runtime.js";
import { MemoryService, RRF_K, type MemoryEmbedder } from "./memory-service.js";
import { MemoryStore } from "./memory-store.js";

const logger = pino({ level: "silent" });
const memoryConfig = RuntimeConfigSchema.parse({}).memory;

/** Vectors chosen by hand, so that rankings can be checked exactly. */
const VECTORS: Record<string, number[]> = {
  "my car is red": [1, 0, 0, 0],
  automobile: [0.95, 0.05, 0, 0],
  "the duck swims in the pond": [0, 1, 0, 0],
  "ducks like ponds": [0, 0.97, 0.03, 0],
  "bread for the ducks": [0, 0.6, 0.8, 0],
  "unrelated note about taxes": [0, 0, 0, 1],
  "red paint for the barn": [0.5, 0, 0, 0.5],
  red: [0.8, 0, 0, 0.6],
};
function fakeEmbedder(): MemoryEmbedder {
  const provider: EmbeddingProvider = {
    embeddingDimension: 4,
    embeddingModel: "hand-made",
    async embed(texts) {
      return texts.map((text) => Float32Array.from(VECTORS[text] ?? [0.25, 0.25, 0.25, 0.25]));
    },
  };
  return { provider, model: "hand-made", dimension: 4 };
}

const opened: Array<{ database: DuckDatabase; service: MemoryService }> = [];
afterEach(() => {
  for (const { database, service } of opened.splice(0)) {
    service.close();
    database.close();
  }
});
async function open(home: string, embedder: MemoryEmbedder | null = fakeEmbedder(), config = memoryConfig, clock?: () => Date) {
  const database = openDatabase(join(home, "ducklm.sqlite3"));
  const service = new MemoryService(new MemoryStore(database.db, clock), embedder, config, logger, join(home, "memory.hnsw"), clock);
  await service.open();
  opened.push({ database, service });
  return service;
}
async function close(service: MemoryService) {
  const index = opened.findIndex((entry) => entry.service === service);
  const [entry] = opened.splice(index, 1);
  entry!.service.close();
  entry!.database.close();
}

describe("MemoryService", () => {
  it("takes into its vector index what another process on the same database remembered or forgot", async () => {
    const home = makeTempDir();
    const writer = await open(home);
    // A connection of its own to the same file and an index file of its own, as another process has.
    const database = openDatabase(join(home, "ducklm.sqlite3"));
    const shared = new MemoryService(new MemoryStore(database.db), fakeEmbedder(), memoryConfig, logger, join(makeTempDir(), "memory.hnsw"));
    await shared.open();
    opened.push({ database, service: shared });
    const { entry } = await writer.remember("the duck swims in the pond", "fact", null);
    expect(shared.index!.has(entry.id)).toBe(false);
    const hits = await shared.recall("ducks like ponds", 3);
    expect(hits.map((hit) => [hit.entry.id, hit.matched_by])).toEqual([[entry.id, ["vector"]]]);
    expect(shared.index!.has(entry.id)).toBe(true);
    expect(writer.forget(entry.id)).toBe(true);
    expect(shared.catchUp(Date.now() + 5_000)).toEqual({ added: 0, removed: 1 });
    expect(shared.index!.has(entry.id)).toBe(false);
    // In step, the next look reads one count and changes nothing.
    expect(shared.catchUp(Date.now() + 10_000)).toEqual({ added: 0, removed: 0 });
  });

  it("recalls by keyword without an embedding model", async () => {
    const memory = await open(makeTempDir(), null);
    await memory.remember("the duck swims in the pond", "fact", null);
    await memory.remember("unrelated note about taxes", "note", null);
    const hits = await memory.recall("where does the duck swim", 5);
    expect(hits.map((hit) => hit.entry.text)).toEqual(["the duck swims in the pond"]);
    expect(hits[0]!.matched_by).toEqual(["keyword"]);
    expect(memory.vectorSearch).toBe(false);
  });

  it("recalls by meaning through the vector index when no word matches", async () => {
    const memory = await open(makeTempDir());
    await memory.remember("my car is red", "fact", null);
    await memory.remember("unrelated note about taxes", "note", null);
    const hits = await memory.recall("automobile", 1);
    expect(hits[0]!.entry.text).toBe("my car is red");
    expect(hits[0]!.matched_by).toEqual(["vector"]);
  });

  it("fuses keyword and vector ranks by reciprocal rank, exactly", async () => {
    const memory = await open(makeTempDir());
    const car = (await memory.remember("my car is red", "fact", null)).entry.id;
    const paint = (await memory.remember("red paint for the barn", "fact", null)).entry.id;
    const taxes = (await memory.remember("unrelated note about taxes", "note", null)).entry.id;
    const duck = (await memory.remember("the duck swims in the pond", "fact", null)).entry.id;
    // Keyword "red" (BM25): car 1st (shorter), paint 2nd. Vector for "red": paint (cos 0.99), car (0.8), taxes (0.6), duck (0).
    const hits = await memory.recall("red", 4);
    const score = (...ranks: number[]) => Math.round(ranks.reduce((sum, rank) => sum + 1 / (RRF_K + rank), 0) * 1e6) / 1e6;
    // car and paint tie at 1/61 + 1/62; the lower id comes first.
    expect(hits.map((hit) => [hit.entry.id, hit.score, hit.matched_by])).toEqual([
      [car, score(1, 2), ["keyword", "vector"]],
      [paint, score(2, 1), ["keyword", "vector"]],
      [taxes, score(3), ["vector"]],
      [duck, score(4), ["vector"]],
    ]);
    // The fusion on its own, on constructed rankings.
    const fused = memory.fuse([car, paint], [paint, car, taxes], 3);
    expect(fused.map((hit) => [hit.entry.id, hit.score])).toEqual([
      [car, score(1, 2)],
      [paint, score(2, 1)],
      [taxes, score(3)],
    ].sort((a, b) => (b[1] as number) - (a[1] as number) || (a[0] as number) - (b[0] as number)));
    expect(memory.fuse([car], [taxes], 5, { kinds: ["note"] }).map((hit) => hit.entry.id)).toEqual([taxes]);
  });

  it("merges near-duplicates by raising the weight of the entry they repeat", async () => {
    const memory = await open(makeTempDir());
    const first = await memory.remember("the duck swims in the pond", "fact", null);
    const again = await memory.remember("the duck swims in the pond", "fact", null);
    const similar = await memory.remember("ducks like ponds", "fact", null);
    const different = await memory.remember("bread for the ducks", "fact", null);
    expect(again).toMatchObject({ action: "reinforce", entry: { id: first.entry.id } });
    expect(similar).toMatchObject({ action: "reinforce", entry: { id: first.entry.id } });
    expect(different.action).toBe("insert");
    expect(memory.store.get(first.entry.id)!.weight).toBe(3);
    expect(memory.stats().entries).toBe(2);
  });

  it("never merges distinct facts, however alike their embeddings (numbers, names with digits, negation)", async () => {
    // Every one of these embeds to the same vector: only what they say can tell them apart.
    const memory = await open(makeTempDir());
    for (let i = 0; i < 30; i += 1) expect((await memory.remember(`host for service ${i} is node-${i}`, "fact", null)).action).toBe("insert");
    expect((await memory.remember("Geese like bread", "fact", null)).action).toBe("insert");
    expect((await memory.remember("Geese do not like bread", "fact", null)).action).toBe("insert");
    expect(memory.stats().entries).toBe(32);
    // The same fact again still reinforces its entry.
    expect((await memory.remember("host for service 7 is node-7", "fact", null)).action).toBe("reinforce");
    expect(memory.stats().entries).toBe(32);
  });

  it("forgets from the rows, the keyword index and the vector index", async () => {
    const memory = await open(makeTempDir());
    const { entry } = await memory.remember("my car is red", "fact", null);
    expect(memory.forget(entry.id)).toBe(true);
    expect(memory.store.get(entry.id)).toBeNull();
    expect(memory.store.search("car", 5)).toEqual([]);
    expect(memory.index!.has(entry.id)).toBe(false);
    expect(await memory.recall("automobile", 5)).toEqual([]);
    expect(memory.forget(entry.id)).toBe(false);
  });

  it("never gives a forgotten memory's id to another, not even the newest one's, across restarts", async () => {
    const home = makeTempDir();
    let memory = await open(home);
    await memory.remember("ducks like ponds", "fact", null);
    const newest = (await memory.remember("my car is red", "fact", null)).entry;
    memory.forget(newest.id);
    const next = (await memory.remember("bread for the ducks", "fact", null)).entry;
    expect(next.id).toBe(newest.id + 1);
    await close(memory);
    memory = await open(home);
    memory.forget(next.id);
    const after = (await memory.remember("red paint for the barn", "fact", null)).entry;
    expect(after.id).toBe(next.id + 1);
    // The vector index holds no vector of the forgotten ones under the new ids.
    expect((await memory.recall("my car is red", 5)).map((hit) => hit.entry.id)).not.toContain(newest.id);
  });

  it("rebuilds a deleted or corrupted index file at start, with identical results", async () => {
    const home = makeTempDir();
    let memory = await open(home);
    for (const text of Object.keys(VECTORS).slice(0, 6)) await memory.remember(text, "fact", null);
    const before = await memory.recall("automobile", 5);
    await close(memory);
    expect(existsSync(join(home, "memory.hnsw"))).toBe(true);

    rmSync(join(home, "memory.hnsw"));
    memory = await open(home);
    expect(memory.index!.size).toBe(before.length === 0 ? 0 : memory.stats().with_embedding);
    expect(await memory.recall("automobile", 5)).toEqual(before);
    await close(memory);

    writeFileSync(join(home, "memory.hnsw"), "garbage, not an index");
    memory = await open(home);
    expect(await memory.recall("automobile", 5)).toEqual(before);
  });

  it("is consistent after a crash between the row insert and the index update", async () => {
    const home = makeTempDir();
    let memory = await open(home);
    await memory.remember("the duck swims in the pond", "fact", null);
    memory.persist();
    // The row and its vector reach SQLite, then the process dies before the index is touched.
    memory.store.insert({ text: "my car is red", kind: "fact", embedding: Float32Array.from(VECTORS["my car is red"]!), embedding_model: "hand-made" });
    opened.splice(opened.findIndex((entry) => entry.service === memory), 1)[0]!.database.close();
    memory = await open(home);
    expect((await memory.recall("automobile", 1))[0]!.entry.text).toBe("my car is red");
  });

  it("runs the scheduled cleanup after start-up, not during it", async () => {
    let now = new Date("2026-01-01T00:00:00Z");
    const config = RuntimeConfigSchema.parse({ memory: { half_life_days: 10, min_weight: 0.2, min_age_days: 7 } }).memory;
    const memory = await open(makeTempDir(), fakeEmbedder(), config, () => now);
    await memory.remember("my car is red", "fact", null);
    now = new Date("2026-02-15T00:00:00Z");
    memory.scheduleCleanup(50);
    expect(memory.stats().entries).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(memory.stats().entries).toBe(0);
  });

  it("cleans up: decays, removes old weak entries, keeps pins, and holds the count bound", async () => {
    const home = makeTempDir();
    let now = new Date("2026-01-01T00:00:00Z");
    const config = RuntimeConfigSchema.parse({ memory: { half_life_days: 10, min_weight: 0.2, min_age_days: 7, max_entries: 3 } }).memory;
    const memory = await open(home, fakeEmbedder(), config, () => now);
    const ids: number[] = [];
    for (const text of ["my car is red", "the duck swims in the pond", "bread for the ducks", "unrelated note about taxes", "red paint for the barn"]) {
      ids.push((await memory.remember(text, "fact", null)).entry.id);
    }
    memory.pin(ids[0]!, true);
    memory.store.reinforce(ids[1]!, 5);
    now = new Date("2026-02-15T00:00:00Z"); // 45 days: weight 1 decays to 0.044, weight 6 to 0.27
    const result = memory.cleanup();
    const left = memory.store.list(100).map((entry) => entry.id).sort((a, b) => a - b);
    expect(left).toContain(ids[0]); // pinned, though weak
    expect(left).toContain(ids[1]); // strong enough
    expect(left.length).toBeLessThanOrEqual(3);
    expect(result.removed.sort((a, b) => a - b)).toEqual(ids.filter((id) => !left.includes(id)).sort((a, b) => a - b));
    for (const id of result.removed) expect(memory.index!.has(id)).toBe(false);
  });
});
