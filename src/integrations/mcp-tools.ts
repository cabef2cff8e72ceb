import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { Logger } from "pino";
import { z } from "zod";
import type { IntegrationsConfig, McpServerConfig } from "../config/config-schemas.js";
import { expandEnv } from "../config/expand-env.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import type { AnyToolDefinition, ToolOutput } from "../tools/tool-definition.js";

/** The name an MCP tool is registered under: unique across servers and apart from the built-ins. */
export function mcpToolName(server: string, tool: string): string {
  return `mcp__${server}__${tool.replace(/[^A-Za-z0-9_-]/g, "_")}`;
}

function expandAll(values: Record<string, string>, env: NodeJS.ProcessEnv, where: string): Record<string, string> {
  return Object.fromEntries(Object.entries(values).map(([key, value]) => [key, expandEnv(value, env, `${where}.${key}`)]));
}

interface McpContent {
  type: string;
  text?: string;
  mimeType?: string;
  data?: string;
  uri?: string;
  name?: string;
  resource?: { uri: string; text?: string; mimeType?: string };
}

/** An MCP tool result as text for people and models; images and binary resources are described, not inlined. */
export function mcpResultText(content: readonly McpContent[], structured: unknown): string {
  const parts = content.map((item) => {
    switch (item.type) {
      case "text":
        return item.text ?? "";
      case "image":
      case "audio":
        return `[${item.type} ${item.mimeType ?? ""}, ${Math.floor(((item.data ?? "").length * 3) / 4)} bytes]`;
      case "resource":
        return item.resource?.text ?? `[resource ${item.resource?.uri ?? ""}]`;
      case "resource_link":
        return `[link ${item.name ?? ""} ${item.uri ?? ""}]`;
      default:
        return `[${item.type}]`;
    }
  });
  if (parts.length === 0 && structured !== undefined) parts.push(JSON.stringify(structured, null, 2));
  return parts.join("\n");
}

/**
 * One configured server: its client, connected on demand. When the server goes away (a stdio server
 * that crashed, an HTTP server that restarted), the next call connects again instead of failing
 * forever. A call that was in flight when it went away is not repeated: it may have had its effect.
 */
export class McpSession {
  client: Client | null = null;
  private connecting: Promise<Client> | null = null;

  constructor(
    readonly name: string,
    private readonly server: McpServerConfig,
    private readonly options: { workspace: string; home: string; env: NodeJS.ProcessEnv; connectTimeoutMs: number; logger: Logger },
  ) {}

  /** The connected client, connecting (again) first when there is none. */
  connected(): Promise<Client> {
    if (this.client) return Promise.resolve(this.client);
    this.connecting ??= this.connect().finally(() => (this.connecting = null));
    return this.connecting;
  }

  /** The process id of a stdio server (tests stop it to check reconnection). */
  get pid(): number | null {
    const transport = this.client?.transport;
    return transport instanceof StdioClientTransport ? transport.pid : null;
  }

  async close(): Promise<void> {
    const client = this.client;
    this.client = null;
    await client?.close().catch(() => undefined);
  }

  private async connect(): Promise<Client> {
    const client = new Client({ name: "ducklm", version: "0.1.0" });
    try {
      const transport = transportFor(this.name, this.server, this.options.home, this.options.env, this.options.logger);
      await withTimeout(client.connect(transport), this.options.connectTimeoutMs, `connecting to MCP server ${this.name}`);
    } catch (error) {
      await client.close().catch(() => undefined);
      throw error;
    }
    client.onclose = () => {
      if (this.client === client) {
        this.client = null;
        this.options.logger.warn({ server: this.name }, "MCP server connection closed; the next call reconnects");
      }
    };
    this.client = client;
    return client;
  }
}

export interface McpConnection {
  server: string;
  session: McpSession;
  tools: AnyToolDefinition[];
}

export interface McpConnectResult {
  tools: AnyToolDefinition[];
  connections: McpConnection[];
  /** Servers that could not be reached or listed, with the reason; their tools are absent. */
  failures: Array<{ server: string; reason: string }>;
  close(): Promise<void>;
}

/**
 * A stdio server starts in DuckLM's home unless told otherwise: in the workspace, `npx` or a relative
 * program name would find what a task put there and run it unconfined.
 */
