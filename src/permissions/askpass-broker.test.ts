import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { openAskpassSession } from "./askpass-broker.js";

const run = promisify(execFile);

describe("the askpass helper", () => {
  it("hands the password out as many times as sudo may ask, then never again", async () => {
    const session = openAskpassSession("pw-for-one-sudo", 1);
    try {
      expect((await run(session.helper)).stdout).toBe("pw-for-one-sudo\n");
      await expect(run(session.helper)).rejects.toThrow();
    } finally {
      session.dispose();
    }
  });
});
