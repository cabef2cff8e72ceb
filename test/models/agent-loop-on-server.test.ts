import { writeFileSync } from "node:fs";
import { join } from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ModelsConfigSchema } from "../../src/config/config-schemas.js";
import { createModelProvider } from "../../src/models/create-model-provider.js";
import { startLoopbackModelServer, type LoopbackModelServer } from "../helpers/model-server.js";
import { createTestRuntime, makeTempDir, type TestRuntime } from "../helpers/test-runtime.js";

// A loopback server that plays a model which reads its prompt: it asks to read the file until the
// prompt shows what the file holds, then answers from that. Only the file holds the duck's name, so
// an answer that has it was written from the tool's result.
let server: LoopbackModelServer;
let runtime: TestRuntime;

beforeAll(async () => {
  server = await startLoopbackModelServer();
  server.play((messages) => {
    const prompt = messages.map((message) => message.content).join("\n");
    if (prompt.includes("Should long-term memory")) return { text: JSON.stringify({ recall: false, query: "" }) };
    if (prompt.includes("Succeeded: ")) return { text: JSON.stringify({ correctness: 1, usefulness: 1, safety: 1, verdict: "pass", reason: "read" }) };
    // One model plays the Thinker and the JSON compiler: a decision is one call, the thought then the directive.
    if (!prompt.includes('"directive", the ExecutionDirective')) return { text: "I need to read the file before I can say." };
    const seen = /## What the steps so far returned\n([\s\S]*?)\n\n## Now\n/.exec(prompt)?.[1] ?? "";
    const name = /name is (\S+?)\./.exec(seen)?.[1];
    const thought = "I need to read the file before I can say.";
    if (!name) return { text: JSON.stringify({ thought, directive: { kind: "tool", tool: "file_read", arguments: { path: "duck.txt" }, reason: "the answer is in the file" } }) };
    // The critic runs on the same model: this decision judges the step before it, in the same answer.
    const reviewed = /"review", an object giving each of (.+?) a verdict as its output shows it/.exec(prompt)?.[1]?.split(", ") ?? [];
    const review = reviewed.length > 0 ? { review: Object.fromEntries(reviewed.map((stepId) => [stepId, "pass"])) } : {};
    return { text: JSON.stringify({ thought: "The file says it.", ...review, directive: { kind: "respond", answer: `The duck is called ${name} (from the file_read of duck.txt).` } }) };
  });
  const server_ = { base_url: server.baseUrl, model: "reader", structured_output: "json_schema" };
  const config = ModelsConfigSchema.parse({ roles: { thinker: { server: server_, max_tokens: 256 }, json_compiler: { server: server_, max_tokens: 512 } } });
  const models = await createModelProvider({ config, home: makeTempDir(), logger: pino({ level: "silent" }) });
  runtime = createTestRuntime({ models: models!, runtime: { agent: { max_iterations: 4 } } });
  writeFileSync(join(runtime.workspace, "duck.txt"), "Notes from the pond.\nThe duck's name is Quackers-7781.\n");
});

afterAll(async () => {
  await runtime?.dispose();
  await server?.close();
});

describe("the agent loop against an OpenAI-compatible server", () => {
  it("reads a file, then answers a question about it with a fact only the file holds", async () => {
    const outcome = await runtime.loop.submit({ text: "What is the duck called? It is written in duck.txt." }).done;
    expect(outcome.state).toBe("completed");
    expect(outcome.answer).toContain("Quackers-7781");
    const events = runtime.store.listEvents(outcome.task_id);
    expect(events.filter((event) => event.type === "iteration-started")).toHaveLength(1);
    expect(events.find((event) => event.type === "tool-called")?.payload).toMatchObject({ call: { tool: "file_read", arguments: { path: "duck.txt" } } });
    // The second decision request carried the file's text to the server, and asked for the server's count of what it cost.
    const directiveRequests = server.received.filter((request) => JSON.stringify(request.body).includes('\\"directive\\", the ExecutionDirective'));
    expect((directiveRequests[0]!.body as { stream_options?: unknown }).stream_options).toEqual({ include_usage: true });
    expect(directiveRequests).toHaveLength(2);
    expect(JSON.stringify(directiveRequests[1]!.body)).toContain("Quackers-7781");
    expect(JSON.stringify(directiveRequests[0]!.body)).not.toContain("Quackers-7781");
    // The critic runs on the same model: the second decision judged the step, and no call of its own was made.
    expect(server.received).toHaveLength(2);
    const decided = events.filter((event) => event.type === "directive-decided").map((event) => event.payload as { review?: unknown });
    expect(decided[1]!.review).toEqual([{ step_id: "step-1", iteration: 1, verdict: "pass" }]);
    expect(events.find((event) => event.type === "critic-scored")?.payload).toMatchObject({ step_id: "step-1", source: "deferred" });
  });
});
