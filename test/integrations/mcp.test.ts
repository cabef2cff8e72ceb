import { tmpdir } from "node:os";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IntegrationsConfigSchema } from "../../src/config/config-schemas.js";
import { expandEnv } from "../../src/config/expand-env.js";
import { connectMcpServers, mcpToolName, type McpConnectResult } from "../../src/integrations/mcp-tools.js";
import type { ExecutionDirective } from "../../src/contracts/index.js";
import { createTestRuntime, makeTempDir, type TestRuntime } from "../helpers/test-runtime.js";
import { scriptedAgent } from "../helpers/scripted-agent.js";

const require = createRequire(import.meta.url);
const FILESYSTEM_SERVER = join(dirname(require.resolve("@modelcontextprotocol/server-filesystem/package.json")), "dist/index.js");
const EVERYTHING_SERVER = join(dirname(require.resolve("@modelcontextprotocol/server-everything/package.json")), "dist/index.js");
const logger = pino({ level: "silent" });

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

let workspace: string;
let everything: ChildProcess;
let everythingUrl: string;
let mcp: McpConnectResult;

beforeAll(async () => {
  workspace = makeTempDir("ducklm-mcp-ws-");
  writeFileSync(join(workspace, "hello.txt"), "hello from the workspace\n");
  const port = await freePort();
  everything = spawn(process.execPath, [EVERYTHING_SERVER, "streamableHttp"], { env: { ...process.env, PORT: String(port) }, stdio: ["ignore", "ignore", "pipe"] });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("server-everything did not start")), 20_000);
    everything.stderr!.on("data", (chunk: Buffer) => {
      if (String(chunk).includes("listening")) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  everythingUrl = `http://127.0.0.1:${port}/mcp`;
  const config = IntegrationsConfigSchema.parse({
    mcp: {
      servers: {
        files: { command: process.execPath, args: [FILESYSTEM_SERVER, workspace], tools: { read_text_file: "read_only", list_directory: "read_only" } },
        everything: { url: everythingUrl, permission: "normal" },
        broken: { command: join(workspace, "no-such-program") },
      },
      connect_timeout_ms: 20_000,
    },
  }).mcp;
  mcp = await connectMcpServers(config, { workspace, home: tmpdir(), logger });
}, 60_000);

afterAll(async () => {
  await mcp?.close();
  everything?.kill();
});

