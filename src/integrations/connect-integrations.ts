import type { Logger } from "pino";
import type { IntegrationsConfig } from "../config/config-schemas.js";
import type { AnyToolDefinition } from "../tools/tool-definition.js";
import { createWebTools } from "./web-tools.js";

export interface Integrations {
  tools: AnyToolDefinition[];
  /** What could not be set up (an MCP server that is down), said once at start. */
  failures: Array<{ what: string; reason: string }>;
  close(): Promise<void>;
}

/** The tools integrations.json adds: web_fetch, web_search, and every MCP server's. */
export async function connectIntegrations(config: IntegrationsConfig, options: { workspace: string; home: string; logger: Logger; env?: NodeJS.ProcessEnv }): Promise<Integrations> {
  // The MCP SDK (and its JSON-schema validator) loads only when a server is configured.
  const mcp = Object.values(config.mcp.servers).some((server) => server.enabled)
    ? await (await import("./mcp-tools.js")).connectMcpServers(config.mcp, options)
    : { tools: [], failures: [], close: async () => undefined };
  return {
    tools: [...createWebTools(config.web), ...mcp.tools],
    failures: mcp.failures.map((failure) => ({ what: `MCP server ${failure.server}`, reason: failure.reason })),
    close: () => mcp.close(),
  };
}
