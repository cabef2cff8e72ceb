import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { makeTempDir } from "../../../test/helpers/test-runtime.js";
import type { ToolContext } from "../tool-definition.js";
import { ToolRegistry } from "../tool-registry.js";
import { fileReadTool } from "./file-read.js";
import { fileWriteTool } from "./file-write.js";
import { scrubEnvironment, shellExecTool } from "./shell-exec.js";

let workspace: string;
let registry: ToolRegistry;
beforeEach(() => {
  workspace = makeTempDir("ducklm-tools-");
  registry = new ToolRegistry().register(fileReadTool).register(fileWriteTool).register(shellExecTool);
});
afterEach(() => {
  // Temp dirs are left to the OS; nothing here writes outside them.
});

function context(overrides: Partial<ToolContext> = {}): ToolContext {
  return { signal: new AbortController().signal, workspace, timeoutMs: 5_000, outputCapBytes: 1_000, fileReadMaxBytes: 10_000, taskId: "t", ...overrides };
}

describe("file_read", () => {
  it("returns a line range", async () => {
    writeFileSync(join(workspace, "a.txt"), "one\ntwo\nthree\nfour\n");
    const result = await registry.run("file_read", { path: "a.txt", start_line: 2, end_line: 3 }, context());
    expect(result).toMatchObject({ ok: true, output: "two\nthree" });
  });
  it("says when a file was cut at the size cap", async () => {
    writeFileSync(join(workspace, "big.txt"), "x".repeat(50));
    const result = await registry.run("file_read", { path: "big.txt" }, context({ fileReadMaxBytes: 10 }));
    expect(result.truncated).toBe(true);
    expect(result.output).toMatch(/cut at 10 of 50 bytes/);
  });
  it("refuses binary files, missing files and paths outside the workspace", async () => {
    writeFileSync(join(workspace, "bin"), Buffer.from([0, 1, 2, 3]));
    expect((await registry.run("file_read", { path: "bin" }, context())).error?.message).toMatch(/binary/);
    expect((await registry.run("file_read", { path: "nope.txt" }, context())).error?.code).toBe("DUCK_ERR_FILE_NOT_FOUND");
    expect((await registry.run("file_read", { path: "/etc/passwd" }, context())).error?.code).toBe("DUCK_ERR_PATH_OUTSIDE_WORKSPACE");
    expect((await registry.run("file_read", { path: "../x" }, context())).error?.code).toBe("DUCK_ERR_PATH_OUTSIDE_WORKSPACE");
    expect((await registry.run("file_read", { path: "a\0b" }, context())).error?.code).toBe("DUCK_ERR_PATH_OUTSIDE_WORKSPACE");
  });
  it("refuses a symlink that leads out of the workspace", async () => {
    symlinkSync("/etc", join(workspace, "etc-link"));
    const result = await registry.run("file_read", { path: "etc-link/hostname" }, context());
    expect(result.error?.code).toBe("DUCK_ERR_PATH_OUTSIDE_WORKSPACE");
  });
  it("rejects invalid input with the field named", async () => {
    const result = await registry.run("file_read", { path: 7 }, context());
    expect(result.error?.code).toBe("DUCK_ERR_TOOL_INPUT_INVALID");
    expect(result.error?.message).toMatch(/path/);
  });
});

describe("file_write", () => {
  it("creates, appends and refuses create over an existing file", async () => {
    expect((await registry.run("file_write", { path: "d/n.txt", content: "a" }, context())).ok).toBe(true);
    expect((await registry.run("file_write", { path: "d/n.txt", content: "b", mode: "append" }, context())).ok).toBe(true);
    expect(readFileSync(join(workspace, "d/n.txt"), "utf8")).toBe("ab");
    expect((await registry.run("file_write", { path: "d/n.txt", content: "c", mode: "create" }, context())).ok).toBe(false);
  });
  it("never writes through a link that leads outside", async () => {
    const outside = makeTempDir("ducklm-outside-");
    symlinkSync(outside, join(workspace, "out"));
    symlinkSync(join(outside, "target.txt"), join(workspace, "final-link"));
    expect((await registry.run("file_write", { path: "out/x.txt", content: "no" }, context())).ok).toBe(false);
    expect((await registry.run("file_write", { path: "final-link", content: "no" }, context())).ok).toBe(false);
    expect(existsSync(join(outside, "x.txt"))).toBe(false);
    expect(existsSync(join(outside, "target.txt"))).toBe(false);
  });
});

describe("shell_exec", () => {
  it("returns output and the exit code", async () => {
    const ok = await registry.run("shell_exec", { command: "echo hi; echo err >&2" }, context());
    expect(ok).toMatchObject({ ok: true, exit_code: 0 });
    expect(ok.output).toBe("hi\nerr\n");
    const failed = await registry.run("shell_exec", { command: "exit 3" }, context());
    expect(failed).toMatchObject({ ok: false, exit_code: 3 });
  });
  it("runs in the workspace", async () => {
    mkdirSync(join(workspace, "sub"));
    const result = await registry.run("shell_exec", { command: "ls" }, context());
    expect(result.output).toContain("sub");
  });
  it("caps output and says so", async () => {
    const result = await registry.run("shell_exec", { command: "head -c 5000 /dev/zero | tr '\\0' x" }, context({ outputCapBytes: 100 }));
    expect(result.truncated).toBe(true);
    expect(result.output).toMatch(/output cut, 4900 bytes not kept/);
  });
  it("kills the whole process group on timeout", async () => {
    const marker = join(workspace, "child-survived");
    const started = Date.now();
    const result = await registry.run(
      "shell_exec",
      { command: `(sleep 1 && touch ${marker}) & sleep 30` },
      context({ signal: AbortSignal.timeout(200) }),
    );
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(result.error?.code).toBe("DUCK_ERR_TOOL_TIMEOUT");
    await new Promise((resolve) => setTimeout(resolve, 1_300));
    expect(existsSync(marker)).toBe(false);
  });
  it("does not pass secrets in the environment to commands", () => {
    const clean = scrubEnvironment({ PATH: "/bin", GITHUB_TOKEN: "x", AWS_SECRET_ACCESS_KEY: "y", DUCKLM_TOKEN: "z", HOME: "/h" });
    expect(clean).toEqual({ PATH: "/bin", HOME: "/h" });
  });
});
