import { writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import pino from "pino";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { ModelsConfigSchema } from "../../src/config/config-schemas.js";
import { ExecutionDirectiveSchema } from "../../src/contracts/index.js";
import { createModelProvider } from "../../src/models/create-model-provider.js";
import type { ModelProvider } from "../../src/models/model-provider.js";
import { copyOfConfig, runDucklm } from "../helpers/cli-child.js";
import { createTestRuntime, makeTempDir } from "../helpers/test-runtime.js";

const logger = pino({ level: "silent" });

interface Received {
  path: string;
  authorization: string | undefined;
  body: Record<string, unknown>;
}

/** A loopback stand-in for an OpenAI-compatible server: answers from `reply`, streaming as SSE. */
let server: Server;
let baseUrl: string;
const received: Received[] = [];
let reply: (body: Record<string, unknown>) => { status?: number; chunks?: string[]; raw?: string; json?: unknown; jsonText?: string; stallMs?: number };

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let text = "";
    request.on("data", (chunk) => (text += chunk));
    request.on("end", () => resolve(text));
  });
}

async function handle(request: IncomingMessage, response: ServerResponse) {
  const body = JSON.parse(await readBody(request)) as Record<string, unknown>;
  received.push({ path: request.url ?? "", authorization: request.headers.authorization, body });
  if (request.url === "/v1/embeddings") {
    const input = body.input as string[];
    response.setHeader("content-type", "application/json");
    response.end(JSON.stringify({ data: input.map((text, index) => ({ index, embedding: [text.length, 1, 0, 0] })).reverse() }));
    return;
  }
  const answer = reply(body);
  if (answer.status && answer.status >= 400) {
    response.statusCode = answer.status;
    if (answer.status === 503) response.setHeader("retry-after", "0.05");
    response.end(JSON.stringify({ error: { message: "invalid api key" } }));
    return;
  }
  if (answer.json !== undefined || answer.jsonText !== undefined) {
    response.setHeader("content-type", "application/json");
    response.end(answer.jsonText ?? JSON.stringify(answer.json));
    return;
  }
  response.setHeader("content-type", "text/event-stream");
  if (answer.raw !== undefined) {
    response.end(answer.raw);
    return;
  }
  for (const [index, piece] of (answer.chunks ?? []).entries()) {
    // Events split across writes, CRLF line ends and keep-alive comments, as real servers send them.
    const event = `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", choices: [{ index: 0, delta: index === 0 ? { role: "assistant", content: piece } : { content: piece }, finish_reason: null }] })}\r\n\r\n`;
    response.write(event.slice(0, 10));
    response.write(event.slice(10));
    if (index === 0) response.write(": keep-alive\n\n");
    if (answer.stallMs) await new Promise((resolve) => setTimeout(resolve, answer.stallMs));
  }
  response.end("data: [DONE]\n\n");
}

