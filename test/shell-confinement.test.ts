import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { BUNDLED_CONFIG_DIR } from "../src/config/load-config.js";
import { programPaths, sandboxPathsFor } from "../src/runtime/create-runtime.js";
import { bubblewrapShell, probeBubblewrap, type ShellSandbox } from "../src/tools/shell-sandbox.js";
import { createTestRuntime, makeTempDir } from "./helpers/test-runtime.js";

// .ci/run installs bubblewrap; on a machine without it this test says so instead of passing quietly.
describe("shell commands confined by bubblewrap", () => {
  it("is available here", () => {
    expect(probeBubblewrap().reason).toBe("bubblewrap works");
  });

  it("write inside the workspace and nowhere else, and are killed on timeout", async () => {
    const runtime = createTestRuntime({ runtime: { timeouts: { step_ms: 1_500 }, retry: { max_step_retries: 0 } } });
    try {
      expect(runtime.sandbox.kind).toBe("bwrap");
      const outside = makeTempDir("ducklm-outside-");
      const inside = await runtime.loop.submit({ text: "run `echo kept > inside.txt`", auto_approve: ["unknown"] }).done;
      expect(inside.state).toBe("completed");
      expect(readFileSync(join(runtime.workspace, "inside.txt"), "utf8")).toBe("kept\n");

      const escape = await runtime.loop.submit({ text: `run \`echo escaped > ${outside}/escape.txt\``, auto_approve: ["unknown"] }).done;
      expect(escape.state).toBe("failed");
      expect(escape.error?.message).toMatch(/Read-only file system|exited with/);
      expect(existsSync(join(outside, "escape.txt"))).toBe(false);

      const started = Date.now();
      const slow = await runtime.loop.submit({ text: "run `sleep 30`" }).done;
      expect(slow.state).toBe("failed");
      expect(slow.error?.code).toBe("DUCK_ERR_TOOL_TIMEOUT");
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      await runtime.dispose();
    }
  });
});

/** Runs a command the way shell_exec does and returns what it printed. */
async function runIn(sandbox: ShellSandbox, command: string, workspace: string, network: boolean): Promise<string> {
  const launch = await sandbox.launch(command, { workspace, network });
  return new Promise((resolve) => {
    const child = spawn(launch.file, launch.args, { cwd: workspace, env: { ...process.env, ...launch.env }, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.on("close", () => resolve(output));
  });
}

describe("a folder commands may read but not change (the bundled config of a checkout)", () => {
  it("is there to read and list inside the workspace, and cannot be written, emptied, renamed or replaced", async () => {
    const workspace = makeTempDir("ducklm-ro-ws-");
    const defaults = join(workspace, "pkg", "config");
    mkdirSync(defaults, { recursive: true });
    writeFileSync(join(defaults, "permissions.json"), '{"categories":{}}\n');
    const sandbox = bubblewrapShell({ hiddenPaths: [], readOnlyPaths: [defaults] });
    expect(await runIn(sandbox, "cat pkg/config/permissions.json && ls pkg/config", workspace, false)).toBe('{"categories":{}}\npermissions.json\n');
    for (const attack of ["echo '{}' > pkg/config/permissions.json", "rm -rf pkg/config", "mv pkg/config pkg/old && mkdir pkg/config", "mv pkg elsewhere", "touch pkg/config/extra.json"]) {
      await runIn(sandbox, attack, workspace, false);
      expect(readFileSync(join(defaults, "permissions.json"), "utf8"), attack).toBe('{"categories":{}}\n');
      expect(readdirSync(defaults), attack).toEqual(["permissions.json"]);
    }
    // What the runtime gives the sandbox: the bundled config read-only, the user's own folders hidden;
    // a config folder that is the bundled one (`--config config` in a checkout) is the user's, hidden.
    const home = makeTempDir("ducklm-ro-home-");
    const own = makeTempDir("ducklm-ro-config-");
    const paths = sandboxPathsFor(home, own);
    expect(paths.readOnlyPaths).toEqual(programPaths());
    expect(paths.readOnlyPaths).toContain(BUNDLED_CONFIG_DIR);
    expect(paths.hiddenPaths).toEqual(expect.arrayContaining([home, own]));
    expect(paths.hiddenPaths).not.toContain(BUNDLED_CONFIG_DIR);
    expect(sandboxPathsFor(home, BUNDLED_CONFIG_DIR)).toMatchObject({ readOnlyPaths: programPaths().filter((path) => path !== BUNDLED_CONFIG_DIR), hiddenPaths: expect.arrayContaining([BUNDLED_CONFIG_DIR]) });
    // The rest of the workspace stays writable.
    await runIn(sandbox, "echo kept > pkg/notes.txt", workspace, false);
    expect(readFileSync(join(workspace, "pkg", "notes.txt"), "utf8")).toBe("kept\n");
  });
});

describe("the network of a confined command", () => {
  it("is none at all, unless given; given, it goes through the proxy, which decides where it may go", async () => {
    const site = createServer((_request, response) => response.end("hello from the site"));
    await new Promise<void>((resolve) => site.listen(0, "127.0.0.1", () => resolve()));
    const port = (site.address() as { port: number }).port;
    const workspace = makeTempDir("ducklm-net-ws-");
    const fetchSite = `node -e "require('http').get({ host: '127.0.0.1', port: 3128, path: 'http://127.0.0.1:${port}/' }, (r) => r.on('data', (d) => console.log(r.statusCode, String(d)))).on('error', (e) => console.log('ERR', e.code))"`;
    // Here the test stands in for the internet: loopback plays a public site.
    const open = bubblewrapShell({ hiddenPaths: [], allowAddress: () => true });
    const strict = bubblewrapShell({ hiddenPaths: [] });
    try {
      expect(await runIn(open, fetchSite, workspace, false)).toMatch(/ERR (ECONNREFUSED|ENETUNREACH)/);
      expect(await runIn(open, fetchSite, workspace, true)).toContain("200 hello from the site");
      expect(await runIn(open, "echo $HTTPS_PROXY", workspace, true)).toContain("http://127.0.0.1:3128");
      // The real rule: this machine is never reachable.
      expect(await runIn(strict, fetchSite, workspace, true)).toMatch(/403 127\.0\.0\.1 is this machine/);
    } finally {
      await open.dispose();
      await strict.dispose();
      site.close();
    }
  });
});
