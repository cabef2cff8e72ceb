import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { getLlama, LlamaChatSession, type Llama, type LlamaContext, type LlamaModel } from "node-llama-cpp";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ModelsConfigSchema } from "../../src/config/config-schemas.js";
import { createModelProvider } from "../../src/models/create-model-provider.js";
import { fixtureModels } from "../helpers/fixture-models.js";
import { createTestRuntime, makeTempDir } from "../helpers/test-runtime.js";

// A small OpenAI-compatible server in front of llama.cpp (node-llama-cpp on the fixture model), the
// way llama.cpp's own server works: streamed chat completions, response_format json_schema decoded
// under a grammar. DuckLM talks to it only over HTTP.
let llama: Llama;
let model: LlamaModel;
let context: LlamaContext;
let server: Server;
let baseUrl: string;
let requests = 0;
let queue: Promise<unknown> = Promise.resolve();

beforeAll(async () => {
  llama = await getLlama({ gpu: false, build: "never" });
  model = await llama.loadModel({ modelPath: fixtureModels().chat, gpuLayers: 0 });
  context = await model.createContext({ contextSize: 4096, threads: 1 });
  server = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      // One sequence: requests take turns, as a one-slot llama-server does.
      queue = queue.then(async () => {
        requests += 1;
        const input = JSON.parse(body) as { messages: Array<{ role: string; content: string }>; max_tokens: number; temperature: number; seed?: number; response_format?: { json_schema?: { schema: object } } };
        const schema = input.response_format?.json_schema?.schema;
        const grammar = schema ? await llama.createGrammarForJsonSchema(schema as Parameters<Llama["createGrammarForJsonSchema"]>[0]) : undefined;
        const sequence = context.getSequence();
        const session = new LlamaChatSession({ contextSequence: sequence, systemPrompt: input.messages.find((message) => message.role === "system")?.content ?? "" });
        response.setHeader("content-type", "text/event-stream");
        try {
          await session.prompt(input.messages.at(-1)!.content, {
            ...(grammar ? { grammar } : {}),
            maxTokens: input.max_tokens,
            temperature: input.temperature,
            seed: 7,
            onTextChunk: (text) => response.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: text } }] })}\n\n`),
          });
        } finally {
          session.dispose();
          sequence.dispose();
        }
        response.end("data: [DONE]\n\n");
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
}, 120_000);

afterAll(async () => {
  await new Promise<void>((resolve) => server?.close(() => resolve()));
  await context?.dispose();
  await model?.dispose();
  await llama?.dispose();
});

describe("roles on an OpenAI-compatible server running llama.cpp", () => {
  it("runs whole tasks over HTTP: each completes or fails with a clear code, with streamed output", async () => {
    const role = { server: { base_url: baseUrl, model: "tiny" }, max_tokens: 64, temperature: 0.8 };
    const config = ModelsConfigSchema.parse({ roles: { thinker: role, json_compiler: { ...role, max_tokens: 768 }, critic: { ...role, max_tokens: 512 } } });
    const models = await createModelProvider({ config, home: makeTempDir(), logger: pino({ level: "silent" }) });
    const runtime = createTestRuntime({ models, runtime: { timeouts: { task_ms: 120_000, step_ms: 10_000 } } });
    try {
      for (const text of ["List the files here.", "What is in README.md?", "Say something."]) {
        const outcome = await runtime.loop.submit({ text }).done;
        expect(["completed", "failed", "awaiting_permission"]).toContain(outcome.state);
        if (outcome.state === "failed") expect(outcome.error?.code).toMatch(/^DUCK_ERR_(?!INTERNAL|MODEL_SERVER)/);
        const events = runtime.store.listEvents(outcome.task_id);
        const deltas = events.filter((event) => event.type === "model-output-delta");
        expect(deltas.length).toBeGreaterThan(1);
        const decided = events.find((event) => event.type === "directive-decided");
        // The directive was decoded under the server's grammar, or was refused (cut at max_tokens, or
        // steps the compiler could not mend in its retries): said clearly.
        if (!decided) expect(outcome.error?.code).toMatch(/^DUCK_ERR_(MODEL_OUTPUT_INVALID|TOOL_INPUT_INVALID|PLAN_MISSING_DEPENDENCY|PLAN_CYCLE|PLAN_DUPLICATE_STEP)$/);
      }
      expect(requests).toBeGreaterThanOrEqual(6);
    } finally {
      await runtime.dispose();
    }
  }, 300_000);
});
