// What a task costs the model, side by side in one run: DuckLM against LangGraph.js's prebuilt ReAct
// agent on the same scripted trajectories, each given the same tools and DuckLM's own instructions as
// its system prompt, so that both send what a real user's setup would. Per completed task: model
// calls, prompt tokens sent, the tokens a prefix cache could reuse (the part of each prompt the
// previous call of its lane already sent), and generated tokens. Tokens are estimated from
// characters alike on both sides (4 characters a token).
//
// Both sides write the same thought before each decision, so generated tokens compare the rest.
//
// DuckLM runs as the starter preset does (one model plays every role: a decision is one call) and,
// for reference, with a Thinker model of its own (a draft and a directive per decision).
//
// LangGraph is given every tool DuckLM offers, with its JSON schema, as a provider would send them.
//
// Targets (docs in README "Benchmarks"): model calls ≤ 2× LangGraph's, prompt tokens ≤ 1.5×.
//
//   npm run bench:model-work
import { mkdtempSync, rmSync } from "node:fs";
import { parseArgs } from "node:util";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { tool } from "@langchain/core/tools";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { z } from "zod";
import type { ToolCatalogueEntry } from "../src/tools/tool-registry.js";
import { estimateTokens } from "../src/contracts/tokens.js";
import { BUNDLED_CONFIG_DIR, loadConfig } from "../src/config/load-config.js";
import { scriptedAgent } from "../test/helpers/scripted-agent.js";
import { createTestRuntime } from "../test/helpers/test-runtime.js";
import { createEchoTool } from "../test/helpers/test-tools.js";
import { benchFolders } from "./bench-stats.js";
import { FakeToolCallingModel, scriptedDirectiveOf, SHAPES, type Shape } from "./react-peer.js";
import { localModelWork } from "./local-model-work.js";

const { values: flags } = parseArgs({
  options: {
    // Part (b)'s generated model and engine; --no-local leaves part (b) out.
    "no-local": { type: "boolean", default: false },
    embd: { type: "string", default: "512" },
    blocks: { type: "string", default: "8" },
    ff: { type: "string", default: "2048" },
    threads: { type: "string", default: "2" },
    context: { type: "string", default: "16384" },
  },
});

/** The agent-loop bench's shapes, and two more: steps side by side, and a tool error recovered from. */
const MODEL_WORK_SHAPES: Shape[] = [
  ...SHAPES,
  {
    name: "two steps side by side, then answer",
    calls: [],
    turns: [() => [{ tool: "echo", args: { text: "north pond: 3 ducks" } }, { tool: "echo", args: { text: "south pond: 5 ducks" } }]],
  },
  {
    name: "a missing file, recovered from, then answer",
    calls: [],
    turns: [() => [{ tool: "file_read", args: { path: "missing.txt" } }], () => [{ tool: "echo", args: { text: "the notes are in pond.txt" } }]],
  },
];

/** What the model writes before each decision, on both sides. */
const THOUGHT = "Call the next tool, or answer from what the tools returned.";

interface Work {
  calls: number;
  promptTokens: number;
  reusableTokens: number;
  generatedTokens: number;
}

const sum = (works: Work[]): Work =>
  works.reduce((total, work) => ({ calls: total.calls + work.calls, promptTokens: total.promptTokens + work.promptTokens, reusableTokens: total.reusableTokens + work.reusableTokens, generatedTokens: total.generatedTokens + work.generatedTokens }), { calls: 0, promptTokens: 0, reusableTokens: 0, generatedTokens: 0 });

function sharedPrefix(a: string, b: string): number {
  let shared = 0;
  while (shared < a.length && shared < b.length && a.charCodeAt(shared) === b.charCodeAt(shared)) shared += 1;
  return shared;
}

/** The tools DuckLM offers a task in the bench (its built-ins and the echo tool). */
let catalogue: ToolCatalogueEntry[] = [];

async function duckWork(shape: Shape, oneModel: boolean, dir: string): Promise<Work> {
  const models = scriptedAgent({
    oneModel,
    directive: scriptedDirectiveOf(shape),
    draft: THOUGHT,
    streaming: { chunkSize: 1_000_000 },
  });
  const runtime = createTestRuntime({ ...benchFolders(dir), models, tools: [createEchoTool()], runtime: { agent: { max_iterations: 6 } } });
  catalogue = runtime.context.tools.catalogue();
  try {
    const outcome = await runtime.loop.submit({ text: shape.name }).done;
    if (outcome.state !== "completed") throw new Error(`DuckLM task ended ${outcome.state}: ${outcome.error?.message}`);
    return sum(
      models.calls.map((call) => ({
        calls: 1,
        promptTokens: call.usage?.prompt_tokens ?? estimateTokens(call.system + call.prompt),
        reusableTokens: call.usage?.cached_tokens ?? 0,
        generatedTokens: call.usage?.generated_tokens ?? 0,
      })),
    );
  } finally {
    await runtime.close();
  }
}

