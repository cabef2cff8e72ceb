import { writeFileSync } from "node:fs";
import { join } from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { ModelsConfigSchema } from "../../src/config/config-schemas.js";
import { createModelProvider } from "../../src/models/create-model-provider.js";
import { replayTask } from "../../src/replay/replay-task.js";
import { startLoopbackModelServer, type LoopbackModelServer, type ServerReply } from "../helpers/model-server.js";
import { createTestRuntime, makeTempDir, type TestRuntime } from "../helpers/test-runtime.js";

// A server in `structured_output: "tools"` mode plays a model that calls tools natively: the task's
// tools go as tool definitions, and the model's own tool calls (or its text) are the directive.
let server: LoopbackModelServer | undefined;
let runtime: TestRuntime | undefined;

afterEach(async () => {
  await runtime?.dispose();
  await server?.close();
  runtime = undefined;
  server = undefined;
});

async function setUp(play: (prompt: string, body: Record<string, unknown>) => ServerReply): Promise<{ server: LoopbackModelServer; runtime: TestRuntime }> {
  server = await startLoopbackModelServer();
  server.play((messages, body) => play(messages.map((message) => message.content).join("\n"), body));
  const served = { base_url: server.baseUrl, model: "caller", structured_output: "tools" };
  const config = ModelsConfigSchema.parse({ roles: { thinker: { server: served, max_tokens: 256 }, json_compiler: { server: served, max_tokens: 512 } } });
  const models = await createModelProvider({ config, home: makeTempDir(), logger: pino({ level: "silent" }) });
  runtime = createTestRuntime({ models: models!, runtime: { agent: { max_iterations: 4 }, retry: { max_step_retries: 0 } } });
  return { server, runtime };
}

const toolNames = (body: Record<string, unknown>) => ((body.tools as Array<{ function: { name: string } }> | undefined) ?? []).map((tool) => tool.function.name);

describe("decisions by native tool calls", () => {
  it("reads a file by the model's own tool call, then answers in text: one call per decision, nothing else", async () => {
    const { server, runtime } = await setUp((prompt) => {
      const name = /name is (\S+?)\./.exec(prompt)?.[1];
      if (!name) return { text: "I will read the file.", toolCalls: [{ name: "file_read", arguments: { path: "duck.txt" } }] };
      return { text: `The duck is called ${name}.` };
    });
    writeFileSync(join(runtime.workspace, "duck.txt"), "The duck's name is Quackers-7781.\n");
    const outcome = await runtime.loop.submit({ text: "What is the duck called? It is in duck.txt." }).done;
    expect(outcome.state).toBe("completed");
    expect(outcome.answer).toBe("The duck is called Quackers-7781.");
    // Two requests: the tool call and the answer; the step's result was judged by the model acting on it.
    expect(server.received).toHaveLength(2);
    const first = server.received[0]!.body;
    expect(toolNames(first)).toContain("file_read");
    expect(first.tool_choice).toBe("auto");
    expect(first.response_format).toBeUndefined();
    // The catalogue goes as tool definitions, not a second time in the prompt's text.
    expect(JSON.stringify(first.messages)).not.toContain("## Tools");
    const events = runtime.store.listEvents(outcome.task_id);
    const decided = events.filter((event) => event.type === "directive-decided").map((event) => event.payload.directive);
    expect(decided[0]).toMatchObject({ kind: "tool", tool: "file_read", arguments: { path: "duck.txt" }, reason: "I will read the file." });
    expect(decided[1]).toMatchObject({ kind: "respond" });
    expect((await replayTask(events, runtime.config)).first_difference ?? null).toBeNull();
  });

  it("several calls at once are steps side by side", async () => {
    const { runtime } = await setUp((prompt) => {
      if (!prompt.includes("Decision 1:")) return { toolCalls: [{ name: "file_read", arguments: { path: "a.txt" } }, { name: "file_read", arguments: { path: "b.txt" } }] };
      return { text: "Both read." };
    });
    writeFileSync(join(runtime.workspace, "a.txt"), "alpha\n");
    writeFileSync(join(runtime.workspace, "b.txt"), "beta\n");
    const outcome = await runtime.loop.submit({ text: "Read a.txt and b.txt." }).done;
    expect(outcome.state).toBe("completed");
    const events = runtime.store.listEvents(outcome.task_id);
    const plan = events.find((event) => event.type === "directive-decided")!.payload.directive as { kind: string; steps: Array<{ tool: string; depends_on: string[] }> };
    expect(plan.kind).toBe("plan");
    expect(plan.steps.map((step) => [step.tool, step.depends_on])).toEqual([
      ["file_read", []],
      ["file_read", []],
    ]);
    expect(events.filter((event) => event.type === "step-completed")).toHaveLength(2);
  });

  it("arguments that are not JSON, or a tool that does not exist, are asked for again with the error", async () => {
    let calls = 0;
    const { server, runtime } = await setUp((prompt) => {
      calls += 1;
      if (calls === 1) return { toolCalls: [{ name: "file_read", arguments: '{"path": "duck.txt"' }] };
      if (calls === 2) return { toolCalls: [{ name: "launch_missiles", arguments: {} }] };
      if (!prompt.includes("Decision 1:")) return { toolCalls: [{ name: "file_read", arguments: { path: "duck.txt" } }] };
      return { text: "Read it." };
    });
    writeFileSync(join(runtime.workspace, "duck.txt"), "quack\n");
    runtime.config.runtime.agent.directive_retries = 2;
    const outcome = await runtime.loop.submit({ text: "Read duck.txt." }).done;
    expect(outcome.state).toBe("completed");
    const retried = runtime.store.listEvents(outcome.task_id).filter((event) => event.type === "directive-retried").map((event) => String(event.payload.error));
    expect(retried[0]).toMatch(/not JSON/);
    expect(retried[1]).toMatch(/launch_missiles/);
    // The retry extends what the model read, with the refusal appended.
    expect(JSON.stringify(server.received[1]!.body.messages)).toContain("Your previous answer was refused");
  });

  it("an answer with neither text nor a tool call is refused, not taken for an empty answer", async () => {
    const { runtime } = await setUp(() => ({ text: "" }));
    runtime.config.runtime.agent.directive_retries = 0;
    const outcome = await runtime.loop.submit({ text: "Say something." }).done;
    expect(outcome.state).toBe("failed");
    expect(outcome.error?.message).toMatch(/neither text nor a tool call/);
  });
});
