// Per-step overhead of the agent runtime itself: the model (scripted, instant) answers with a tool call,
// an echo tool runs, events and a checkpoint are stored. DuckLM against LangGraph.js with its SQLite
// checkpointer and a fake chat model, in one run, both on a WAL database with synchronous=NORMAL.
// Each task is followed by a turn of the event loop, so that timers (DuckLM's WAL checkpoint, say)
// fire inside the timed window as they would in a server. Wall and CPU time per step are both shown;
// rounds rotate which side goes first; model calls per task are counted, as DuckLM makes more of them.
//
//   npm run bench:step-overhead [-- --tasks 400 --rounds 5]
import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import { tool } from "@langchain/core/tools";
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { z } from "zod";
import type { ExecutionDirective } from "../src/contracts/index.js";
import { ScriptedModelProvider } from "../src/models/scripted-provider.js";
import { sqliteOf } from "../src/storage/open-database.js";
import { createTestRuntime } from "../test/helpers/test-runtime.js";
import { createEchoTool, isDirectiveRequest } from "../test/helpers/test-tools.js";
import { median, benchFolders } from "./bench-stats.js";

const { values } = parseArgs({
  options: { tasks: { type: "string", default: "400" }, rounds: { type: "string", default: "5" }, only: { type: "string" } },
});
const TASKS = Number(values.tasks);
const ROUNDS = Number(values.rounds);
const WARMUP = 30;

/** The echo tool, declared side-effecting: DuckLM then commits the call to disk before running it. */
function sideEffectingEcho() {
  return { ...createEchoTool(), name: "echo_effect", effect: "side-effecting" as const };
}

async function duckSetup(dir: string, toolName: "echo" | "echo_effect") {
  const directive: ExecutionDirective = { kind: "tool", tool: toolName, arguments: { text: "hi" }, reason: "" };
  const models = new ScriptedModelProvider({}, { chunkSize: 1_000_000 }).always("json_compiler", (request) =>
    isDirectiveRequest(request)
      ? directive
      : request.prompt.startsWith("Should long-term memory")
        ? { recall: false, query: "" }
        : { correctness: 1, usefulness: 1, safety: 1, verdict: "pass", reason: "ok" },
  );
  const runtime = createTestRuntime({ ...benchFolders(dir), models, tools: [createEchoTool(), sideEffectingEcho()], runtime: { storage: { synchronous: "NORMAL" } } });
  return {
    modelCalls: () => models.calls.length,
    async step(i: number) {
      const outcome = await runtime.loop.submit({ text: `echo task ${i}` }).done;
      if (outcome.state !== "completed") throw new Error(`DuckLM task ended ${outcome.state}`);
    },
    describe: () => `${sqliteOf(runtime.db).pragma("journal_mode", { simple: true })}, synchronous=${sqliteOf(runtime.db).pragma("synchronous", { simple: true })}`,
    close: () => runtime.close(),
  };
}

/** A chat model that always asks for the echo tool: LangGraph's side of the scripted model. */
class FakeToolCallingModel extends BaseChatModel {
  calls = 0;
  _llmType(): string {
    return "fake-tool-calling";
  }
  async _generate(_messages: BaseMessage[]): Promise<ChatResult> {
    this.calls += 1;
    const message = new AIMessage({ content: "", tool_calls: [{ id: "call_1", name: "echo", args: { text: "hi" }, type: "tool_call" }] });
    return { generations: [{ text: "", message }] };
  }
}

/**
 * LangGraph.js's side. `sameModelCalls`: two more nodes call the model, before and after the tool (as
 * DuckLM's recall decision and critic do), so both sides make three calls a task. `durability`:
 * LangGraph's own setting; "exit" stores the checkpoint once, when the run ends — one commit a task,
 * as DuckLM's read-only task makes — where the default ("async") stores one per step of the graph.
 */
