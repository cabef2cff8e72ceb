import { spawn } from "node:child_process";
import { randomBytes, timingSafeEqual } from "node:crypto";
import { accessSync, chmodSync, constants, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, isAbsolute, join, relative } from "node:path";
import { openAskpassSession } from "./askpass-broker.js";

// The `sudo` a command finds first on its PATH: it asks DuckLM, outside the sandbox, to run the real
// sudo with the same arguments, and passes on what that prints and its exit status.
// Confined, it reaches the relay through a port of its sandbox's loopback (its supervisor carries it
// out: a confined command cannot open a Unix socket); unconfined, through the socket itself.
const SHIM_SOURCE = (socketPath: string, token: string) => `"use strict";
const net = require("node:net");
const port = Number(process.env.DUCKLM_SUDO_RELAY_PORT);
const socket = port > 0 ? net.connect(port, "127.0.0.1") : net.connect(${JSON.stringify(socketPath)});
let buffer = "";
let code = 1;
socket.on("connect", () => socket.write(JSON.stringify({ token: ${JSON.stringify(token)}, argv: process.argv.slice(2), cwd: process.cwd() }) + "\\n"));
socket.on("data", (chunk) => {
  buffer += chunk.toString("utf8");
  let newline;
  while ((newline = buffer.indexOf("\\n")) !== -1) {
    const message = JSON.parse(buffer.slice(0, newline));
    buffer = buffer.slice(newline + 1);
    if (message.type === "out") process.stdout.write(Buffer.from(message.data, "base64"));
    else if (message.type === "err") process.stderr.write(Buffer.from(message.data, "base64"));
    else if (message.type === "exit") code = message.code;
  }
});
socket.on("close", () => process.exit(code));
socket.on("error", (error) => { process.stderr.write("ducklm sudo relay: " + error.message + "\\n"); process.exit(1); });
`;

function findProgram(name: string, exclude: string): string | null {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (!dir || dir === exclude) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not here.
    }
  }
  return null;
}

/** The longest request line the relay reads. */
const MAX_REQUEST_BYTES = 64 * 1024;

/** The real path of `path` when it lies inside the workspace's real path, else null. */
function realInside(path: string, workspace: string): string | null {
  if (!isAbsolute(path)) return null;
  try {
    const real = realpathSync(path);
    const root = realpathSync(workspace);
    return real === root || !relative(root, real).startsWith("..") ? real : null;
  } catch {
    return null;
  }
}

export interface SudoRelay {
  /** Put first on the command's PATH: the `sudo` found there is the relay's. */
  binDir: string;
  /** The folder to make visible to a confined command (it holds the shim). */
  folder: string;
  /** Where the relay listens; a confined command's sandbox channel carries its `sudo` here. */
  socketPath: string;
  dispose(): void;
}

export interface SudoRelayOptions {
  password: string;
  /** The argument vectors (after `sudo`) the approved command line may run, each as often as it appears. */
  allowed: readonly (readonly string[])[];
  workspace: string;
  /** The environment the real sudo gets (DuckLM's scrubbed one), plus SUDO_ASKPASS. */
  env: NodeJS.ProcessEnv;
}

/**
 * Runs `sudo` for a command line that is otherwise confined. The command line's `sudo` is a shim that
 * asks this relay, over a unix socket, to run the real sudo (outside the sandbox, with `-A` and the
 * askpass helper in sudo's own environment) — but only for the exact argument vectors the approved
 * command line contains. The password never enters the sandbox: nothing in the command line but
 * sudo's own child sees it or the helper that holds it.
 */
export function openSudoRelay(options: SudoRelayOptions): SudoRelay {
  const folder = mkdtempSync(join(tmpdir(), "ducklm-sudo-"));
  chmodSync(folder, 0o700);
  const binDir = join(folder, "bin");
  mkdirSync(binDir, { mode: 0o700 });
  const socketPath = join(folder, "relay.sock");
  const token = randomBytes(32).toString("hex");
  const shim = join(folder, "shim.cjs");
  writeFileSync(shim, SHIM_SOURCE(socketPath, token), { mode: 0o600 });
  writeFileSync(join(binDir, "sudo"), `#!/bin/sh\nexec "${process.execPath}" "${shim}" "$@"\n`, { mode: 0o700 });
  const askpass = openAskpassSession(options.password, Math.max(1, options.allowed.length));
  const realSudo = findProgram("sudo", binDir);
  const remaining = options.allowed.map((argv) => [...argv]);
  const children = new Set<ReturnType<typeof spawn>>();

  const send = (socket: Socket, message: Record<string, unknown>) => {
    if (!socket.destroyed) socket.write(`${JSON.stringify(message)}\n`);
  };
  const server: Server = createServer((socket) => {
    let received = "";
    socket.on("error", () => undefined);
    socket.on("data", (chunk) => {
      if (received.includes("\n")) return;
      received += chunk.toString("utf8");
      // A request is one short line; anything longer is not the shim's.
      if (received.length > MAX_REQUEST_BYTES) {
        socket.destroy();
        return;
      }
      if (!received.includes("\n")) return;
      let request: { token?: unknown; argv?: unknown; cwd?: unknown };
      try {
        request = JSON.parse(received.slice(0, received.indexOf("\n"))) as typeof request;
      } catch {
        socket.destroy();
        return;
      }
      const offered = Buffer.from(String(request.token ?? ""), "utf8");
      const expected = Buffer.from(token, "utf8");
      if (offered.length !== expected.length || !timingSafeEqual(offered, expected)) {
        socket.destroy();
        return;
      }
      const argv = Array.isArray(request.argv) ? request.argv.map(String) : [];
      const index = remaining.findIndex((allowed) => allowed.length === argv.length && allowed.every((word, i) => word === argv[i]));
      if (index === -1 || !realSudo) {
        const why = index === -1 ? `ducklm: sudo ${argv.join(" ")} was not part of the approved command; not run\n` : "ducklm: sudo is not installed\n";
        send(socket, { type: "err", data: Buffer.from(why).toString("base64") });
        send(socket, { type: "exit", code: 1 });
        socket.end();
        return;
      }
      remaining.splice(index, 1);
      const cwdText = typeof request.cwd === "string" ? request.cwd : options.workspace;
      // Where the shim says it runs, as the real path: a link in the workspace may lead anywhere.
      const cwd = realInside(cwdText, options.workspace) ?? options.workspace;
      const child = spawn(realSudo, ["-A", ...argv], { cwd, env: { ...options.env, SUDO_ASKPASS: askpass.helper }, stdio: ["ignore", "pipe", "pipe"] });
      children.add(child);
      child.stdout.on("data", (data: Buffer) => send(socket, { type: "out", data: data.toString("base64") }));
      child.stderr.on("data", (data: Buffer) => send(socket, { type: "err", data: data.toString("base64") }));
      child.on("error", (error) => {
        send(socket, { type: "err", data: Buffer.from(`ducklm: ${error.message}\n`).toString("base64") });
        send(socket, { type: "exit", code: 127 });
        socket.end();
      });
      child.on("close", (code, signal) => {
        children.delete(child);
        send(socket, { type: "exit", code: code ?? (signal ? 128 : 1) });
        socket.end();
      });
      socket.on("close", () => child.kill("SIGTERM"));
    });
  });
  server.listen(socketPath);
  server.unref();
  return {
    binDir,
    folder,
    socketPath,
    dispose() {
      for (const child of children) child.kill("SIGKILL");
      server.close();
      askpass.dispose();
      rmSync(folder, { recursive: true, force: true });
    },
  };
}
