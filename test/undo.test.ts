import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { ExecutionDirective } from "../src/contracts/index.js";
import { ducklmOf } from "../src/runtime/ducklm.js";
import { REPO_ROOT } from "./helpers/cli-child.js";
import { scriptedAgent } from "./helpers/scripted-agent.js";
import { makeTempDir, useTestRuntimes } from "./helpers/test-runtime.js";
import { startTestServer, type TestServer } from "./helpers/test-server.js";

const setup = useTestRuntimes(afterEach);
const tsxLoader = import.meta.resolve("tsx");
const gitInstalled = spawnSync("git", ["--version"]).status === 0;

/** Bytes a text editor would mangle: a carriage return, a NUL, no newline at the end. */
const BINARY_ISH = Buffer.from([0x62, 0x65, 0x74, 0x61, 0x0d, 0x0a, 0x00, 0xff, 0x01]);

function runInOneStep(command: string): { text: string; auto_approve: ["unknown"] } {
  return { text: `run \`${command}\``, auto_approve: ["unknown"] };
}

describe.skipIf(!gitInstalled)("undo: the workspace as it was before a task's step", () => {
  it("puts back, to the byte, a file a task deleted and one it rewrote, removes the one it made, and records it", async () => {
    const runtime = setup();
    writeFileSync(join(runtime.workspace, "keep.bin"), BINARY_ISH);
    writeFileSync(join(runtime.workspace, "run.sh"), "#!/bin/sh\necho hi\n");
    chmodSync(join(runtime.workspace, "run.sh"), 0o755);
    mkdirSync(join(runtime.workspace, "docs", "deep"), { recursive: true });
    writeFileSync(join(runtime.workspace, "docs", "deep", "notes.md"), "line one\r\nline two");
    const outcome = await runtime.loop.submit(runInOneStep("rm docs/deep/notes.md; rmdir docs/deep docs; printf changed > keep.bin; chmod -x run.sh; echo new > made.txt")).done;
    expect(outcome.state).toBe("completed");
    expect(existsSync(join(runtime.workspace, "docs"))).toBe(false);

    const ducklm = ducklmOf(runtime);
    const preview = await ducklm.undo(outcome.task_id, { dryRun: true });
    expect(preview.changes).toEqual([
      { path: "docs/deep/notes.md", change: "restored" },
      { path: "keep.bin", change: "rewritten" },
      { path: "made.txt", change: "removed" },
      { path: "run.sh", change: "rewritten" },
    ]);
    expect(existsSync(join(runtime.workspace, "made.txt"))).toBe(true);

    const undone = await ducklm.undo(outcome.task_id);
    expect(readFileSync(join(runtime.workspace, "keep.bin")).equals(BINARY_ISH)).toBe(true);
    expect(readFileSync(join(runtime.workspace, "docs", "deep", "notes.md"), "utf8")).toBe("line one\r\nline two");
    expect(statSync(join(runtime.workspace, "run.sh")).mode & 0o111).not.toBe(0);
    expect(existsSync(join(runtime.workspace, "made.txt"))).toBe(false);
    const restored = runtime.store.listEvents(outcome.task_id).filter((event) => event.type === "workspace-restored");
    expect(restored).toHaveLength(1);
    expect(restored[0]!.payload).toMatchObject({ step_id: undone.before!.step_id, changed: 4, by: "user", saved_as: undone.saved_as });

    // And the undo can be taken back.
    await ducklm.undo(outcome.task_id, { redo: true });
    expect(readFileSync(join(runtime.workspace, "keep.bin"), "utf8")).toBe("changed");
    expect(existsSync(join(runtime.workspace, "made.txt"))).toBe(true);
    expect(existsSync(join(runtime.workspace, "docs"))).toBe(false);
  });

  it("undoes from one step on, keeping what the steps before it did", async () => {
    const plan: ExecutionDirective = {
      kind: "plan",
      goal: "",
      steps: [
        { id: "write", kind: "tool", description: "", depends_on: [], tool: "shell_exec", arguments: { command: "echo first > first.txt" } },
        { id: "remove", kind: "tool", description: "", depends_on: ["write"], tool: "shell_exec", arguments: { command: "rm precious.txt" } },
      ],
    };
    const runtime = setup({ models: scriptedAgent({ directive: plan, verdict: () => "pass" }), confinedCommands: "run" });
    writeFileSync(join(runtime.workspace, "precious.txt"), "precious\n");
    const outcome = await runtime.loop.submit({ text: "tidy up" }).done;
    expect(outcome.state).toBe("completed");
    const ducklm = ducklmOf(runtime);
    expect((await ducklm.undoPoints(outcome.task_id)).map((point) => point.step_id)).toEqual(["write", "remove"]);
    const result = await ducklm.undo(outcome.task_id, { step: "remove" });
    expect(result.changes).toEqual([{ path: "precious.txt", change: "restored" }]);
    expect(readFileSync(join(runtime.workspace, "precious.txt"), "utf8")).toBe("precious\n");
    expect(readFileSync(join(runtime.workspace, "first.txt"), "utf8")).toBe("first\n");
    await expect(ducklm.undo(outcome.task_id, { step: "nope" })).rejects.toMatchObject({ code: "DUCK_ERR_INVALID_INPUT" });
  });

  it("writes nothing through a link a task left where a folder was", async () => {
    const outside = makeTempDir("ducklm-undo-outside-");
    writeFileSync(join(outside, "untouched.txt"), "outside\n");
    const runtime = setup({ confinedCommands: "run" });
    mkdirSync(join(runtime.workspace, "config"));
    writeFileSync(join(runtime.workspace, "config", "settings.txt"), "mine\n");
    // The folder becomes a link that leads out of the workspace (made inside the sandbox, where it leads nowhere harmful).
    const outcome = await runtime.loop.submit(runInOneStep(`rm config/settings.txt; rmdir config; ln -s ${outside} config`)).done;
    expect(outcome.state).toBe("completed");
    expect(lstatSync(join(runtime.workspace, "config")).isSymbolicLink()).toBe(true);
    await ducklmOf(runtime).undo(outcome.task_id);
    expect(lstatSync(join(runtime.workspace, "config")).isDirectory()).toBe(true);
    expect(readFileSync(join(runtime.workspace, "config", "settings.txt"), "utf8")).toBe("mine\n");
    expect(readdirSync(outside)).toEqual(["untouched.txt"]);
    expect(readFileSync(join(outside, "untouched.txt"), "utf8")).toBe("outside\n");
  });

  it("keeps the bytes whatever the task writes into .gitattributes and .gitignore, and runs nothing of the workspace's git", async () => {
    const runtime = setup({ confinedCommands: "run" });
    writeFileSync(join(runtime.workspace, "data.txt"), "unix\nlines\n");
    mkdirSync(join(runtime.workspace, ".git", "hooks"), { recursive: true });
    const planted = join(makeTempDir("ducklm-undo-hook-"), "ran");
    writeFileSync(join(runtime.workspace, ".git", "config"), `[core]\n\tfsmonitor = touch ${planted}\n\thooksPath = .git/hooks\n`);
    const outcome = await runtime.loop.submit(runInOneStep("printf '* text eol=crlf filter=evil\\n' > .gitattributes; printf '*\\n' > .gitignore; rm data.txt; echo later > later.txt")).done;
    expect(outcome.state).toBe("completed");
    await ducklmOf(runtime).undo(outcome.task_id);
    expect(readFileSync(join(runtime.workspace, "data.txt"), "utf8")).toBe("unix\nlines\n");
    expect(existsSync(join(runtime.workspace, ".gitattributes"))).toBe(false);
    expect(existsSync(join(runtime.workspace, ".gitignore"))).toBe(false);
    // Made while the task's `*` hid it from the snapshots: gone too.
    expect(existsSync(join(runtime.workspace, "later.txt"))).toBe(false);
    expect(existsSync(planted)).toBe(false);
  });

  it("keeps out DuckLM's own home where the workspace holds it, and never touches it on a restore", async () => {
    const outer = makeTempDir("ducklm-undo-outer-");
    const home = join(outer, ".local", "share", "ducklm");
    mkdirSync(home, { recursive: true });
    writeFileSync(join(outer, "notes.txt"), "precious\n");
    const runtime = setup({ home, workspace: outer, confinedCommands: "run" });
    const first = await runtime.loop.submit(runInOneStep("echo changed > notes.txt")).done;
    expect(first.state).toBe("completed");
    expect((await runtime.loop.submit(runInOneStep("echo two > notes.txt")).done).state).toBe("completed");
    const preview = await ducklmOf(runtime).undo(first.task_id, { dryRun: true });
    expect(preview.changes).toEqual([{ path: "notes.txt", change: "rewritten" }]);
    await ducklmOf(runtime).undo(first.task_id);
    expect(readFileSync(join(outer, "notes.txt"), "utf8")).toBe("precious\n");
    // The checkpoints survived their own restore: the undo can be taken back.
    await ducklmOf(runtime).undo(first.task_id, { redo: true });
    expect(readFileSync(join(outer, "notes.txt"), "utf8")).toBe("two\n");
  });

  it("restores a file a task grew past undo.max_file_bytes, and is not stopped by a fifo", async () => {
    const runtime = setup({ runtime: { undo: { max_file_bytes: 1000 } }, confinedCommands: "run" });
    writeFileSync(join(runtime.workspace, "important.txt"), "small and precious\n");
    writeFileSync(join(runtime.workspace, "other.txt"), "other\n");
    const outcome = await runtime.loop.submit(runInOneStep("head -c 5000 /dev/zero > important.txt; rm other.txt; mkfifo pipe")).done;
    expect(outcome.state).toBe("completed");
    const undone = await ducklmOf(runtime).undo(outcome.task_id);
    expect(undone.changes.map((change) => change.path).sort()).toEqual(["important.txt", "other.txt"]);
    expect(readFileSync(join(runtime.workspace, "important.txt"), "utf8")).toBe("small and precious\n");
    expect(readFileSync(join(runtime.workspace, "other.txt"), "utf8")).toBe("other\n");
  });

  it("refuses a task still running or waiting, and one that changed nothing, with DUCK_ERR_UNDO_UNAVAILABLE", async () => {
    const runtime = setup();
    const ducklm = ducklmOf(runtime);
    const waiting = await runtime.loop.submit({ text: "run `cp a b`" }).done;
    expect(waiting.state).toBe("awaiting_permission");
    await expect(ducklm.undo(waiting.task_id)).rejects.toMatchObject({ code: "DUCK_ERR_UNDO_UNAVAILABLE", message: expect.stringMatching(/awaiting permission.*once it has ended/) });
    writeFileSync(join(runtime.workspace, "notes.md"), "# notes\n");
    const reading = await runtime.loop.submit({ text: "read file notes.md" }).done;
    await expect(ducklm.undo(reading.task_id)).rejects.toMatchObject({ code: "DUCK_ERR_UNDO_UNAVAILABLE", message: expect.stringMatching(/nothing to undo/) });
  });

  it("is off with runtime.json undo.enabled false: no checkpoint is kept, and undo says so", async () => {
    const runtime = setup({ runtime: { undo: { enabled: false } } });
    const outcome = await runtime.loop.submit(runInOneStep("echo x > x.txt")).done;
    expect(outcome.state).toBe("completed");
    expect(existsSync(join(runtime.home, "checkpoints"))).toBe(false);
    await expect(ducklmOf(runtime).undo(outcome.task_id)).rejects.toThrow(/undo is off/);
  });
});