async function langGraphSetup(dir: string, variant: { sameModelCalls?: boolean; durability?: "exit" } = {}) {
  const db = new Database(join(dir, "langgraph.sqlite3"));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  const checkpointer = new SqliteSaver(db);
  const echo = tool(async ({ text }: { text: string }) => text, { name: "echo", description: "Echo text back.", schema: z.object({ text: z.string() }) });
  const model = new FakeToolCallingModel({});
  const asked = async (messages: BaseMessage[]) => {
    await model.invoke(messages);
    return {};
  };
  const graph = variant.sameModelCalls
    ? new StateGraph(MessagesAnnotation)
        .addNode("recall", async (state) => asked(state.messages))
        .addNode("agent", async (state) => ({ messages: [await model.invoke(state.messages)] }))
        .addNode("tools", new ToolNode([echo]))
        .addNode("critic", async (state) => asked(state.messages))
        .addEdge(START, "recall")
        .addEdge("recall", "agent")
        .addEdge("agent", "tools")
        .addEdge("tools", "critic")
        .addEdge("critic", END)
        .compile({ checkpointer })
    : new StateGraph(MessagesAnnotation)
        .addNode("agent", async (state) => ({ messages: [await model.invoke(state.messages)] }))
        .addNode("tools", new ToolNode([echo]))
        .addEdge(START, "agent")
        .addEdge("agent", "tools")
        .addEdge("tools", END)
        .compile({ checkpointer });
  const config = { ...(variant.durability ? { durability: variant.durability } : {}) };
  return {
    modelCalls: () => model.calls,
    async step(i: number) {
      const result = await graph.invoke({ messages: [new HumanMessage(`echo task ${i}`)] }, { configurable: { thread_id: `thread-${i}` }, ...config });
      if (result.messages.length !== 3) throw new Error("LangGraph run did not call the tool");
    },
    describe: () => `${db.pragma("journal_mode", { simple: true })}, synchronous=${db.pragma("synchronous", { simple: true })}`,
    close: async () => {
      db.close();
    },
  };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

interface Measured {
  usPerStep: number;
  cpuUsPerStep: number;
  modelCallsPerTask: number;
  durability: string;
}

async function measure(setup: (dir: string) => Promise<{ step(i: number): Promise<void>; close(): Promise<void>; describe(): string; modelCalls(): number }>): Promise<Measured> {
  const dir = mkdtempSync(join(tmpdir(), "ducklm-bench-"));
  const runner = await setup(dir);
  try {
    for (let i = 0; i < WARMUP; i += 1) await runner.step(-i - 1);
    const callsBefore = runner.modelCalls();
    const cpuBefore = process.cpuUsage();
    const started = process.hrtime.bigint();
    for (let i = 0; i < TASKS; i += 1) {
      await runner.step(i);
      await turn();
    }
    const elapsedUs = Number(process.hrtime.bigint() - started) / 1_000;
    const cpu = process.cpuUsage(cpuBefore);
    return { usPerStep: elapsedUs / TASKS, cpuUsPerStep: (cpu.user + cpu.system) / TASKS, modelCallsPerTask: (runner.modelCalls() - callsBefore) / TASKS, durability: runner.describe() };
  } finally {
    await runner.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const skipped: Measured = { usPerStep: NaN, cpuUsPerStep: NaN, modelCallsPerTask: NaN, durability: "" };
const sides = {
  duck: { name: "DuckLM, read-only echo", run: () => measure((dir) => duckSetup(dir, "echo")), results: [] as Measured[], skip: values.only === "langgraph" },
  duckEffect: { name: "DuckLM, side-effecting echo", run: () => measure((dir) => duckSetup(dir, "echo_effect")), results: [] as Measured[], skip: values.only === "langgraph" },
  graph: { name: "LangGraph.js + SqliteSaver", run: () => measure(langGraphSetup), results: [] as Measured[], skip: values.only === "ducklm" },
  graphSameCalls: { name: "LangGraph.js, 3 model calls", run: () => measure((dir) => langGraphSetup(dir, { sameModelCalls: true })), results: [] as Measured[], skip: values.only === "ducklm" },
  graphOneCommit: { name: "LangGraph.js, 3 calls, 1 commit", run: () => measure((dir) => langGraphSetup(dir, { sameModelCalls: true, durability: "exit" })), results: [] as Measured[], skip: values.only === "ducklm" },
};
const order = Object.values(sides);
for (let round = 0; round < ROUNDS; round += 1) {
  // Each round starts with another side; --only lets a profiler look at one side alone.
  for (let k = 0; k < order.length; k += 1) {
    const side = order[(round + k) % order.length]!;
    side.results.push(side.skip ? skipped : await side.run());
  }
}
const wall = (side: (typeof order)[number]) => median(side.results.map((result) => result.usPerStep));
const cpu = (side: (typeof order)[number]) => median(side.results.map((result) => result.cpuUsPerStep));
const row = (side: (typeof order)[number]) =>
  `  ${side.name.padEnd(30)} ${wall(side).toFixed(0).padStart(6)} µs/step wall (ratio ${(wall(side) / wall(sides.graph)).toFixed(3)}), ${cpu(side).toFixed(0).padStart(6)} µs CPU (ratio ${(cpu(side) / cpu(sides.graph)).toFixed(3)}), ${side.results[0]!.modelCallsPerTask.toFixed(0)} model call(s)/task   (rounds: ${side.results.map((result) => result.usPerStep.toFixed(0)).join(", ")})`;
const ratio = wall(sides.duckEffect) / wall(sides.graph);
console.log(`step-overhead: ${TASKS} tasks of one tool step each, ${ROUNDS} rounds (median, each starting with another side), after ${WARMUP} warm-up tasks; a turn of the event loop after each task`);
console.log(`  durability: DuckLM ${sides.duck.results[0]!.durability}; LangGraph.js ${sides.graph.results[0]!.durability} (1 = NORMAL); one file each, WAL`);
for (const side of order) console.log(row(side));
console.log("  DuckLM's model calls per task: the decision and the critic's score (recall is skipped on an empty memory; a task of one decision has no next one to fold the score into). LangGraph's agent makes one; the variants add a node before and after the tool that calls the model");
console.log("  commits per task: DuckLM read-only 1, side-effecting 2 (the call is on disk before it runs); LangGraph.js one per graph step by default, 1 with durability \"exit\"");
console.log(`  target: DuckLM ≤ 0.200 of LangGraph.js at each side's default; side-effecting (the stricter case), wall: ${ratio.toFixed(3)} — ${ratio <= 0.2 ? "met" : "NOT met"} (CPU ${(cpu(sides.duckEffect) / cpu(sides.graph)).toFixed(3)})`);
const equal = wall(sides.duck) / wall(sides.graphOneCommit);
console.log(`  target: DuckLM ≤ 0.350 of LangGraph.js at equal model calls (3) and commits (1), read-only, wall: ${equal.toFixed(3)} — ${equal <= 0.35 ? "met" : "NOT met"} (CPU ${(cpu(sides.duck) / cpu(sides.graphOneCommit)).toFixed(3)})`);
const sameCalls = wall(sides.duckEffect) / wall(sides.graphSameCalls);
console.log(`  at equal model calls (3), each side's default commits, side-effecting, wall: ${sameCalls.toFixed(3)} (CPU ${(cpu(sides.duckEffect) / cpu(sides.graphSameCalls)).toFixed(3)})`);
