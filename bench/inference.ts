// Generation speed through DuckLM's LlamaCppProvider against raw node-llama-cpp in the same run, the
// cost of grammar-constrained decoding against free generation, and time to first token.
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

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    tokens: { type: "string", default: "256" },
    rounds: { type: "string", default: "3" },
    threads: { type: "string", default: "1" },
  },
});
const file = values.model ?? fixtureModels().chat;
const TOKENS = Number(values.tokens);
const ROUNDS = Number(values.rounds);
const THREADS = Number(values.threads);
const PROMPT = "Write a short story about a duck who learns to program.";
const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)]!;

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
}

async function timed(generate: (onChunk: () => void) => Promise<string>, count: (text: string) => number): Promise<Run> {
  let first = 0;
  const start = performance.now();
  const text = await generate(() => {
    if (first === 0) first = performance.now();
  });
  const end = performance.now();
  const tokens = count(text);
  return { tokensPerSecond: (tokens / (end - (first || start))) * 1000, firstTokenMs: (first || end) - start };
}

const viaDuck = () =>
  timed((onChunk) => provider.generateText({ role: "thinker", system: "", prompt: PROMPT, maxTokens: TOKENS, temperature: 0, onDelta: onChunk }), (text) => provider.countTokens("thinker", text));
const viaRaw = async () => {
  const sequence = rawContext.getSequence();
  const session = new LlamaChatSession({ contextSequence: sequence, systemPrompt: "" });
  try {
    return await timed((onChunk) => session.prompt(PROMPT, { maxTokens: TOKENS, temperature: 0, onTextChunk: onChunk }), (text) => rawModel.tokenize(text).length);
  } finally {
    session.dispose();
    sequence.dispose();
  }
};
const viaGrammar = () =>
  timed(
    (onChunk) =>
      provider
        .generateJson({ role: "thinker", system: "", prompt: PROMPT, schema: ExecutionDirectiveSchema, maxTokens: TOKENS * 4, temperature: 0, onDelta: onChunk })
        .then((result) => result.raw)
        .catch((error: { details?: { output?: string } }) => error.details?.output ?? ""),
    (text) => provider.countTokens("thinker", text),
  );

const duck: Run[] = [];
const raw: Run[] = [];
const grammar: Run[] = [];
await viaDuck();
await viaRaw();
for (let round = 0; round < ROUNDS; round += 1) {
  raw.push(await viaRaw());
  duck.push(await viaDuck());
  grammar.push(await viaGrammar());
}
const tps = (runs: Run[]) => median(runs.map((run) => run.tokensPerSecond));
const ttft = (runs: Run[]) => median(runs.map((run) => run.firstTokenMs));
console.log(`inference: ${file}`);
console.log(`  ${TOKENS} tokens, temperature 0, ${THREADS} thread(s), CPU, ${ROUNDS} rounds (median)`);
console.log(`  raw node-llama-cpp          ${tps(raw).toFixed(1).padStart(8)} tokens/s   first token ${ttft(raw).toFixed(1)} ms`);
console.log(`  DuckLM LlamaCppProvider     ${tps(duck).toFixed(1).padStart(8)} tokens/s   first token ${ttft(duck).toFixed(1)} ms`);
console.log(`  DuckLM, directive grammar   ${tps(grammar).toFixed(1).padStart(8)} tokens/s   first token ${ttft(grammar).toFixed(1)} ms`);
const ratio = tps(duck) / tps(raw);
console.log(`  ratio DuckLM / raw = ${ratio.toFixed(3)} (target ≥ 0.97: ${ratio >= 0.97 ? "met" : "NOT met"})`);
console.log(`  grammar cost: constrained runs at ${(tps(grammar) / tps(duck)).toFixed(3)} of free generation's speed`);
await rawContext.dispose();
await rawModel.dispose();
await provider.dispose();
await llama.dispose();