describe.skipIf(!gitInstalled)("undo over HTTP and from the terminal", () => {
  let server: TestServer | undefined;
  afterAll(async () => {
    await server?.close();
  });

  it("POST /tasks/:id/undo previews with dry_run, then restores; GET lists the points; errors are 4xx", async () => {
    server = await startTestServer();
    writeFileSync(join(server.runtime.workspace, "a.txt"), "alpha\n");
    const outcome = await server.runtime.loop.submit(runInOneStep("rm a.txt")).done;
    const call = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(`${server!.url}${path}`, { method, headers: { authorization: `Bearer ${server!.token}`, ...(body !== undefined ? { "content-type": "application/json" } : {}) }, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    const points = await call("GET", `/tasks/${outcome.task_id}/undo`);
    expect(points.status).toBe(200);
    expect(points.body.points).toHaveLength(1);
    const preview = await call("POST", `/tasks/${outcome.task_id}/undo`, { dry_run: true });
    expect(preview).toMatchObject({ status: 200, body: { dry_run: true, changes: [{ path: "a.txt", change: "restored" }] } });
    expect(existsSync(join(server.runtime.workspace, "a.txt"))).toBe(false);
    const done = await call("POST", `/tasks/${outcome.task_id}/undo`, {});
    expect(done.status).toBe(200);
    expect(readFileSync(join(server.runtime.workspace, "a.txt"), "utf8")).toBe("alpha\n");
    expect((await call("POST", `/tasks/${outcome.task_id}/undo`, { step: "x", redo: true })).status).toBe(400);
    expect((await call("POST", "/tasks/no-such-task/undo", {})).status).toBe(404);
  });

  it("`ducklm undo` lists, previews and restores, and exits 2 for a step that is not there", () => {
    const home = makeTempDir("ducklm-undo-cli-home-");
    const workspace = makeTempDir("ducklm-undo-cli-ws-");
    writeFileSync(join(workspace, "report.txt"), "draft one\n");
    const cli = (args: string[]) =>
      spawnSync(process.execPath, ["--import", tsxLoader, join(REPO_ROOT, "src/cli/main.ts"), "--home", home, "--config", join(REPO_ROOT, "config"), "--workspace", workspace, ...args], { encoding: "utf8", timeout: 120_000 });
    const ran = cli(["run", "--yes", "--json", "run `echo draft two > report.txt`"]);
    expect(ran.status).toBe(0);
    const taskId = JSON.parse(ran.stdout.trim().split("\n")[0]!).task_id as string;
    expect(readFileSync(join(workspace, "report.txt"), "utf8")).toBe("draft two\n");
    expect(cli(["undo", taskId, "--list"]).stdout).toMatch(/shell_exec\s+echo draft two > report\.txt/);
    expect(cli(["undo", taskId, "--dry-run"]).stdout).toMatch(/would put .* back[\s\S]*rewritten report\.txt/);
    expect(readFileSync(join(workspace, "report.txt"), "utf8")).toBe("draft two\n");
    const undone = cli(["undo", taskId]);
    expect(undone.status).toBe(0);
    expect(undone.stdout).toContain("--redo");
    expect(readFileSync(join(workspace, "report.txt"), "utf8")).toBe("draft one\n");
    const missing = cli(["undo", taskId, "--step", "nope"]);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch(/DUCK_ERR_INVALID_INPUT: .*no step nope/);
  });
});

describe.skipIf(!gitInstalled)("the first snapshot of a workspace", () => {
  it("is read ahead when a task starts, so the step that changes the workspace only looks at what changed", async () => {
    const runtime = setup();
    const checkpoints = runtime.context.checkpoints!;
    expect(checkpoints.hasSnapshots(runtime.workspace)).toBe(false);
    // A task that changes nothing still has the workspace read, while its model would be deciding.
    await runtime.loop.submit({ text: "Tell me a joke" }).done;
    await checkpoints.settled();
    expect(checkpoints.hasSnapshots(runtime.workspace)).toBe(true);
  });
});
