import { tmpdir } from "node:os";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import pino from "pino";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IntegrationsConfigSchema } from "../../src/config/config-schemas.js";
import type { ExecutionDirective } from "../../src/contracts/index.js";
import { connectMcpServers, type McpConnectResult } from "../../src/integrations/mcp-tools.js";
import { launchChromium } from "../helpers/browser.js";
import { makeTempDir } from "../helpers/test-runtime.js";
import { startTestServer, type TestServer } from "../helpers/test-server.js";
import { scriptedAgent } from "../helpers/scripted-agent.js";

/* eslint-disable @typescript-eslint/no-explicit-any */
declare const document: any;
/* eslint-enable @typescript-eslint/no-explicit-any */

const require = createRequire(import.meta.url);
const FILESYSTEM_SERVER = join(dirname(require.resolve("@modelcontextprotocol/server-filesystem/package.json")), "dist/index.js");

let workspace: string;
let mcp: McpConnectResult;
let server: TestServer;
let browser: Browser;
let directive: ExecutionDirective;

beforeAll(async () => {
  workspace = makeTempDir("ducklm-browser-mcp-");
  mcp = await connectMcpServers(IntegrationsConfigSchema.parse({ mcp: { servers: { files: { command: process.execPath, args: [FILESYSTEM_SERVER, workspace] } } } }).mcp, { workspace, home: tmpdir(), logger: pino({ level: "silent" }) });
  const models = scriptedAgent({ directive: () => directive, draft: "use the MCP tool", verdict: () => "pass" });
  server = await startTestServer({ models, tools: mcp.tools, workspace });
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await mcp?.close();
});

describe("an MCP tool in the web chat", () => {
  it("waits for permission in the same dialog as any tool, then shows the server's answer", async () => {
    const target = join(workspace, "from-the-browser.txt");
    directive = { kind: "tool", tool: "mcp__files__write_file", arguments: { path: target, content: "written over MCP" }, reason: "" };
    const page = await browser.newPage();
    await page.goto(server.loginUrl());
    await page.fill("#input", "write a file through MCP");
    await page.keyboard.press("Enter");
    await page.waitForSelector("#permission-dialog[open]");
    expect(await page.textContent("#permission-category")).toBe("no rule in permissions.json covers it");
    expect(await page.textContent("#permission-commands")).toContain("mcp__files__write_file");
    // All of the arguments, and what "always" would cover for a tool.
    expect(await page.textContent("#permission-commands")).toContain('"content": "written over MCP"');
    expect(await page.textContent("#permission-always-covers")).toBe("every later call of the tool mcp__files__write_file in this folder, whatever its arguments");
    expect(() => readFileSync(target)).toThrow();
    await page.click("#permission-allow");
    await page.waitForFunction(() => /Successfully wrote/i.test(document.querySelector(".tool pre")?.textContent ?? ""));
    expect(readFileSync(target, "utf8")).toBe("written over MCP");
    await page.close();
  });
});
