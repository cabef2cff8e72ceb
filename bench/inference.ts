// Generation speed through DuckLM's LlamaCppProvider against raw node-llama-cpp in the same run, the
// cost of grammar-constrained decoding against free generation, and time to first token.
//
// Like for like: both sides take a fresh context sequence of the same context for every run and a
// fresh chat session on it, and both count the tokens the generator reports (node-llama-cpp's
// onToken), never the text tokenised again. Rounds alternate which side goes first. On the tiny
// fixture model a token takes about a millisecond, so the rounds spread widely: give --model a real
// GGUF file for figures that can settle a 3% target.
//
//   npm run bench:inference [-- --model FILE.gguf] [--tokens 256] [--rounds 3] [--threads 1]
// Without --model it runs on the tiny fixture model the tests use.
import { parseArgs } from "node:util";
import pino from "pino";
import { getLlama, LlamaChatSession } from "node-llama-cpp";
import { ModelsConfigSchema } from "../src/config/config-schemas.js";
import { ExecutionDirectiveSchema } from "../src/contracts/index.js";
import { LlamaCppProvider } from "../src/models/llama/llama-cpp-provider.js";
import { fixtureModels } from "../test/helpers/fixture-models.js";
import { median, spread } from "./bench-stats.js";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    tokens: { type: "string", default: "256" },
    rounds: { type: "string", default: "5" },
    threads: { type: "string", default: "1" },
  },
});
const file = values.model ?? fixtureModels().chat;
const TOKENS = Number(values.tokens);
const ROUNDS = Number(values.rounds);
const THREADS = Number(values.threads);
const PROMPT = "Write a short story about a duck who learns to program.";

const config = ModelsConfigSchema.parse({
  threads: THREADS,
  roles: { thinker: { file, backend: "cpu", gpu_layers: 0, context_size: 4096, max_tokens: TOKENS, temperature: 0 } },
});
const provider = new LlamaCppProvider({ config, modelsDir: "/", logger: pino({ level: "silent" }), sequencesPerModel: 1 });
await provider.ensureLoaded("thinker");

const llama = await getLlama({ gpu: false, build: "never" });
const rawModel = await llama.loadModel({ modelPath: file, gpuLayers: 0 });
const rawContext = await rawModel.createContext({ contextSize: 4096, threads: THREADS, sequences: 1 });

interface Run {
  tokensPerSecond: number;
  firstTokenMs: number;
  /** As the generator counted them. */
  tokens: number;
}

/** Runs one generation; `generate` reports its first text and the tokens it generated. */
async function timed(generate: (onChunk: () => void, onTokens: (count: number) => void) => Promise<unknown>): Promise<Run> {
  let first = 0;
  let tokens = 0;
  const start = performance.now();
  await generate(
    () => {
      if (first === 0) first = performance.now();
    },
    (count) => void (tokens += count),
  );
  const end = performance.now();
  // Speed is measured from the first token on, so prompt evaluation counts only in first-token time.
  return { tokensPerSecond: (Math.max(0, tokens - 1) / Math.max(1e-3, end - (first || start))) * 1000, firstTokenMs: (first || end) - start, tokens };
}

const viaDuck = () =>
  timed((onChunk, onTokens) => provider.generateText({ role: "thinker", system: "", prompt: PROMPT, maxTokens: TOKENS, temperature: 0, onDelta: onChunk, onTokens }));
const viaRaw = async () => {
  const sequence = rawContext.getSequence();
  const session = new LlamaChatSession({ contextSequence: sequence, systemPrompt: "" });
  try {
    return await timed((onChunk, onTokens) => session.prompt(PROMPT, { maxTokens: TOKENS, temperature: 0, onTextChunk: onChunk, onToken: (generated) => onTokens(generated.length) }));
  } finally {
    session.dispose();
    sequence.dispose();
  }
};
const viaGrammar = () =>
  timed((onChunk, onTokens) =>
    provider
      .generateJson({ role: "thinker", system: "", prompt: PROMPT, schema: ExecutionDirectiveSchema, maxTokens: TOKENS * 4, temperature: 0, onDelta: onChunk, onTokens })
      .catch(() => undefined),
  );

const duck: Run[] = [];
const raw: Run[] = [];
const grammar: Run[] = [];
await viaDuck();
await viaRaw();
for (let round = 0; round < ROUNDS; round += 1) {
  if (round % 2 === 0) {
    raw.push(await viaRaw());
    duck.push(await viaDuck());
  } else {
    duck.push(await viaDuck());
    raw.push(await viaRaw());
  }
  grammar.push(await viaGrammar());
}
const line = (name: string, runs: Run[]) => {
  const speeds = runs.map((run) => run.tokensPerSecond);
  const firsts = runs.map((run) => run.firstTokenMs);
  return `  ${name.padEnd(27)} ${median(speeds).toFixed(1).padStart(8)} tokens/s ${spread(speeds, 1)}   first token ${median(firsts).toFixed(1)} ms ${spread(firsts, 1)}   ${median(runs.map((run) => run.tokens))} tokens`;
};
const tps = (runs: Run[]) => median(runs.map((run) => run.tokensPerSecond));
console.log(`inference: ${file}`);
console.log(`  up to ${TOKENS} tokens, temperature 0, ${THREADS} thread(s), CPU, ${ROUNDS} rounds alternating who goes first (median [min–max]); tokens as the generator counted them`);
console.log(line("raw node-llama-cpp", raw));
console.log(line("DuckLM LlamaCppProvider", duck));
console.log(line("DuckLM, directive grammar", grammar));
const ratio = tps(duck) / tps(raw);
console.log(`  ratio DuckLM / raw = ${ratio.toFixed(3)} (target ≥ 0.97: ${ratio >= 0.97 ? "met" : "NOT met"})`);
console.log(`  grammar cost: constrained runs at ${(tps(grammar) / tps(duck)).toFixed(3)} of free generation's speed`);
await rawContext.dispose();
await rawModel.dispose();
await provider.dispose();
await llama.dispose();
