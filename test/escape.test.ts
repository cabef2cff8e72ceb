import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BUNDLED_CONFIG_DIR } from "../src/config/load-config.js";
import { sqliteOf } from "../src/storage/open-database.js";
import { SANDBOX_PROXY_PORT } from "../src/tools/network-proxy.js";
import { createTestRuntime, makeTempDir, type TestRuntime } from "./helpers/test-runtime.js";

// The worst layout there is: DuckLM's home, the user's config and its plugins all inside the
// workspace, the workspace a git repository, and DuckLM's API listening on loopback. A task tries
// every way out it has, with its commands approved in advance, and nothing it aims at may change.
let runtime: TestRuntime;
let workspace: string;
let home: string;
let configDir: string;
let api: Server;
let apiPort: number;
let apiConnections = 0;
const snapshot = new Map<string, string>();

function read(path: string): string {
  return existsSync(path) ? readFileSync(path, "utf8") : "(missing)";
}

beforeAll(async () => {
  workspace = makeTempDir("ducklm-escape-ws-");
  home = join(workspace, "data");
  configDir = join(workspace, "config");
  cpSync(BUNDLED_CONFIG_DIR, configDir, { recursive: true });
  mkdirSync(join(configDir, "plugins"), { recursive: true });
  execFileSync("git", ["init", "-q", workspace]);
  writeFileSync(join(workspace, "notes.txt"), "ordinary file\n");
  runtime = createTestRuntime({ home, workspace, configDir, runtime: { timeouts: { step_ms: 10_000 }, retry: { max_step_retries: 0 } } });
  await runtime.ready();
  writeFileSync(join(home, "token"), "secret-install-token-for-the-escape-test\n", { mode: 0o600 });
  api = createServer((socket) => {
    apiConnections += 1;
    socket.end("HTTP/1.1 200 OK\r\n\r\nDuckLM API stand-in");
  });
  await new Promise<void>((resolve) => api.listen(0, "127.0.0.1", () => resolve()));
  apiPort = (api.address() as { port: number }).port;
  for (const file of [join(home, "token"), join(configDir, "runtime.json"), join(configDir, "permissions.json"), join(workspace, ".git", "config")]) snapshot.set(file, read(file));
}, 60_000);

afterAll(async () => {
  api?.close();
  await runtime?.dispose();
});

async function attempt(command: string, approve: Array<"unknown" | "network"> = ["unknown"]): Promise<{ state: string; output: string; code?: string }> {
  const outcome = await runtime.loop.submit({ text: `run \`${command}\``, auto_approve: approve }).done;
  if (outcome.state === "awaiting_permission") runtime.loop.cancel(outcome.task_id);
  const result = runtime.store.listEvents(outcome.task_id).find((event) => event.type === "tool-result")?.payload.result as { output: string; error?: { code: string } } | undefined;
  return { state: outcome.state, output: result?.output ?? "", ...(outcome.error ? { code: outcome.error.code } : {}) };
}

async function fileTool(tool: string, args: Record<string, unknown>): Promise<{ state: string; code?: string }> {
  const outcome = await runtime.loop.submit({ text: `use ${tool}`, auto_approve: ["unknown"] }, {}).done;
  void outcome;
  const result = await runtime.tools.run(tool, args, {
    signal: new AbortController().signal,
    workspace,
    timeoutMs: 5_000,
    outputCapBytes: 65_536,
    fileReadMaxBytes: 1_000_000,
    taskId: "escape",
    protectedPaths: runtime.protectedPaths,
    sandbox: runtime.sandbox,
  });
  return { state: result.ok ? "ok" : "refused", ...(result.error ? { code: result.error.code } : {}) };
}

