import { chmodSync, mkdirSync, readFileSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openSudoRelay, type SudoRelay } from "../src/permissions/sudo-relay.js";
import { makeTempDir } from "./helpers/test-runtime.js";

// A sudo that runs what it is given where it was started: enough to see the relay's choice of folder.
const PLAIN_SUDO = `#!/bin/sh
[ "$1" = "-A" ] || exit 9
shift
exec "$@"
`;

const originalPath = process.env.PATH;
let relay: SudoRelay | undefined;
afterEach(() => {
  relay?.dispose();
  relay = undefined;
  process.env.PATH = originalPath;
});

function openWithPlainSudo(workspace: string, allowed: string[][]): { relay: SudoRelay; token: string } {
  const bin = makeTempDir("ducklm-plain-sudo-");
  writeFileSync(join(bin, "sudo"), PLAIN_SUDO);
  chmodSync(join(bin, "sudo"), 0o755);
  process.env.PATH = `${bin}:${originalPath}`;
  const opened = openSudoRelay({ password: "pw", allowed, workspace, env: { PATH: process.env.PATH } });
  // What a task that read the shim would know: the token is in it.
  const token = /token: "([0-9a-f]+)"/.exec(readFileSync(join(opened.folder, "shim.cjs"), "utf8"))?.[1] ?? "";
  return { relay: opened, token };
}

/** Sends `request` as the shim would and collects what comes back; `raw` is sent as it is. */
function ask(socketPath: string, raw: string): Promise<{ out: string; code: number | null; closedEarly: boolean }> {
  return new Promise((resolve) => {
    const socket = connect(socketPath);
    let buffer = "";
    let out = "";
    let code: number | null = null;
    socket.on("connect", () => socket.write(raw));
    socket.on("data", (chunk) => {
      buffer += chunk.toString("utf8");
      let newline;
      while ((newline = buffer.indexOf("\n")) !== -1) {
        const message = JSON.parse(buffer.slice(0, newline)) as { type: string; data?: string; code?: number };
        buffer = buffer.slice(newline + 1);
        if (message.type === "out" || message.type === "err") out += Buffer.from(message.data ?? "", "base64").toString("utf8");
        if (message.type === "exit") code = message.code ?? null;
      }
    });
    socket.on("error", () => undefined);
    socket.on("close", () => resolve({ out, code, closedEarly: code === null }));
  });
}

describe("the sudo relay, asked by a task that read its shim", () => {
  it("runs sudo in the workspace, not where a link in the workspace leads", async () => {
    const workspace = makeTempDir("ducklm-relay-ws-");
    const outside = makeTempDir("ducklm-relay-outside-");
    symlinkSync(outside, join(workspace, "elsewhere"));
    mkdirSync(join(workspace, "sub"));
    const opened = openWithPlainSudo(workspace, [["pwd"], ["pwd"]]);
    relay = opened.relay;
    const throughLink = await ask(relay.socketPath, `${JSON.stringify({ token: opened.token, argv: ["pwd"], cwd: join(workspace, "elsewhere") })}\n`);
    expect(throughLink.code).toBe(0);
    expect(throughLink.out.trim()).toBe(realpathSync(workspace));
    // A real folder inside the workspace is honoured.
    const inSub = await ask(relay.socketPath, `${JSON.stringify({ token: opened.token, argv: ["pwd"], cwd: join(workspace, "sub") })}\n`);
    expect(inSub.out.trim()).toBe(realpathSync(join(workspace, "sub")));
  });

  it("drops a request line that never ends, and still answers the next one", async () => {
    const workspace = makeTempDir("ducklm-relay-ws-");
    const opened = openWithPlainSudo(workspace, [["true"]]);
    relay = opened.relay;
    const endless = await ask(relay.socketPath, "x".repeat(200 * 1024));
    expect(endless.closedEarly).toBe(true);
    const proper = await ask(relay.socketPath, `${JSON.stringify({ token: opened.token, argv: ["true"], cwd: workspace })}\n`);
    expect(proper.code).toBe(0);
  });

  it("refuses a wrong token without running anything", async () => {
    const workspace = makeTempDir("ducklm-relay-ws-");
    const opened = openWithPlainSudo(workspace, [["touch", join(workspace, "ran")]]);
    relay = opened.relay;
    const wrong = await ask(relay.socketPath, `${JSON.stringify({ token: "0".repeat(64), argv: ["touch", join(workspace, "ran")], cwd: workspace })}\n`);
    expect(wrong.closedEarly).toBe(true);
    expect(() => readFileSync(join(workspace, "ran"))).toThrow();
  });
});
