import { DuckError, ErrorCode } from "../../errors/duck-error.js";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { makeTempDir } from "../../../test/helpers/test-runtime.js";
import type { ToolContext } from "../tool-definition.js";
import { ToolRegistry } from "../tool-registry.js";
import { fileReadTool } from "./file-read.js";
import { fileListTool } from "./file-list.js";
import { fileWriteTool, writeFileAtomically } from "./file-write.js";
import { resolveInWorkspace } from "../workspace-paths.js";
import { shellExecTool } from "./shell-exec.js";
import { commandEnvironment, sortEnvironment } from "../command-environment.js";

let workspace: string;
let registry: ToolRegistry;
beforeEach(() => {
  workspace = makeTempDir("ducklm-tools-");
  registry = new ToolRegistry().register(fileReadTool).register(fileWriteTool).register(fileListTool).register(shellExecTool);
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

describe("filesystem escapes leave nothing outside the workspace", () => {
  function outsideDir(): string {
    const dir = makeTempDir("ducklm-outside-");
    writeFileSync(join(dir, "keep.txt"), "untouched");
    return dir;
  }
  const snapshot = (dir: string) => readdirSync(dir, { recursive: true }).map(String).sort();

  it("refuses a link to / , a final-component link, a dangling link, `..` and absolute paths, for reads and writes", async () => {
    const outside = outsideDir();
    const before = snapshot(outside);
    symlinkSync("/", join(workspace, "root-link"));
    symlinkSync(join(outside, "keep.txt"), join(workspace, "final-link"));
    writeFileSync(join(workspace, "inside.txt"), "inside");
    symlinkSync(join(workspace, "inside.txt"), join(workspace, "inner-link"));
    symlinkSync(join(outside, "does-not-exist"), join(workspace, "dangling"));
    const attempts = ["root-link/tmp/escape.txt", "final-link", "inner-link", "dangling", "dangling/x.txt", "../escape.txt", `${outside}/escape.txt`, "a/../../escape.txt"];
    for (const path of attempts) {
      const write = await registry.run("file_write", { path, content: "escaped" }, context());
      expect(write.ok, `write ${path}`).toBe(false);
      expect(write.error?.code, `write ${path}`).toBe("DUCK_ERR_PATH_OUTSIDE_WORKSPACE");
      const read = await registry.run("file_read", { path }, context());
      expect(read.ok, `read ${path}`).toBe(false);
    }
    expect(snapshot(outside)).toEqual(before);
    expect(readFileSync(join(outside, "keep.txt"), "utf8")).toBe("untouched");
    expect(existsSync("/tmp/escape.txt")).toBe(false);
  });

  it("catches a directory swapped for a link between the check and the write", async () => {
    const outside = outsideDir();
    const before = snapshot(outside);
    mkdirSync(join(workspace, "dir"));
    const checked = resolveInWorkspace(workspace, "dir/file.txt");
    // The race: after the check, someone replaces dir with a link to a place outside.
    renameSync(join(workspace, "dir"), join(workspace, "dir.old"));
    symlinkSync(outside, join(workspace, "dir"));
    await expect(writeFileAtomically(workspace, checked, "escaped")).rejects.toThrow(/outside the workspace|symbolic link/);
    expect(snapshot(outside)).toEqual(before);
  });

  it("shows a diff for a write", async () => {
    writeFileSync(join(workspace, "d.txt"), "one\ntwo\nthree\n");
    const result = await registry.run("file_write", { path: "d.txt", content: "one\n2\nthree\n" }, context());
    expect(result.output).toContain("-two");
    expect(result.output).toContain("+2");
  });

  it("lists a directory without following links", async () => {
    mkdirSync(join(workspace, "src/deep"), { recursive: true });
    writeFileSync(join(workspace, "src/a.ts"), "x");
    writeFileSync(join(workspace, "src/deep/b.ts"), "y");
    symlinkSync("/", join(workspace, "src/root"));
    const result = await registry.run("file_list", { path: "src", depth: 3 }, context());
    expect(result.ok).toBe(true);
    expect(result.output.split("\n")).toEqual(["a.ts  1", "deep/", "deep/b.ts  1", "root -> (link)"]);
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
  it("says a command stopped by a person was cancelled, not that it timed out", async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(new DuckError(ErrorCode.Cancelled, "interrupted at the terminal")), 200);
    const result = await registry.run("shell_exec", { command: "sleep 30" }, context({ signal: controller.signal }));
    expect(result.ok).toBe(false);
    expect(result.error).toEqual({ code: "DUCK_ERR_CANCELLED", message: "command stopped: interrupted at the terminal" });
  });
});

// git is told to ignore repositories it would only find by their look (see command-environment.ts).
const GIT_PROTECTIONS = { GIT_CONFIG_COUNT: "1", GIT_CONFIG_KEY_0: "safe.bareRepository", GIT_CONFIG_VALUE_0: "explicit" };

describe("the environment a command gets", () => {
  const everything = {
    PATH: "/usr/bin",
    HOME: "/home/u",
    LANG: "C.UTF-8",
    LC_ALL: "C.UTF-8",
    LC_SECRET_TOKEN: "lc-looking-secret",
    GITHUB_TOKEN: "t",
    GITHUB_PAT: "ghp_x",
    MYSQL_PWD: "hunter2",
    DOCKER_PASS: "p",
    SENTRY_DSN: "https://key@sentry.io/1",
    AWS_SECRET_ACCESS_KEY: "k",
    DATABASE_URL: "postgres://app:hunter2@db/app",
    CDPATH: "/",
    OLDPWD: "/etc",
    BASH_ENV: "/tmp/x",
    ENV: "/tmp/x",
    "BASH_FUNC_ls%%": "() { rm -rf ~; }",
    LD_PRELOAD: "/tmp/x.so",
    NODE_OPTIONS: "--require /tmp/x.js",
    GIT_EXTERNAL_DIFF: "/tmp/x",
    SSH_AUTH_SOCK: "/run/x",
    DUCKLM_HOME: "/home/u/.local/share/ducklm",
    HTTPS_PROXY: "http://proxy",
  };

  it("passes only what says where things are and how to show text: any other name is left out, whatever it is called", () => {
    expect(commandEnvironment(everything)).toEqual({ ...GIT_PROTECTIONS, PATH: "/usr/bin", HOME: "/home/u", LANG: "C.UTF-8", LC_ALL: "C.UTF-8" });
  });

  it("adds the names the user lists, never what changes how the shell behaves nor DuckLM's own, and never a withheld one", () => {
    const clean = commandEnvironment(everything, { pass: ["MYSQL_PWD", "GITHUB_*", "BASH_ENV", "DUCKLM_HOME", "GIT_EXTERNAL_DIFF", "DATABASE_URL"], withhold: ["DATABASE_URL"] });
    expect(clean).toEqual({ ...GIT_PROTECTIONS, PATH: "/usr/bin", HOME: "/home/u", LANG: "C.UTF-8", LC_ALL: "C.UTF-8", MYSQL_PWD: "hunter2", GITHUB_TOKEN: "t", GITHUB_PAT: "ghp_x" });
    expect(sortEnvironment(everything, {}).passed).toEqual(["HOME", "LANG", "LC_ALL", "PATH"]);
  });
});