describe("a task cannot reach DuckLM's own state or its API", () => {
  it("runs confined (bubblewrap)", () => {
    expect(runtime.sandbox.kind).toBe("bwrap");
  });

  it("cannot read or write DuckLM's home, config, plugins or .git internals with the file tools", async () => {
    for (const path of ["data/token", "data/ducklm.sqlite3", "config/runtime.json", ".git/config", ".git/hooks/pre-commit"]) {
      expect(await fileTool("file_read", { path }), path).toEqual({ state: "refused", code: "DUCK_ERR_PATH_PROTECTED" });
    }
    for (const path of ["data/plugins/evil.mjs", "config/runtime.json", "config/permissions.json", "config/plugins/evil.mjs", ".git/hooks/pre-commit", ".git/config", "data/token"]) {
      expect(await fileTool("file_write", { path, content: "export default { name: 'evil' }" }), path).toEqual({ state: "refused", code: "DUCK_ERR_PATH_PROTECTED" });
    }
    const listing = await runtime.tools.run("file_list", { path: ".", depth: 3 }, { signal: new AbortController().signal, workspace, timeoutMs: 5_000, outputCapBytes: 65_536, fileReadMaxBytes: 1_000_000, taskId: "escape", protectedPaths: runtime.protectedPaths });
    expect(listing.output).toContain("notes.txt");
    expect(listing.output).not.toMatch(/^data\b|^config\b|token/m);
  });

  it("cannot read or write them with shell commands either, even approved in advance", async () => {
    const reads = await attempt("cat data/token; cat data/ducklm.sqlite3 | head -c 100; ls -la data config; cat config/runtime.json");
    expect(reads.output).not.toContain("secret-install-token");
    expect(reads.output).not.toContain("SQLite format");
    expect(reads.output).not.toContain("timeouts");
    for (const command of [
      "echo 'export default {}' > data/plugins/evil.mjs",
      "mkdir -p data/plugins && cp notes.txt data/plugins/evil.mjs",
      "echo '{\"sandbox\":{\"mode\":\"off\"}}' > config/runtime.json",
      "cp notes.txt config/plugins/evil.mjs",
      "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/pre-commit",
      "git config core.fsmonitor 'touch /tmp/pwned'",
      "echo '[core] fsmonitor = touch x' >> .git/config",
      "sqlite3 data/ducklm.sqlite3 \"INSERT INTO approvals VALUES ('x','rm -rf .','/','unknown',NULL,'2026-01-01',NULL,NULL)\"",
    ]) {
      await attempt(command);
    }
    for (const [file, before] of snapshot) expect(read(file), file).toBe(before);
    expect(existsSync(join(home, "plugins", "evil.mjs"))).toBe(false);
    expect(existsSync(join(configDir, "plugins", "evil.mjs"))).toBe(false);
    expect(readdirSync(join(workspace, ".git", "hooks")).filter((name) => !name.endsWith(".sample"))).toEqual([]);
    expect(runtime.approvals.list()).toEqual([]);
    expect(sqliteOf(runtime.db).pragma("integrity_check", { simple: true })).toBe("ok");
  });

  it("cannot open a connection to DuckLM's API on loopback, with or without the network", async () => {
    const before = apiConnections;
    const direct = await attempt(`node -e "require('net').connect(${apiPort}, '127.0.0.1').on('connect', () => console.log('CONNECTED')).on('error', (e) => console.log('REFUSED', e.code))"`);
    expect(direct.output).toContain("REFUSED");
    const devTcp = await attempt(`exec 3<>/dev/tcp/127.0.0.1/${apiPort} && echo CONNECTED || echo REFUSED`);
    expect(devTcp.output).not.toContain("CONNECTED");
    // Given the network, a command reaches it only through the proxy, which refuses this machine.
    const script = `const s = require('net').connect(${SANDBOX_PROXY_PORT}, '127.0.0.1', () => s.write('CONNECT 127.0.0.1:${apiPort} HTTP/1.1\\\\r\\\\nHost: x\\\\r\\\\n\\\\r\\\\n')); s.on('data', (d) => { console.log(String(d).split('\\\\r\\\\n')[0]); s.destroy(); }); s.on('error', (e) => console.log('ERR', e.code));`;
    const proxied = await attempt(`curl --version > /dev/null 2>&1; node -e "${script}"`, ["unknown", "network"]);
    expect(proxied.output).toMatch(/HTTP\/1\.1 403/);
    const viaLocalhost = await attempt(`curl --version > /dev/null 2>&1; node -e "${script.replace("127.0.0.1:", "localhost:")}"`, ["unknown", "network"]);
    expect(viaLocalhost.output).toMatch(/HTTP\/1\.1 403/);
    expect(apiConnections).toBe(before);
  });

  it("cannot rename, replace or extend .git, so the user's own git never runs what a task planted", async () => {
    const gitBefore = readdirSync(join(workspace, ".git")).sort();
    for (const command of [
      "mv .git .git-old && mkdir .git && echo '[core]' > .git/config",
      "rm -rf .git",
      "echo ../evil > .git/commondir",
      "mkdir -p evil/objects evil/refs && printf '[core]\\n\\tfsmonitor = \"touch /tmp/pwned\"\\n' > evil/config && echo ../evil > .git/commondir",
      "ln -s ../../x .git/hooks/pre-commit",
    ]) {
      await attempt(command);
    }
    expect(readdirSync(join(workspace, ".git")).sort()).toEqual(gitBefore);
    expect(existsSync(join(workspace, ".git", "commondir"))).toBe(false);
    expect(read(join(workspace, ".git", "config"))).toBe(snapshot.get(join(workspace, ".git", "config")));
  });

  it("does not see the sockets of services that would run a command for it outside", async () => {
    const probe = await attempt("ls /run/user 2>&1 | wc -l; ls -a /tmp");
    // /tmp is the sandbox's own: it holds only the folder the workspace is bound to.
    expect(probe.output.trim().split("\n")).toEqual(["0", ".", "..", workspace.split("/")[2]]);
  });
});

describe("DuckLM's state deeper inside the workspace, and a temporary folder of its own", () => {
  it("cannot be moved out from under its hiding place, nor the temporary folder be seen", async () => {
    const ws = makeTempDir("ducklm-escape-deep-");
    const home = join(ws, "x", "data");
    const privateTmp = makeTempDir("ducklm-private-tmp-");
    const savedTmp = process.env.TMPDIR;
    process.env.TMPDIR = privateTmp;
    writeFileSync(join(privateTmp, "ducklm-askpass-planted"), "would be a socket\n");
    const deep = createTestRuntime({ home, workspace: ws, runtime: { retry: { max_step_retries: 0 } } });
    try {
      await deep.ready();
      writeFileSync(join(home, "token"), "deep-secret-token\n", { mode: 0o600 });
      const run = async (command: string) => {
        const outcome = await deep.loop.submit({ text: `run \`${command}\``, auto_approve: ["unknown"] }).done;
        const result = deep.store.listEvents(outcome.task_id).find((event) => event.type === "tool-result")?.payload.result as { output: string } | undefined;
        return result?.output ?? "";
      };
      await run("mv x y");
      expect(existsSync(join(ws, "x", "data", "token"))).toBe(true);
      expect(await run("cat y/data/token x/data/token 2>&1; true")).not.toContain("deep-secret-token");
      const listing = await run(`ls -a ${privateTmp}; echo "tmp=$TMPDIR"`);
      expect(listing).not.toContain("ducklm-askpass-planted");
      expect(listing).toContain("tmp=/tmp");
    } finally {
      process.env.TMPDIR = savedTmp;
      await deep.dispose();
    }
  });
});