describe("MCP servers from integrations.json", () => {
  it("registers each server's tools under a prefixed name and reports a server that cannot start", () => {
    const names = mcp.tools.map((tool) => tool.name);
    expect(names).toContain("mcp__files__read_text_file");
    expect(names).toContain("mcp__files__write_file");
    expect(names).toContain("mcp__everything__echo");
    expect(mcp.failures.map((failure) => failure.server)).toEqual(["broken"]);
    expect(mcpToolName("my-server", "odd.name/x")).toBe("mcp__my-server__odd_name_x");
  });

  it("takes each tool's category from the server's setting, overridden per tool", () => {
    const byName = new Map(mcp.tools.map((tool) => [tool.name, tool]));
    expect(byName.get("mcp__files__read_text_file")).toMatchObject({ permission: "read_only", effect: "read-only" });
    expect(byName.get("mcp__files__write_file")).toMatchObject({ permission: "unknown", effect: "side-effecting" });
    expect(byName.get("mcp__everything__echo")).toMatchObject({ permission: "normal", effect: "side-effecting" });
  });

  it("substitutes ${NAME} from the environment and refuses a missing variable", () => {
    expect(expandEnv("Bearer ${TOKEN_X}", { TOKEN_X: "abc" }, "h")).toBe("Bearer abc");
    expect(() => expandEnv("${NOPE_X}", {}, "mcp.servers.a.env.KEY")).toThrow(/NOPE_X is not set/);
  });

  it("connects again when a stdio server has gone away, instead of failing every call after", async () => {
    const files = mcp.connections.find((connection) => connection.server === "files")!;
    const read = mcp.tools.find((tool) => tool.name === "mcp__files__read_text_file")!;
    const context = { signal: new AbortController().signal, workspace, timeoutMs: 10_000, outputCapBytes: 65_536, fileReadMaxBytes: 1_000_000, taskId: "t" };
    const firstPid = files.session.pid;
    expect(firstPid).toBeGreaterThan(0);
    process.kill(firstPid!, "SIGKILL");
    for (let i = 0; i < 100 && files.session.client !== null; i += 1) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(files.session.client).toBeNull();
    const result = await read.execute({ path: join(workspace, "hello.txt") }, context);
    expect(result.output).toContain("hello from the workspace");
    expect(files.session.pid).not.toBe(firstPid);
  });

  it("cuts a large answer at the output cap and says so", async () => {
    writeFileSync(join(workspace, "big.txt"), "quack ".repeat(50_000));
    const read = mcp.tools.find((tool) => tool.name === "mcp__files__read_text_file")!;
    const context = { signal: new AbortController().signal, workspace, timeoutMs: 10_000, outputCapBytes: 1_000, fileReadMaxBytes: 1_000_000, taskId: "t" };
    const result = await read.execute({ path: join(workspace, "big.txt") }, context);
    expect(result.truncated).toBe(true);
    expect(result.output.length).toBeLessThan(1_100);
    expect(result.output).toContain("[cut at 1000 characters of 300000]");
  });

  describe("in tasks", () => {
    let runtime: TestRuntime;
    let directive: ExecutionDirective;
    beforeAll(() => {
      const models = scriptedAgent({ directive: () => directive, draft: "use the tool", verdict: () => "pass" });
      runtime = createTestRuntime({ models, tools: mcp.tools, workspace });
    });
    afterAll(async () => {
      await runtime.close();
    });

    it("shows MCP tools to the models with the server's input schema", () => {
      const entry = runtime.tools.catalogue().find((tool) => tool.name === "mcp__everything__echo");
      expect(entry?.description).toContain("[MCP everything]");
      expect(JSON.stringify(entry?.input_schema)).toContain("message");
    });

    it("runs a read-only MCP tool over stdio and an echo over streamable HTTP without asking", async () => {
      directive = { kind: "tool", tool: "mcp__files__read_text_file", arguments: { path: join(workspace, "hello.txt") }, reason: "" };
      const read = await runtime.loop.submit({ text: "read hello.txt through MCP" }).done;
      expect(read.state).toBe("completed");
      expect(read.answer).toContain("hello from the workspace");
      directive = { kind: "tool", tool: "mcp__everything__echo", arguments: { message: "quack over http" }, reason: "" };
      const echoed = await runtime.loop.submit({ text: "echo through MCP" }).done;
      expect(echoed.state).toBe("completed");
      expect(echoed.answer).toContain("quack over http");
    });

    it("asks before a call to a server over HTTP once the task has read a file, as the host policy says for every request off this machine", async () => {
      directive = {
        kind: "plan",
        goal: "read then echo",
        steps: [
          { id: "read", kind: "tool", description: "", depends_on: [], tool: "file_read", arguments: { path: "hello.txt" } },
          { id: "send", kind: "tool", description: "", depends_on: ["read"], tool: "mcp__everything__echo", arguments: { message: "{{read}}" } },
        ],
      };
      const outcome = await runtime.loop.submit({ text: "read hello.txt and echo it through MCP" }).done;
      expect(outcome.state).toBe("awaiting_permission");
      expect(outcome.pending_permissions[0]).toMatchObject({ call: { tool: "mcp__everything__echo" }, hosts: ["127.0.0.1"] });
      expect(outcome.pending_permissions[0]!.reason).toMatch(/read data of this machine \(the output of step read \(file_read\)\)/);
      const denied = await runtime.loop.resolvePermission(outcome.task_id, outcome.pending_permissions[0]!.request_id, "deny").done;
      expect(runtime.store.listEvents(denied.task_id).some((event) => event.type === "tool-called" && (event.payload as { step_id: string }).step_id === "send")).toBe(false);
    });

    it("waits for permission before a side-effecting MCP tool, and remembers 'always' for that tool only", async () => {
      const target = join(workspace, "written-by-mcp.txt");
      directive = { kind: "tool", tool: "mcp__files__write_file", arguments: { path: target, content: "approved write" }, reason: "" };
      const paused = await runtime.loop.submit({ text: "write a file through MCP" }).done;
      expect(paused.state).toBe("awaiting_permission");
      expect(paused.pending_permissions[0]).toMatchObject({ category: "unknown", call: { tool: "mcp__files__write_file" } });
      expect(() => readFileSync(target)).toThrow();
      const done = await runtime.loop.resolvePermission(paused.task_id, paused.pending_permissions[0]!.request_id, "allow_always").done;
      expect(done.state).toBe("completed");
      expect(readFileSync(target, "utf8")).toBe("approved write");
      expect(runtime.approvals.list().map((approval) => approval.command)).toEqual(["tool:mcp__files__write_file"]);

      directive = { kind: "tool", tool: "mcp__files__write_file", arguments: { path: target, content: "second write" }, reason: "" };
      expect((await runtime.loop.submit({ text: "write again" }).done).state).toBe("completed");
      expect(readFileSync(target, "utf8")).toBe("second write");
      directive = { kind: "tool", tool: "mcp__files__create_directory", arguments: { path: join(workspace, "made") }, reason: "" };
      expect((await runtime.loop.submit({ text: "another MCP tool" }).done).state).toBe("awaiting_permission");
    });

    it("reports an MCP tool's error result as a failed tool result", async () => {
      directive = { kind: "tool", tool: "mcp__files__read_text_file", arguments: { path: "/etc/passwd" }, reason: "" };
      const outside = await runtime.loop.submit({ text: "read outside" }).done;
      const events = runtime.store.listEvents(outside.task_id);
      const result = events.find((event) => event.type === "tool-result")?.payload as { result: { ok: boolean; error?: { code: string; message: string } } };
      expect(result.result.ok).toBe(false);
      expect(result.result.error?.code).toBe("DUCK_ERR_TOOL_FAILED");
      expect(result.result.error?.message).toMatch(/denied|outside|not allowed/i);
    });
  });
});

describe("`ducklm doctor` with MCP servers configured", () => {
  it("connects to them from the command line and lists their tools, naming a server that fails", () => {
    const root = join(import.meta.dirname, "../..");
    const configDir = makeTempDir("ducklm-mcp-config-");
    cpSync(join(root, "config"), configDir, { recursive: true });
    writeFileSync(
      join(configDir, "integrations.json"),
      JSON.stringify({ mcp: { servers: { files: { command: process.execPath, args: [FILESYSTEM_SERVER, workspace] }, gone: { command: join(workspace, "missing-server") } } } }),
    );
    const result = spawnSync(process.execPath, ["--import", import.meta.resolve("tsx"), join(root, "src/cli/main.ts"), "--config", configDir, "--home", makeTempDir(), "--workspace", workspace, "doctor"], { encoding: "utf8", timeout: 60_000 });
    const line = result.stdout.split("\n").find((text) => text.includes("integrations")) ?? "";
    expect(line).toMatch(/^warn/);
    expect(line).toContain("mcp__files__read_text_file");
    expect(line).toContain(`MCP server gone: its command ${join(workspace, "missing-server")} was not found: install it, or fix "command" in integrations.json`);
    expect(line).not.toContain("ENOENT");
  }, 60_000);
});

