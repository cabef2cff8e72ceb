// Vector recall over clustered 384-dimension vectors: recall@10 against exact brute force, queries per
// second through DuckLM's VectorIndex against raw hnswlib-node on the same graph, and against
// hnswlib-node's own exact search (BruteforceSearch, C++: the fair brute-force peer, not a JS loop);
// build time, the time to load the saved index (what every start pays) against raw hnswlib-node's,
// and resident memory. Each figure is the median of --rounds passes, the two sides alternating
// which goes first.
//   npm run bench:memory-recall [-- --vectors 100000 --queries 1000 --ef 64,128 --rounds 3]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import hnswlib from "hnswlib-node";
import { VectorIndex } from "../src/memory/vector-index.js";
import { seededRandom } from "../src/utils/seeded-random.js";
import { median } from "./bench-stats.js";

const { values } = parseArgs({
  options: { vectors: { type: "string", default: "100000" }, queries: { type: "string", default: "1000" }, dim: { type: "string", default: "384" }, ef: { type: "string", default: "64,128" }, rounds: { type: "string", default: "3" } },
});
const N = Number(values.vectors);
const Q = Number(values.queries);
const DIM = Number(values.dim);
const EFS = values.ef.split(",").map(Number);
const CLUSTERS = 100;
const ROUNDS = Number(values.rounds);

/** Queries per second of `search` over every query. */
function qps(search: (i: number) => void): number {
  const started = performance.now();
  for (let i = 0; i < Q; i += 1) search(i);
  return Q / ((performance.now() - started) / 1000);
}

const random = seededRandom(42);
function gaussian(): number {
  return Math.sqrt(-2 * Math.log(random() + 1e-12)) * Math.cos(2 * Math.PI * random());
}
function normalised(vector: Float32Array): Float32Array {
  let norm = 0;
  for (const x of vector) norm += x * x;
  norm = Math.sqrt(norm) || 1;
  for (let i = 0; i < vector.length; i += 1) vector[i]! /= norm;
  return vector;
}
function clustered(count: number, centres: Float32Array[]): Float32Array[] {
  return Array.from({ length: count }, () => {
    const centre = centres[Math.floor(random() * centres.length)]!;
    // Noise of norm about 0.6 around a unit centre: clusters that overlap a little, as embeddings do.
    return normalised(Float32Array.from(centre, (x) => x + (gaussian() * 0.6) / Math.sqrt(DIM)));
  });
}

const centres = Array.from({ length: CLUSTERS }, () => normalised(Float32Array.from({ length: DIM }, gaussian)));
const data = clustered(N, centres);
const queries = clustered(Q, centres);
const rss = () => process.memoryUsage().rss / 1024 / 1024;

/** Exact top-10 by cosine similarity (vectors are unit length, so the dot product). */
function bruteForce(query: Float32Array, k: number): number[] {
  const best: Array<[number, number]> = [];
  for (let id = 0; id < data.length; id += 1) {
    const vector = data[id]!;
    let dot = 0;
    for (let i = 0; i < DIM; i += 1) dot += vector[i]! * query[i]!;
    if (best.length < k || dot > best[best.length - 1]![0]) {
      best.push([dot, id + 1]);
      best.sort((a, b) => b[0] - a[0]);
      if (best.length > k) best.pop();
    }
  }
  return best.map(([, id]) => id);
}