function transportFor(name: string, server: McpServerConfig, home: string, env: NodeJS.ProcessEnv, logger: Logger): Transport {
  if (server.command !== undefined) {
    const transport = new StdioClientTransport({
      command: server.command,
      args: server.args,
      // Only what a program needs to start, plus what the user configured: DuckLM's own environment
      // (keys for other services) is not handed to every server.
      env: { ...getDefaultEnvironment(), ...expandAll(server.env, env, `mcp.servers.${name}.env`) },
      cwd: server.cwd ?? home,
      stderr: "pipe",
    });
    // Read, or a chatty server would block once the pipe is full; kept in the log for diagnosis.
    transport.stderr?.on("data", (chunk: Buffer) => logger.debug({ server: name, stderr: String(chunk).slice(0, 2000) }, "MCP server stderr"));
    return transport;
  }
  return new StreamableHTTPClientTransport(new URL(server.url!), {
    requestInit: { headers: expandAll(server.headers, env, `mcp.servers.${name}.headers`) },
  });
}

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new DuckError(ErrorCode.ToolTimeout, `${what} took longer than ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function toolsOf(session: McpSession, server: McpServerConfig, listed: Array<{ name: string; description?: string; inputSchema: unknown }>): AnyToolDefinition[] {
  const name = session.name;
  return listed
    .filter((tool) => !server.exclude.includes(tool.name))
    .map((tool) => {
      const category = server.tools[tool.name] ?? server.permission;
      const definition: AnyToolDefinition = {
        name: mcpToolName(name, tool.name),
        description: `[MCP ${name}] ${tool.description ?? tool.name}`.slice(0, 1000),
        // The server validates its own input; the registry only insists on an object.
        inputSchema: z.record(z.string(), z.unknown()),
        jsonSchema: tool.inputSchema,
        // Only a server (or tool) the user marked read-only may be re-run after a crash.
        effect: category === "read_only" ? "read-only" : "side-effecting",
        permission: category,
        // A server over HTTP receives every call's arguments: where they go is the host policy's to say.
        ...(server.url ? { outbound: () => [server.url!] } : {}),
        async execute(input: Record<string, unknown>, context): Promise<ToolOutput> {
          const client = await session.connected();
          const result = await client.callTool({ name: tool.name, arguments: input }, undefined, {
            signal: context.signal,
            timeout: server.call_timeout_ms ?? context.timeoutMs,
          });
          const content = (result.content ?? []) as McpContent[];
          const full = mcpResultText(content, result.structuredContent);
          // Bounded like shell output: a server may answer with a whole file or database dump.
          const truncated = full.length > context.outputCapBytes;
          const output = truncated ? `${full.slice(0, context.outputCapBytes)}\n[cut at ${context.outputCapBytes} characters of ${full.length}]` : full;
          const structured = result.structuredContent !== undefined && !truncated ? { data: { structured: result.structuredContent } } : {};
          if (result.isError) return { ok: false, output, truncated, error: { code: ErrorCode.ToolFailed, message: `${name}/${tool.name}: ${output.slice(0, 500)}` }, ...structured };
          return { ok: true, output, truncated, ...structured };
        },
      };
      return definition;
    });
}

/**
 * Connects to every enabled MCP server in integrations.json and lists its tools. A server that fails
 * is reported and left out; the others still work.
 */
export async function connectMcpServers(config: IntegrationsConfig["mcp"], options: { workspace: string; home: string; logger: Logger; env?: NodeJS.ProcessEnv }): Promise<McpConnectResult> {
  const env = options.env ?? process.env;
  const connections: McpConnection[] = [];
  const failures: Array<{ server: string; reason: string }> = [];
  const entries = Object.entries(config.servers).filter(([, server]) => server.enabled);
  await Promise.all(
    entries.map(async ([name, server]) => {
      const session = new McpSession(name, server, { workspace: options.workspace, home: options.home, env, connectTimeoutMs: config.connect_timeout_ms, logger: options.logger });
      try {
        const client = await session.connected();
        const listed: Array<{ name: string; description?: string; inputSchema: unknown }> = [];
        let cursor: string | undefined;
        do {
          const page = await withTimeout(client.listTools(cursor ? { cursor } : undefined), config.connect_timeout_ms, `listing the tools of MCP server ${name}`);
          listed.push(...page.tools);
          cursor = page.nextCursor;
        } while (cursor);
        connections.push({ server: name, session, tools: toolsOf(session, server, listed) });
        options.logger.info({ server: name, tools: listed.length }, "MCP server connected");
      } catch (error) {
        await session.close();
        const code = (error as NodeJS.ErrnoException).code;
        const command = "command" in server ? String(server.command) : null;
        const reason =
          code === "ENOENT" && command
            ? `its command ${command} was not found: install it, or fix "command" in integrations.json`
            : code === "EACCES" && command
              ? `its command ${command} cannot be run (permission denied)`
              : error instanceof Error
                ? error.message
                : String(error);
        failures.push({ server: name, reason });
        options.logger.warn({ server: name, err: error }, "MCP server unavailable; its tools are left out");
      }
    }),
  );
  connections.sort((a, b) => a.server.localeCompare(b.server));
  return {
    tools: connections.flatMap((connection) => connection.tools),
    connections,
    failures,
    async close() {
      await Promise.all(connections.map((connection) => connection.session.close()));
    },
  };
}
