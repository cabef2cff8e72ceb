import { randomBytes, timingSafeEqual } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface AskpassSession {
  /** The helper sudo runs (SUDO_ASKPASS): given to the sudo process alone. */
  helper: string;
  /** The private folder holding the socket and the helper. */
  folder: string;
  /** Closes the socket, removes the helper folder and drops the password. */
  dispose(): void;
}

/**
 * Hands a sudo password to sudo without putting it in argv, an environment, a file, an event or a log:
 * sudo runs the askpass helper, which connects to a unix socket in a private 0700 folder, proves
 * itself with a one-time token and receives the password once. The folder is never visible to a
 * confined command, and only the sudo process itself is told where the helper is.
 */
export function openAskpassSession(password: string, allowedUses = 1): AskpassSession {
  const dir = mkdtempSync(join(tmpdir(), "ducklm-askpass-"));
  chmodSync(dir, 0o700);
  const socketPath = join(dir, "socket");
  const token = randomBytes(32).toString("hex");
  let secret: Buffer | null = Buffer.from(password, "utf8");
  let uses = Math.max(1, allowedUses);
  const client = join(dir, "askpass-client.cjs");
  writeFileSync(
    client,
    `const net = require("node:net");
const socket = net.connect(${JSON.stringify(socketPath)});
let answer = "";
socket.on("connect", () => socket.write(${JSON.stringify(token)} + "\\n"));
socket.on("data", (chunk) => (answer += chunk));
socket.on("end", () => { if (!answer) process.exit(1); process.stdout.write(answer + "\\n"); });
socket.on("error", () => process.exit(1));
`,
    { mode: 0o600 },
  );
  const helper = join(dir, "askpass");
  writeFileSync(helper, `#!/bin/sh\nexec "${process.execPath}" "${client}"\n`, { mode: 0o700 });

  const server: Server = createServer((socket) => {
    let received = "";
    socket.setTimeout(10_000, () => socket.destroy());
    socket.on("data", (chunk) => {
      received += chunk.toString("utf8");
      if (!received.includes("\n")) return;
      const offered = Buffer.from(received.trim(), "utf8");
      const expected = Buffer.from(token, "utf8");
      if (secret && uses > 0 && offered.length === expected.length && timingSafeEqual(offered, expected)) {
        // Each approved sudo may ask once: whoever comes with the token after that gets nothing.
        uses -= 1;
        const copy = Buffer.from(secret);
        socket.end(copy, () => copy.fill(0));
        if (uses === 0) {
          secret.fill(0);
          secret = null;
        }
      } else socket.destroy();
    });
    socket.on("error", () => undefined);
  });
  server.listen(socketPath);
  server.unref();
  return {
    helper,
    folder: dir,
    dispose() {
      if (secret) secret.fill(0);
      secret = null;
      server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
