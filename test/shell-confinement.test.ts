import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { probeBubblewrap } from "../src/tools/shell-sandbox.js";
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
