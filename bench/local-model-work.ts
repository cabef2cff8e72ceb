// Part (b) of bench:model-work: what a task costs a local model through llama.cpp, DuckLM against a
// hand-written function-calling loop on node-llama-cpp's own LlamaChatSession (the best a loop on the
// same engine does: one chat session on one kept sequence, each turn appended), on the same GGUF file.
//
// The file is written here: random weights, llama architecture, F32, byte-level vocabulary (so one
// token is one byte, about four times what a real tokenizer makes of English). Its text would be
// noise, so every call's output is forced by a grammar that admits one scripted text: the engine
// evaluates the prompt and generates every token as it would for a real model on that trajectory.
// Both sides write the same thought and the same tool calls for the same decisions (DuckLM as the JSON
// its schema asks for, the loop as a line of JSON after the thought), and see the same tool outputs.
//
// Per completed task: tokens evaluated (what the sequence's meter counted as input: the part of each
// prompt not already held in the KV cache), generated tokens, and wall time.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { getLlama, LlamaChatSession } from "node-llama-cpp";
import { ModelsConfigSchema } from "../src/config/config-schemas.js";
import { gbnfLiteral } from "../src/models/grammar-schema.js";
import { LlamaCppProvider } from "../src/models/llama/llama-cpp-provider.js";
import { writeTinyLlamaGguf } from "../src/models/gguf/tiny-gguf-writer.js";
import type { ToolCatalogueEntry } from "../src/tools/tool-registry.js";
import { fixtureModels } from "../test/helpers/fixture-models.js";
import { scriptedAgent } from "../test/helpers/scripted-agent.js";
import { createTestRuntime } from "../test/helpers/test-runtime.js";
import { createEchoTool } from "../test/helpers/test-tools.js";
import { benchFolders } from "./bench-stats.js";
import { scriptedDirectiveOf, turnsOf, type Shape, type ShapeCall } from "./react-peer.js";

export interface LocalWork {
  calls: number;
  evaluatedTokens: number;
  generatedTokens: number;
  wallMs: number;
}

export interface LocalModelShape {
  /** Hidden size, blocks and feed-forward size of the generated model. */
  embeddingLength: number;
  blockCount: number;
  feedForwardLength: number;
  threads: number;
  contextSize: number;
}

const sumLocal = (works: LocalWork[]): LocalWork =>
  works.reduce((total, work) => ({ calls: total.calls + work.calls, evaluatedTokens: total.evaluatedTokens + work.evaluatedTokens, generatedTokens: total.generatedTokens + work.generatedTokens, wallMs: total.wallMs + work.wallMs }), {
    calls: 0,
    evaluatedTokens: 0,
    generatedTokens: 0,
    wallMs: 0,
  });

/** What the bench's tools answer, alike on both sides: echo gives its text back; the one file read finds nothing. */
function toolOutput(call: ShapeCall): { ok: boolean; output: string } {
  if (call.tool === "echo") return { ok: true, output: String(call.args.text) };
  return { ok: false, output: `no such file: ${String(call.args.path)}` };
}

/** DuckLM on the generated file: the starter preset's layout (one model for every role). */
async function duckLocal(shape: Shape, file: string, model: LocalModelShape, thought: string, dir: string): Promise<LocalWork> {
  const script = scriptedAgent({
    oneModel: true,
    directive: scriptedDirectiveOf(shape),
    draft: thought,
    streaming: { chunkSize: 1_000_000 },
  });
  const role = { file, backend: "cpu", gpu_layers: 0, context_size: model.contextSize, max_tokens: 2048, temperature: 0, threads: model.threads };
  const config = ModelsConfigSchema.parse({
    threads: model.threads,
    roles: { thinker: role, json_compiler: role, critic: role, coder: role, sys_util: role, embeddings: { file: fixtureModels().embedding, backend: "cpu", gpu_layers: 0, context_size: 512, threads: 1, dimension: 64 } },
  });
  const models = new LlamaCppProvider({
    config,
    modelsDir: "/",
    logger: pino({ level: "silent" }),
    sequencesPerModel: 2,
    // What the scripted agent would answer this very request: the engine is made to write exactly that.
    scriptedOutput: async ({ role, system, prompt, purpose, signal }, schema) => {
      const asked = { role, system, prompt, ...(purpose ? { purpose } : {}), ...(signal ? { signal } : {}) };
      return schema ? (await script.generateJson({ ...asked, schema })).raw : await script.generateText(asked);
    },
  });
  await models.ensureLoaded("thinker");
  const runtime = createTestRuntime({ ...benchFolders(dir), models, tools: [createEchoTool()], runtime: { agent: { max_iterations: 6 }, timeouts: { task_ms: 600_000, step_ms: 60_000 } } });
  try {
    const started = performance.now();
    const handle = runtime.loop.submit({ text: shape.name });
    const outcome = await handle.done;
    const wallMs = performance.now() - started;
    if (outcome.state !== "completed") throw new Error(`DuckLM task ended ${outcome.state}: ${outcome.error?.message}`);
    const ended = runtime.store.listEvents(handle.taskId).find((event) => event.type === "task-completed")!;
    const work = (ended.payload as { model_work?: { calls: number; evaluated_tokens: number; generated_tokens: number } }).model_work;
    if (!work) throw new Error("the task's end event carries no model work");
    return { calls: work.calls, evaluatedTokens: work.evaluated_tokens, generatedTokens: work.generated_tokens, wallMs };
  } finally {
    await runtime.close();
    await models.dispose();
  }
}

