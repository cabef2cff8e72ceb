import { spawn } from "node:child_process";
import { setTimeout as delay } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { isProcessAlive } from "./process-alive.js";

describe("isProcessAlive", () => {
  it("knows this process, and no process group or impossible PID", () => {
    expect(isProcessAlive(process.pid)).toBe(true);
    for (const pid of [0, -1, 1.5, Number.NaN]) expect(isProcessAlive(pid)).toBe(false);
  });

  it.skipIf(process.platform !== "linux")("takes a process that exited but was never reaped (a zombie) for dead", async () => {
    // The background sleep's parent becomes `sleep 30`, which never waits for it: it stays a zombie.
    const parent = spawn("sh", ["-c", "sleep 1 & echo $!; exec sleep 30"], { stdio: ["ignore", "pipe", "ignore"] });
    try {
      const pid = Number(await new Promise<string>((resolve) => parent.stdout.once("data", (chunk: Buffer) => resolve(chunk.toString().trim()))));
      expect(isProcessAlive(pid)).toBe(true);
      let alive = true;
      for (let tries = 0; tries < 100 && alive; tries += 1) {
        await delay(50);
        alive = isProcessAlive(pid);
      }
      expect(alive).toBe(false);
      // Still there for signals: the check that alone was used before would call it alive.
      expect(() => process.kill(pid, 0)).not.toThrow();
    } finally {
      parent.kill("SIGKILL");
    }
  });
});
