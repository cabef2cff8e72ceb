import { randomBytes, timingSafeEqual } from "node:crypto";
import { accessSync, chmodSync, constants, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";

// The helper sudo runs (SUDO_ASKPASS): it proves itself with the token and prints what the broker sends.
const CLIENT_SOURCE = `
const net = require("node:net");
const socket = net.connect(process.env.DUCKLM_ASKPASS_SOCKET);
let answer = "";
socket.on("connect", () => socket.write(process.env.DUCKLM_ASKPASS_TOKEN + "\\n"));
socket.on("data", (chunk) => (answer += chunk));
socket.on("end", () => { if (!answer) process.exit(1); process.stdout.write(answer + "\\n"); });
socket.on("error", () => process.exit(1));
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

export interface AskpassSession {
  /** Environment to add to the command: a `sudo` that asks through the helper, and how to reach us. */
  env: Record<string, string>;
  /** The private folder holding the socket and the helper. */
  folder: string;
  /** Closes the socket, removes the helper folder and drops the password. */
  dispose(): void;
}

/**
 * Hands a sudo password to one command without putting it in argv, the environment, a file, an event
 * or a log: a `sudo` shim runs the real sudo with `-A`; sudo runs the askpass helper, which connects to
 * a unix socket in a private 0700 folder, proves itself with a one-time token, and receives the
 * password once.
 */
export function openAskpassSession(password: string): AskpassSession {
  const dir = mkdtempSync(join(tmpdir(), "ducklm-askpass-"));
  chmodSync(dir, 0o700);
  const socketPath = join(dir, "socket");
  const token = randomBytes(32).toString("hex");
  let secret: Buffer | null = Buffer.from(password, "utf8");
  const client = join(dir, "askpass-client.cjs");
  writeFileSync(client, CLIENT_SOURCE, { mode: 0o600 });
  const helper = join(dir, "askpass");
  writeFileSync(helper, `#!/bin/sh\nexec "${process.execPath}" "${client}"\n`, { mode: 0o700 });
  const shims = join(dir, "bin");
  const realSudo = findProgram("sudo", shims);
  mkdirSync(shims, { mode: 0o700 });
  writeFileSync(join(shims, "sudo"), `#!/bin/sh\nexec "${realSudo ?? "sudo-not-installed"}" -A "$@"\n`, { mode: 0o700 });

  const server: Server = createServer((socket) => {
    let received = "";
    socket.setTimeout(10_000, () => socket.destroy());
    socket.on("data", (chunk) => {
      received += chunk.toString("utf8");
      if (!received.includes("\n")) return;
      const offered = Buffer.from(received.trim(), "utf8");
      const expected = Buffer.from(token, "utf8");
      if (secret && offered.length === expected.length && timingSafeEqual(offered, expected)) socket.end(secret);
      else socket.destroy();
    });
    socket.on("error", () => undefined);
  });
  server.listen(socketPath);
  server.unref();
  return {
    env: {
      PATH: `${shims}${delimiter}${process.env.PATH ?? ""}`,
      SUDO_ASKPASS: helper,
      DUCKLM_ASKPASS_SOCKET: socketPath,
      DUCKLM_ASKPASS_TOKEN: token,
    },
    folder: dir,
    dispose() {
      if (secret) secret.fill(0);
      secret = null;
      server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