beforeAll(async () => {
  server = createServer((request, response) => void handle(request, response));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
beforeEach(() => {
  received.length = 0;
});

async function provider(roles: Record<string, unknown>, env: NodeJS.ProcessEnv = {}): Promise<ModelProvider> {
  const previous = { ...process.env };
  Object.assign(process.env, env);
  try {
    const created = await createModelProvider({ config: ModelsConfigSchema.parse({ roles }), home: makeTempDir(), logger, callTimeoutMs: 2_000 });
    if (!created) throw new Error("no provider");
    return created;
  } finally {
    for (const key of Object.keys(env)) if (previous[key] === undefined) delete process.env[key];
  }
}

const remote = (extra: Record<string, unknown> = {}) => ({ server: { base_url: baseUrl, model: "duck-7b", ...extra }, max_tokens: 77, temperature: 0.4 });

describe("a role on an OpenAI-compatible server", () => {
  it("streams text chunk by chunk with the key from the environment", async () => {
    process.env.DUCK_TEST_KEY = "sk-test-123";
    const models = await provider({ thinker: remote({ api_key_env: "DUCK_TEST_KEY" }) });
    reply = () => ({ chunks: ["Hel", "lo, ", "duck", "!"] });
    const deltas: string[] = [];
    const text = await models.generateText({ role: "thinker", system: "be brief", prompt: "greet", onDelta: (delta) => deltas.push(delta) });
    expect(text).toBe("Hello, duck!");
    expect(deltas).toEqual(["Hel", "lo, ", "duck", "!"]);
    expect(received[0]).toMatchObject({ path: "/v1/chat/completions", authorization: "Bearer sk-test-123" });
    expect(received[0]!.body).toMatchObject({ model: "duck-7b", stream: true, max_tokens: 77, temperature: 0.4, messages: [{ role: "system", content: "be brief" }, { role: "user", content: "greet" }] });
    delete process.env.DUCK_TEST_KEY;
  });

  it("asks for JSON with the schema as response_format and validates what comes back", async () => {
    const models = await provider({ json_compiler: remote() });
    reply = () => ({ chunks: ['{"kind":"res', 'pond","answer":"quack"}'] });
    const result = await models.generateJson({ role: "json_compiler", system: "s", prompt: "p", schema: ExecutionDirectiveSchema });
    expect(result.value).toEqual({ kind: "respond", answer: "quack" });
    const format = received[0]!.body.response_format as { type: string; json_schema: { schema: { anyOf?: unknown[] } } };
    expect(format.type).toBe("json_schema");
    expect(JSON.stringify(format.json_schema.schema)).toContain("respond");
    reply = () => ({ chunks: ['{"kind":"respond"}'] });
    await expect(models.generateJson({ role: "json_compiler", system: "s", prompt: "p", schema: ExecutionDirectiveSchema })).rejects.toMatchObject({ code: "DUCK_ERR_MODEL_OUTPUT_INVALID" });
  });

  it("puts the schema in the prompt for servers without structured output", async () => {
    const models = await provider({ json_compiler: remote({ structured_output: "prompt" }) });
    reply = () => ({ chunks: ["```json\n", '{"n": 3}', "\n```"] });
    const result = await models.generateJson({ role: "json_compiler", system: "s", prompt: "count", schema: z.object({ n: z.number() }) });
    expect(result.value).toEqual({ n: 3 });
    expect(received[0]!.body.response_format).toBeUndefined();
    expect((received[0]!.body.messages as Array<{ content: string }>)[1]!.content).toContain('"n"');
  });

  it("finds the JSON in an answer of prose around a fenced block, and says what is wrong with one that holds none", async () => {
    const models = await provider({ json_compiler: remote({ structured_output: "prompt" }) });
    const ask = () => models.generateJson({ role: "json_compiler", system: "s", prompt: "count", schema: z.object({ n: z.number() }) });
    reply = () => ({ chunks: ["Here you go:\n", "```json\n", '{"n": 4}', "\n```\n", "Anything else?"] });
    expect((await ask()).value).toEqual({ n: 4 });
    reply = () => ({ chunks: ['Sure! The answer is {"n": 5}.'] });
    expect((await ask()).value).toEqual({ n: 5 });
    reply = () => ({ chunks: ["not json at all"] });
    await expect(ask()).rejects.toMatchObject({ code: "DUCK_ERR_MODEL_OUTPUT_INVALID", message: 'json_compiler output is not JSON: it begins "not json at all"' });
    reply = () => ({ chunks: [""] });
    await expect(ask()).rejects.toMatchObject({ code: "DUCK_ERR_MODEL_OUTPUT_INVALID", message: "json_compiler output is empty where JSON was asked for" });
    reply = () => ({ chunks: ['{"n": '] });
    await expect(ask()).rejects.toMatchObject({ message: "json_compiler output is not complete JSON (cut at max_tokens?)" });
  });

  it("sends a schema that requires what zod requires and leaves long answers uncut", async () => {
    const models = await provider({ json_compiler: remote() });
    reply = () => ({ chunks: [JSON.stringify({ kind: "respond", answer: "q".repeat(5_000) })] });
    const result = await models.generateJson({ role: "json_compiler", system: "s", prompt: "p", schema: ExecutionDirectiveSchema });
    expect(result.value).toMatchObject({ kind: "respond" });
    const schema = (received[0]!.body.response_format as { json_schema: { schema: { oneOf: Array<{ properties: { kind: { const: string }; answer?: unknown }; required: string[] }> } } }).json_schema.schema;
    const respond = schema.oneOf.find((option) => option.properties.kind.const === "respond")!;
    expect(respond.required).toContain("answer");
    expect(respond.properties.answer).toEqual({ type: "string" });
  });

  it("asks a busy server again (503 while it loads a model) and gives up after a few tries", async () => {
    const models = await provider({ thinker: remote() });
    let calls = 0;
    reply = () => (++calls === 1 ? { status: 503 } : { chunks: ["ready now"] });
    expect(await models.generateText({ role: "thinker", system: "", prompt: "x" })).toBe("ready now");
    expect(calls).toBe(2);
    calls = 0;
    reply = () => (++calls, { status: 503 });
    await expect(models.generateText({ role: "thinker", system: "", prompt: "x" })).rejects.toMatchObject({ code: "DUCK_ERR_MODEL_SERVER", message: expect.stringContaining("HTTP 503") });
    expect(calls).toBe(3);
  });

  it("reads a server that ignores `stream` and answers with one JSON body", async () => {
    const models = await provider({ thinker: remote() });
    reply = () => ({ json: { choices: [{ message: { role: "assistant", content: "whole answer" } }] } });
    expect(await models.generateText({ role: "thinker", system: "", prompt: "x" })).toBe("whole answer");
    // A body that says it is JSON and is not is the server's failure, said as such.
    reply = () => ({ jsonText: "<html>Bad gateway</html>" });
    await expect(models.generateText({ role: "thinker", system: "", prompt: "x" })).rejects.toMatchObject({ code: "DUCK_ERR_MODEL_SERVER", message: expect.stringContaining("not JSON: <html>Bad gateway") });
  });

  it("turns HTTP errors, a missing key variable, an unreachable server and a stream error into clear errors", async () => {
    const models = await provider({ thinker: remote() });
    reply = () => ({ status: 401 });
    await expect(models.generateText({ role: "thinker", system: "", prompt: "x" })).rejects.toMatchObject({ code: "DUCK_ERR_MODEL_SERVER", message: expect.stringContaining("HTTP 401") });
    reply = () => ({ raw: 'data: {"error":{"message":"model crashed"}}\n\n' });
    await expect(models.generateText({ role: "thinker", system: "", prompt: "x" })).rejects.toMatchObject({ message: expect.stringContaining("model crashed") });
    const keyless = await provider({ thinker: remote({ api_key_env: "DUCK_TEST_MISSING_KEY" }) });
    await expect(keyless.generateText({ role: "thinker", system: "", prompt: "x" })).rejects.toMatchObject({ code: "DUCK_ERR_CONFIG_INVALID" });
    const down = await provider({ thinker: { server: { base_url: "http://127.0.0.1:8/v1", model: "m" } } });
    await expect(down.generateText({ role: "thinker", system: "", prompt: "x" })).rejects.toMatchObject({ code: "DUCK_ERR_MODEL_SERVER" });
  });

  it("keeps a base_url's query after the path (Azure's api-version), and never shows a key it carries", async () => {
    reply = () => ({ status: 500 });
    const models = await provider({ thinker: { server: { base_url: `${baseUrl}?api-version=2024-02-01&api_key=sk-in-the-query`, model: "m" } } });
    const error = (await models.generateText({ role: "thinker", system: "", prompt: "x" }).then(() => new Error("no error"), (caught: unknown) => caught)) as Error;
    expect(received.at(-1)?.path).toBe("/v1/chat/completions?api-version=2024-02-01&api_key=sk-in-the-query");
    expect(error.message).toContain("api-version=2024-02-01&api_key=hidden");
    expect(error.message).not.toContain("sk-in-the-query");
    // A password in the address would be shown and stored wherever the address is: refused at load.
    expect(() => ModelsConfigSchema.parse({ roles: { thinker: { server: { base_url: "http://user:pa55word@127.0.0.1:8/v1", model: "m" } } } })).toThrow(/user name or password in base_url/);
  });

  it("stops a stalled stream when the call is cancelled", async () => {
    const models = await provider({ thinker: remote() });
    reply = () => ({ chunks: ["a", "b", "c", "d"], stallMs: 400 });
    const controller = new AbortController();
    const deltas: string[] = [];
    const call = models.generateText({ role: "thinker", system: "", prompt: "x", signal: controller.signal, onDelta: (delta) => {
      deltas.push(delta);
      controller.abort();
    } });
    await expect(call).rejects.toBeDefined();
    expect(deltas).toEqual(["a"]);
  });

  it("embeds through /embeddings in input order and checks the dimension", async () => {
    const models = (await provider({ thinker: remote(), embeddings: { server: { base_url: baseUrl, model: "embed" }, dimension: 4 } })) as ModelProvider & { embed(texts: string[]): Promise<Float32Array[]> };
    const vectors = await models.embed(["a", "abc"]);
    expect(vectors.map((vector) => vector[0])).toEqual([1, 3]);
    const wrong = (await provider({ thinker: remote(), embeddings: { server: { base_url: baseUrl, model: "embed" }, dimension: 8 } })) as typeof models;
    await expect(wrong.embed(["a"])).rejects.toMatchObject({ code: "DUCK_ERR_MODEL_OUTPUT_INVALID" });
  });

  it("runs a whole task with the thinker and the JSON compiler on the server", async () => {
    const models = await provider({ thinker: remote(), json_compiler: remote() });
    reply = (body) => {
      const prompt = JSON.stringify(body.messages);
      if (body.response_format === undefined) return { chunks: ["I should ", "answer directly."] };
      if (prompt.includes("Should long-term memory")) return { chunks: ['{"recall":false,"query":""}'] };
      // One model on one server plays the Thinker and the JSON compiler: one call writes the thought and the directive.
      return { chunks: ['{"thought":"I should ', 'answer directly.",', '"directive":{"kind":"respond",', '"answer":"ducks say quack"}}'] };
    };
    // Every chunk the server streams is recorded as it comes (stream_gather_ms 0), so the deltas show the streaming.
    const runtime = createTestRuntime({ models, runtime: { storage: { stream_gather_ms: 0 } } });
    try {
      const outcome = await runtime.loop.submit({ text: "what do ducks say?" }).done;
      expect(outcome.state).toBe("completed");
      expect(outcome.answer).toBe("ducks say quack");
      const types = runtime.store.listEvents(outcome.task_id).map((event) => event.type);
      expect(types.filter((type) => type === "model-output-delta").length).toBeGreaterThanOrEqual(4);
    } finally {
      await runtime.dispose();
    }
  });

  it("refuses a role that names both a file and a server", () => {
    expect(() => ModelsConfigSchema.parse({ roles: { thinker: { file: "a.gguf", server: { base_url: baseUrl, model: "m" } } } })).toThrow(/either file/);
  });
});

describe("`ducklm models` with a role on a server", () => {
  it("lists the server as what serves the role, and measures it", async () => {
    const configDir = copyOfConfig("ducklm-remote-config-");
    writeFileSync(join(configDir, "models.json"), JSON.stringify({ roles: { thinker: { server: { base_url: baseUrl, model: "duck-7b" } } } }));
    const listed = await runDucklm(["models", "list", "--json"], configDir);
    expect(listed.code).toBe(0);
    const rows = listed.stdout.trim().split("\n").map((line) => JSON.parse(line) as { role: string; server: string | null; served_by: string | null });
    expect(rows.find((row) => row.role === "thinker")).toMatchObject({ server: `duck-7b @ ${baseUrl}`, served_by: "thinker" });
    expect(rows.find((row) => row.role === "critic")?.served_by).toBe("thinker");
    reply = () => ({ chunks: ["one ", "two ", "three"] });
    const bench = await runDucklm(["models", "bench", "thinker", "--tokens", "8"], configDir);
    expect(bench.stderr).toBe("");
    expect(bench.code).toBe(0);
    expect(bench.stdout).toMatch(/generation\s+\d+ tokens in \d+ ms/);
  }, 60_000);
});