async function langGraphWork(shape: Shape, system: string, catalogue: readonly ToolCatalogueEntry[], dir: string): Promise<Work> {
  const db = new Database(join(dir, "langgraph.sqlite3"));
  const model = new FakeToolCallingModel({});
  model.shape = shape;
  model.thought = THOUGHT;
  const echo = tool(async ({ text }: { text: string }) => text, { name: "echo", description: "Echo text back, optionally after a wait.", schema: z.object({ text: z.string() }) });
  // The same tools DuckLM offers, as real tool definitions (their JSON schemas): the model is sent them all.
  const others = catalogue
    .filter((entry) => entry.name !== "echo")
    .map((entry) =>
      tool(
        async (args: Record<string, unknown>) => {
          // The workspace is empty, as DuckLM's is: reading a file fails the same way.
          if (entry.name === "file_read") throw new Error(`no such file: ${String(args.path)}`);
          return "";
        },
        { name: entry.name, description: entry.description, schema: entry.input_schema as Record<string, unknown> },
      ),
    );
  const agent = createReactAgent({ llm: model, tools: [echo, ...others], checkpointSaver: new SqliteSaver(db), prompt: system });
  try {
    await agent.invoke({ messages: [{ role: "user", content: shape.name }] }, { configurable: { thread_id: "one" } });
    return sum(
      model.prompts.map((prompt, index) => ({
        calls: 1,
        promptTokens: estimateTokens(prompt),
        reusableTokens: index === 0 ? 0 : Math.floor(sharedPrefix(model.prompts[index - 1]! + model.outputs[index - 1]!, prompt) / 4),
        generatedTokens: estimateTokens(model.outputs[index]!),
      })),
    );
  } finally {
    db.close();
  }
}

const config = loadConfig(BUNDLED_CONFIG_DIR);
const prompts = config.prompts;
// What a user of a ReAct agent would give it as instructions: DuckLM's own text for deciding.
const system = [prompts.system, prompts.thinker, prompts.orchestrator, prompts.planning].join("\n\n");
const rows: Array<{ name: string; duck: Work; twoModels: Work; graph: Work }> = [];
for (const shape of MODEL_WORK_SHAPES) {
  const dir = mkdtempSync(join(tmpdir(), "ducklm-bench-model-work-"));
  try {
    rows.push({ name: shape.name, duck: await duckWork(shape, true, join(dir, "one")), twoModels: await duckWork(shape, false, join(dir, "two")), graph: await langGraphWork(shape, system, catalogue, dir) });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const describe = (work: Work) => `${String(work.calls).padStart(3)} calls ${String(work.promptTokens).padStart(6)} prompt (${Math.round((100 * work.reusableTokens) / Math.max(1, work.promptTokens))}% reusable) ${String(work.generatedTokens).padStart(5)} generated`;
console.log("model-work (a): scripted models, per completed task; tokens estimated alike (4 characters a token)");
for (const row of rows) {
  console.log(`  ${row.name}`);
  console.log(`    DuckLM, one model          ${describe(row.duck)}`);
  console.log(`    DuckLM, Thinker of its own ${describe(row.twoModels)}`);
  console.log(`    LangGraph.js ReAct         ${describe(row.graph)}`);
}
const duck = sum(rows.map((row) => row.duck));
const graph = sum(rows.map((row) => row.graph));
const ratio = (a: number, b: number) => a / Math.max(1, b);
const verdict = (value: number, target: number) => `${value.toFixed(2)}× (target ≤ ${target}×: ${value <= target ? "met" : "NOT met"})`;
console.log("  DuckLM (one model) against LangGraph.js, all shapes together:");
console.log(`    model calls    ${verdict(ratio(duck.calls, graph.calls), 2)}`);
console.log(`    prompt tokens  ${verdict(ratio(duck.promptTokens, graph.promptTokens), 1.5)}`);
console.log(`    evaluated after a prefix cache (prompt − reusable): ${ratio(duck.promptTokens - duck.reusableTokens, graph.promptTokens - graph.reusableTokens).toFixed(2)}×`);
console.log(`    generated tokens ${ratio(duck.generatedTokens, graph.generatedTokens).toFixed(2)}× (both sides write the same thought before each decision)`);

if (!flags["no-local"]) {
  console.log("");
  await localModelWork({
    shapes: MODEL_WORK_SHAPES,
    model: { embeddingLength: Number(flags.embd), blockCount: Number(flags.blocks), feedForwardLength: Number(flags.ff), threads: Number(flags.threads), contextSize: Number(flags.context) },
    catalogue,
    thought: THOUGHT,
    system,
  });
}