/**
 * The peer: a function-calling loop on one LlamaChatSession. The tools are described in the system
 * prompt (with their JSON schemas, as a chat template renders them); each decision is the thought,
 * then a line of JSON with the calls, or the answer; each tool result comes back as the next turn.
 */
async function chatSessionLocal(shape: Shape, file: string, model: LocalModelShape, system: string, thought: string): Promise<LocalWork> {
  const llama = await getLlama({ gpu: false, build: "never" });
  const loaded = await llama.loadModel({ modelPath: file, gpuLayers: 0 });
  const context = await loaded.createContext({ contextSize: model.contextSize, threads: model.threads, sequences: 1 });
  const sequence = context.getSequence();
  const session = new LlamaChatSession({ contextSequence: sequence, systemPrompt: system });
  const forced = (text: string) => llama.createGrammar({ grammar: `root ::= ${gbnfLiteral(text)}` });
  try {
    const started = performance.now();
    let calls = 0;
    let message = shape.name;
    let lastOutput = "";
    const turns = turnsOf(shape);
    for (let step = 0; ; step++) {
      const decided = step < turns.length ? turns[step]!(lastOutput) : null;
      const text = decided ? `${thought}\n${JSON.stringify({ tool_calls: decided.map((call) => ({ name: call.tool, arguments: call.args })) })}` : `${thought}\nDone: ${lastOutput}`;
      calls += 1;
      await session.prompt(message, { grammar: await forced(text), maxTokens: text.length * 2 + 16, temperature: 0 });
      if (!decided) break;
      const results = decided.map((call) => ({ call, ...toolOutput(call) }));
      lastOutput = results.at(-1)!.output;
      message = results.map((result) => `${result.call.tool} ${result.ok ? "returned" : "failed"}: ${result.output}`).join("\n");
    }
    const wallMs = performance.now() - started;
    const meter = sequence.tokenMeter.getState();
    return { calls, evaluatedTokens: meter.usedInputTokens, generatedTokens: meter.usedOutputTokens, wallMs };
  } finally {
    session.dispose();
    await context.dispose();
    await loaded.dispose();
  }
}


/** Runs part (b) over the shapes and prints it; returns the totals of both sides. */
export async function localModelWork(options: { shapes: Shape[]; model: LocalModelShape; catalogue: readonly ToolCatalogueEntry[]; thought: string; system: string }): Promise<{ duck: LocalWork; peer: LocalWork }> {
  const dir = mkdtempSync(join(tmpdir(), "ducklm-bench-local-"));
  const { model } = options;
  const file = join(dir, "bench-model.gguf");
  writeTinyLlamaGguf(file, { seed: 7, embeddingLength: model.embeddingLength, blockCount: model.blockCount, feedForwardLength: model.feedForwardLength, headCount: 8, contextLength: model.contextSize, name: "ducklm-bench" });
  const parameters = 258 * model.embeddingLength * 2 + model.blockCount * (4 * model.embeddingLength ** 2 + 3 * model.embeddingLength * model.feedForwardLength);
  const peerSystem = `${options.system}\n\n# Tools\nTo call tools, write your thought, then one line of JSON: {"tool_calls": [{"name": …, "arguments": {…}}]}. To answer, write your thought, then the answer.\n${options.catalogue.map((entry) => JSON.stringify({ name: entry.name, description: entry.description, parameters: entry.input_schema })).join("\n")}`;
  const rows: Array<{ name: string; duck: LocalWork; peer: LocalWork }> = [];
  try {
    for (const shape of options.shapes) {
      // Alternating which side goes first spreads what the machine's other load does to each.
      const first = rows.length % 2 === 0;
      const peerFirst = first ? null : await chatSessionLocal(shape, file, model, peerSystem, options.thought);
      const duck = await duckLocal(shape, file, model, options.thought, join(dir, `duck-${rows.length}`));
      const peer = peerFirst ?? (await chatSessionLocal(shape, file, model, peerSystem, options.thought));
      rows.push({ name: shape.name, duck, peer });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const describe = (work: LocalWork) => `${String(work.calls).padStart(3)} calls ${String(work.evaluatedTokens).padStart(7)} evaluated ${String(work.generatedTokens).padStart(5)} generated ${(work.wallMs / 1000).toFixed(1).padStart(6)} s`;
  console.log(
    `model-work (b): node-llama-cpp on a generated random-weight GGUF (${(parameters / 1e6).toFixed(0)}M parameters, ${model.blockCount} blocks, F32, byte vocabulary), ${model.threads} thread(s), outputs forced to the scripted texts`,
  );
  for (const row of rows) {
    console.log(`  ${row.name}`);
    console.log(`    DuckLM, one model            ${describe(row.duck)}`);
    console.log(`    LlamaChatSession loop        ${describe(row.peer)}`);
  }
  const duck = sumLocal(rows.map((row) => row.duck));
  const peer = sumLocal(rows.map((row) => row.peer));
  const verdict = (value: number, target: number) => `${value.toFixed(2)}× (target ≤ ${target}×: ${value <= target ? "met" : "NOT met"})`;
  console.log("  DuckLM against the LlamaChatSession loop, all shapes together:");
  console.log(`    tokens evaluated  ${verdict(duck.evaluatedTokens / Math.max(1, peer.evaluatedTokens), 1.2)}`);
  console.log(`    tokens generated  ${verdict(duck.generatedTokens / Math.max(1, peer.generatedTokens), 1.5)}`);
  console.log(`    wall time         ${verdict(duck.wallMs / Math.max(1, peer.wallMs), 1.5)}`);
  return { duck, peer };
}