const dir = mkdtempSync(join(tmpdir(), "ducklm-memory-bench-"));
try {
  console.log(`memory-recall: ${N} clustered ${DIM}-dimension vectors (${CLUSTERS} clusters), ${Q} queries, cosine, M=16, efConstruction=200`);
  const rssBefore = rss();
  const buildStart = performance.now();
  const index = new VectorIndex(join(dir, "memory.hnsw"), DIM, "cosine", "bench", EFS[0]);
  index.rebuild(data.map((vector, i) => ({ id: i + 1, vector })));
  const buildSeconds = (performance.now() - buildStart) / 1000;
  console.log(`  build: ${buildSeconds.toFixed(1)} s (${(N / buildSeconds).toFixed(0)} vectors/s); resident memory +${(rss() - rssBefore).toFixed(0)} MiB (data and index)`);
  index.save();
  const raw = new hnswlib.HierarchicalNSW("cosine", DIM);
  raw.readIndexSync(join(dir, "memory.hnsw"));
  const rawQueries = queries.map((query) => Array.from(query));

  // The ground truth, exact; the JS loop is not timed as a peer (hnswlib's C++ search is).
  const truth = queries.map((query) => bruteForce(query, 10));
  const exact = new hnswlib.BruteforceSearch("cosine", DIM);
  exact.initIndex(N);
  data.forEach((vector, i) => exact.addPoint(Array.from(vector), i + 1));
  const bruteQps = median(Array.from({ length: ROUNDS }, () => qps((i) => exact.searchKnn(rawQueries[i]!, 10))));

  // What every start pays: the saved index read back.
  const loads = { duck: [] as number[], raw: [] as number[] };
  for (let round = 0; round < ROUNDS; round += 1) {
    const order = round % 2 === 0 ? (["duck", "raw"] as const) : (["raw", "duck"] as const);
    for (const side of order) {
      const started = performance.now();
      if (side === "duck") {
        if (!new VectorIndex(join(dir, "memory.hnsw"), DIM, "cosine", "bench", EFS[0]).load({ ids: data.map((_, i) => i + 1) })) throw new Error("saved index did not load");
      } else {
        new hnswlib.HierarchicalNSW("cosine", DIM).readIndexSync(join(dir, "memory.hnsw"));
      }
      loads[side].push(performance.now() - started);
    }
  }
  console.log(`  load of the saved index: DuckLM ${median(loads.duck).toFixed(0)} ms, raw hnswlib-node ${median(loads.raw).toFixed(0)} ms (ratio ${(median(loads.duck) / median(loads.raw)).toFixed(2)})`);

  for (const ef of EFS) {
    const tuned = new VectorIndex(join(dir, "memory.hnsw"), DIM, "cosine", "bench", ef);
    if (!tuned.load({ ids: data.map((_, i) => i + 1) })) throw new Error("saved index did not load");
    raw.setEf(ef);
    let found = 0;
    const results = queries.map((query) => tuned.search(query, 10));
    const duckRounds: number[] = [];
    const rawRounds: number[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const duckPass = () => duckRounds.push(qps((i) => tuned.search(queries[i]!, 10)));
      const rawPass = () => rawRounds.push(qps((i) => raw.searchKnn(rawQueries[i]!, 10)));
      if (round % 2 === 0) {
        duckPass();
        rawPass();
      } else {
        rawPass();
        duckPass();
      }
    }
    const duckQps = median(duckRounds);
    const rawQps = median(rawRounds);
    results.forEach((hits, i) => {
      const expected = new Set(truth[i]);
      found += hits.filter((hit) => expected.has(hit.id)).length;
    });
    const recall = found / (Q * 10);
    console.log(
      `  ef=${String(ef).padEnd(4)} recall@10 ${recall.toFixed(4)} (target ≥ 0.95: ${recall >= 0.95 ? "met" : "NOT met"})   DuckLM ${duckQps.toFixed(0)} q/s   raw hnswlib-node ${rawQps.toFixed(0)} q/s   ratio ${(duckQps / rawQps).toFixed(3)} (target ≥ 0.8: ${duckQps / rawQps >= 0.8 ? "met" : "NOT met"})   vs exact search (hnswlib-node BruteforceSearch) ${(duckQps / bruteQps).toFixed(1)}× (target ≥ 30: ${duckQps / bruteQps >= 30 ? "met" : "NOT met"})`,
    );
  }
  console.log(`  exact search (hnswlib-node BruteforceSearch, C++): ${bruteQps.toFixed(1)} q/s; rounds: ${ROUNDS}, median`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
