import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, realpathSync, writeFileSync } from "node:fs";
import { userInfo } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { RunningSandboxes, sandboxRegistryFolder } from "../src/tools/running-sandboxes.js";
import { bubblewrapShell, type ShellSandbox } from "../src/tools/shell-sandbox.js";
import { REPO_ROOT } from "./helpers/cli-child.js";
import { makeTempDir } from "./helpers/test-runtime.js";
import { runConfined } from "./helpers/test-tools.js";

// bubblewrap follows links in the paths it mounts on while it sets a sandbox up, with DuckLM's own
// privileges. A command already running in the workspace can swap a folder on such a path for a link
// to the host at that moment: a new command must mount nowhere a running one could redirect.

const tsxLoader = import.meta.resolve("tsx");
const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) child.kill("SIGKILL");
});

/** Starts a confined command and leaves it running; resolves once it has printed `ready`. */
async function startConfined(sandbox: ShellSandbox, command: string, workspace: string): Promise<ChildProcess> {
  const launch = await sandbox.launch(`${command}`, { workspace, network: false, timeLimitMs: 120_000 });
  const child = spawn(launch.file, launch.args, { cwd: workspace, detached: true, env: launch.env, stdio: ["ignore", "pipe", "pipe", ...(launch.extraStdio ?? [])] });
  launch.attach?.(child);
  started.push(child);
  let output = "";
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (chunk) => {
      output += chunk;
      if (output.includes("ready")) resolve();
    });
    child.stderr!.on("data", (chunk) => (output += chunk));
    child.once("close", () => reject(new Error(`the command ended early: ${output}`)));
  });
  return child;
}

/** Runs a launch that was only inspected, to its end: until then it counts as running. */
function finished(launch: Awaited<ReturnType<ShellSandbox["launch"]>>, workspace: string): Promise<number | null> {
  const child = spawn(launch.file, launch.args, { cwd: workspace, env: launch.env, stdio: ["ignore", "ignore", "ignore", ...(launch.extraStdio ?? [])] });
  launch.attach?.(child);
  return new Promise((resolve) => child.once("close", resolve));
}

describe("what a running command could redirect", () => {
  it("is every path below its writable root with a part that is not a mount point there", () => {
    const registry = new RunningSandboxes(join(makeTempDir("ducklm-running-"), "shared"));
    const forget = registry.register({ writable: ["/w"], fixed: ["/w", "/w/sub", "/w/sub/.git", "/w/ro"], sealed: ["/w/sub/.git", "/w/ro"] });
    const paths = ["/w", "/w/sub", "/w/sub/.git/config", "/w/sub/.git/hooks/x", "/w/other/.git", "/w/sub/new/.git", "/w/ro/a/b", "/elsewhere/x"];
    expect([...registry.redirectable(paths)].sort()).toEqual(["/w/other/.git", "/w/sub/new/.git"]);
    forget();
    expect([...registry.redirectable(paths)]).toEqual([]);
  });

  it("is known to another process through its file, and forgotten when that process is gone", async () => {
    const shared = join(makeTempDir("ducklm-running-"), "shared");
    const mine = new RunningSandboxes(shared);
    mine.register({ writable: [], fixed: [], sealed: [] });
    // Another process's command, written as that process writes it; then the same for one that has exited.
    const alive = spawn("sleep", ["30"]);
    started.push(alive);
    writeFileSync(join(shared, `${alive.pid}-1.json`), JSON.stringify({ writable: ["/w"], fixed: ["/w"], sealed: [] }));
    expect([...mine.redirectable(["/w/sub/.git"])]).toEqual(["/w/sub/.git"]);
    alive.kill("SIGKILL");
    await new Promise((resolve) => alive.once("exit", resolve));
    expect([...mine.redirectable(["/w/sub/.git"])]).toEqual([]);
    expect(readdirSync(shared).filter((name) => name.startsWith(`${alive.pid}-`))).toEqual([]);
  });

  it("is read and recorded by one process at a time: a live holder is waited for, a dead one's lock taken over", async () => {
    const shared = join(makeTempDir("ducklm-running-"), "shared");
    const registry = new RunningSandboxes(shared);
    registry.register({ writable: [], fixed: [], sealed: [] });
    // Another process holds the lock for half a second, then lets it go.
    const holder = spawn("sh", ["-c", `mkdir ${shared}/lock && echo $$ > ${shared}/lock/pid && echo held && sleep 0.5 && rm -r ${shared}/lock`]);
    started.push(holder);
    await new Promise((resolve) => holder.stdout!.once("data", resolve));
    const waitedFrom = Date.now();
    expect(registry.exclusive(() => existsSync(join(shared, "lock", "pid")) && readdirSync(join(shared, "lock")).length)).toBe(1);
    expect(Date.now() - waitedFrom).toBeGreaterThanOrEqual(300);
    expect(existsSync(join(shared, "lock"))).toBe(false);
    // A lock whose holder is gone is taken over at once.
    mkdirSync(join(shared, "lock"));
    writeFileSync(join(shared, "lock", "pid"), String(holder.pid));
    await new Promise((resolve) => (holder.exitCode !== null ? resolve(null) : holder.once("exit", resolve)));
    const takenFrom = Date.now();
    expect(registry.exclusive(() => "ran")).toBe("ran");
    expect(Date.now() - takenFrom).toBeLessThan(1_000);
  });

  it("is not trusted from a shared folder others can open, and then no command is recorded or run", () => {
    const shared = join(makeTempDir("ducklm-running-"), "shared");
    mkdirSync(shared, { mode: 0o777 });
    chmodSync(shared, 0o777);
    const registry = new RunningSandboxes(shared);
    expect(() => registry.register({ writable: ["/w"], fixed: [], sealed: [] })).toThrow(/others may open it/);
    expect(() => registry.exclusive(() => "ran")).toThrow(/no confined command runs until it is fixed/);
    expect(readdirSync(shared)).toEqual([]);
  });

  it.runIf(process.getuid?.() === 0)("is not trusted from a private folder another user made first, and then no command runs", () => {
    // Another user's folder, made before DuckLM's (mode 700, theirs): what they put in it, or leave out, DuckLM would believe.
    const shared = join(makeTempDir("ducklm-running-"), "shared");
    mkdirSync(shared, { mode: 0o700 });
    chownSync(shared, 65534, 65534);
    const registry = new RunningSandboxes(shared);
    let ran = false;
    expect(() => registry.exclusive(() => (ran = true))).toThrow(/belongs to user 65534/);
    expect(ran).toBe(false);
    expect(readdirSync(shared)).toEqual([]);
  });

  it("lies in the home the passwd entry names, whatever a process's TMPDIR or HOME", () => {
    const saved = { TMPDIR: process.env.TMPDIR, HOME: process.env.HOME };
    try {
      Object.assign(process.env, { TMPDIR: makeTempDir("ducklm-other-tmp-"), HOME: makeTempDir("ducklm-other-home-") });
      expect(sandboxRegistryFolder()).toBe(join(realpathSync(userInfo().homedir), ".cache", "ducklm", "sandboxes"));
    } finally {
      for (const [name, value] of Object.entries(saved)) if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });
});

describe("a command started beside one that could redirect its mounts", () => {
  it("does not start in a workspace inside a running command's, and makes nothing there first", async () => {
    const outer = makeTempDir("ducklm-running-outer-");
    const inner = join(outer, "inner");
    mkdirSync(inner);
    const sandbox = bubblewrapShell({ hiddenPaths: [] });
    const runningOne = await startConfined(sandbox, "echo ready; sleep 60", outer);
    try {
      // The running command could swap `inner` for a link while stand-ins (.git, .envrc…) are made in it.
      await expect(sandbox.launch("true", { workspace: inner, network: false, timeLimitMs: 10_000 })).rejects.toThrow(/a command running now could move .*inner/);
      expect(readdirSync(inner)).toEqual([]);
    } finally {
      runningOne.kill("SIGKILL");
      await new Promise((resolve) => runningOne.once("close", resolve));
      await sandbox.dispose();
    }
  }, 60_000);

  it("leaves out the mounts on a repository made after the running command started, and keeps those made before", async () => {
    const workspace = makeTempDir("ducklm-running-ws-");
    mkdirSync(join(workspace, "old", ".git", "hooks"), { recursive: true });
    writeFileSync(join(workspace, "old", ".git", "HEAD"), "ref: refs/heads/main\n");
    const sandbox = bubblewrapShell({ hiddenPaths: [] });
    const runningOne = await startConfined(sandbox, "echo ready; sleep 60", workspace);
    // Made after it started: the running command could rename `new` away and leave a link in its place.
    mkdirSync(join(workspace, "new", ".git", "hooks"), { recursive: true });
    writeFileSync(join(workspace, "new", ".git", "HEAD"), "ref: refs/heads/main\n");
    const launch = await sandbox.launch("true", { workspace, network: false, timeLimitMs: 10_000 });
    const destinations = launch.args.filter((arg) => arg.startsWith(workspace));
    expect(destinations).toContain(join(workspace, "old", ".git"));
    expect(destinations.filter((path) => path.startsWith(join(workspace, "new")))).toEqual([]);
    await finished(launch, workspace);
    runningOne.kill("SIGKILL");
    await new Promise((resolve) => runningOne.once("close", resolve));
    // Once it has ended, the new repository is protected like any other.
    const after = await sandbox.launch("true", { workspace, network: false, timeLimitMs: 10_000 });
    expect(after.args).toContain(join(workspace, "new", ".git"));
    await finished(after, workspace);
    await sandbox.dispose();
  }, 60_000);

  it("sees the running command of another DuckLM process started with another TMPDIR", async () => {
    const workspace = makeTempDir("ducklm-running-ws-");
    const otherTmp = makeTempDir("ducklm-running-other-tmp-");
    const other = spawn(process.execPath, ["--import", tsxLoader, join(REPO_ROOT, "test/fixtures/sandbox-child.ts"), workspace], { cwd: workspace, env: { ...process.env, TMPDIR: otherTmp }, stdio: ["ignore", "pipe", "pipe"] });
    started.push(other);
    let output = "";
    await new Promise<void>((resolve, reject) => {
      other.stdout!.on("data", (chunk) => {
        output += chunk;
        if (output.includes("ready")) resolve();
      });
      other.stderr!.on("data", (chunk) => (output += chunk));
      other.once("close", () => reject(new Error(`the other process ended early: ${output}`)));
    });
    // Made after the other process's command started: it could rename `new` away and leave a link in its place.
    mkdirSync(join(workspace, "new", ".git", "hooks"), { recursive: true });
    writeFileSync(join(workspace, "new", ".git", "HEAD"), "ref: refs/heads/main\n");
    const sandbox = bubblewrapShell({ hiddenPaths: [] });
    const launch = await sandbox.launch("true", { workspace, network: false, timeLimitMs: 10_000 });
    expect(launch.args.filter((arg) => arg.startsWith(join(workspace, "new")))).toEqual([]);
    await finished(launch, workspace);
    await sandbox.dispose();
  }, 60_000);

  it("hides the record of running commands from a command, even in a home folder it may read", async () => {
    const workspace = makeTempDir("ducklm-running-ws-");
    const registry = new RunningSandboxes().folder();
    const sandbox = bubblewrapShell({ hiddenPaths: [], homeVisible: [dirname(dirname(registry))] });
    const runningOne = await startConfined(sandbox, "echo ready; sleep 60", workspace);
    expect(readdirSync(registry).some((name) => name.startsWith(`${process.pid}-`))).toBe(true);
    const seen = await runConfined(sandbox, `ls -A ${registry} 2>&1; touch ${registry}/planted 2>&1; true`, workspace);
    expect(seen).not.toMatch(/\.json/);
    expect(existsSync(join(registry, "planted"))).toBe(false);
    runningOne.kill("SIGKILL");
    await new Promise((resolve) => runningOne.once("close", resolve));
    await sandbox.dispose();
  }, 60_000);

  it("a running command that swaps a new repository's .git for a link to the host makes bubblewrap create nothing there", async () => {
    const workspace = makeTempDir("ducklm-running-ws-");
    const outside = makeTempDir("ducklm-running-outside-");
    const sandbox = bubblewrapShell({ hiddenPaths: [] });
    // During setup the host's root is /oldroot: a dangling link there is where bubblewrap would make its mount point.
    const toggler = [
      "import os, time",
      "os.makedirs('sub')",
      "print('ready', flush=True)",
      "end = time.time() + 25",
      "n = 0",
      "while time.time() < end:",
      "    with open('sub/.git', 'w') as f: f.write('gitdir: ../nowhere\\n')",
      "    time.sleep(0.002)",
      "    os.rename('sub/.git', 'sub/.kept-%d' % n)",
      `    os.symlink('/oldroot${outside}/planted-%d' % n, 'sub/.git')`,
      "    time.sleep(0.002)",
      "    os.unlink('sub/.git')",
      "    n += 1",
    ].join("\n");
    writeFileSync(join(workspace, "toggle.py"), toggler);
    await startConfined(sandbox, "python3 toggle.py", workspace);
    for (let attempt = 0; attempt < 40; attempt++) {
      try {
        await runConfined(sandbox, "true", workspace);
      } catch {
        // A setup that found the workspace changed under it is refused: that is not what this checks.
      }
    }
    expect(readdirSync(outside)).toEqual([]);
    expect(existsSync(join(workspace, "sub"))).toBe(true);
    await sandbox.dispose();
  }, 120_000);
});

describe("a workspace another user could change", () => {
  it("is refused when a folder on its way may be written by others, and mounts inside it that others could redirect are left out", async () => {
    // Another user's processes are in no registry: a folder anyone may write stands for one they own.
    const shared = makeTempDir("ducklm-running-shared-");
    chmodSync(shared, 0o777);
    const exposed = join(shared, "ws");
    mkdirSync(exposed);
    const sandbox = bubblewrapShell({ hiddenPaths: [] });
    await expect(sandbox.launch("true", { workspace: exposed, network: false, timeLimitMs: 10_000 })).rejects.toThrow(/another user could change .* \(other users may write/);
    // Refused before anything is made in it: no stand-in was created through what might be a link.
    expect(readdirSync(exposed)).toEqual([]);
    // A workspace others may write into, itself: its `.git` and run-later files could not be kept.
    const open = makeTempDir("ducklm-running-open-");
    chmodSync(open, 0o777);
    await expect(sandbox.launch("true", { workspace: open, network: false, timeLimitMs: 10_000 })).rejects.toThrow(/another user could change .* \(other users may write/);
    if (process.getuid?.() === 0) {
      // As root, a group that may write stands for anyone (an ACL for another user shows as one).
      chmodSync(open, 0o775);
      await expect(sandbox.launch("true", { workspace: open, network: false, timeLimitMs: 10_000 })).rejects.toThrow(/other users may write/);
    }
    expect(readdirSync(open)).toEqual([]);

    const workspace = makeTempDir("ducklm-running-ws-");
    for (const repository of ["mine", "open/sub"]) {
      mkdirSync(join(workspace, repository, ".git"), { recursive: true });
      writeFileSync(join(workspace, repository, ".git", "HEAD"), "ref: refs/heads/main\n");
    }
    chmodSync(join(workspace, "open"), 0o777);
    const launch = await sandbox.launch("true", { workspace, network: false, timeLimitMs: 10_000 });
    expect(launch.args).toContain(join(workspace, "mine", ".git"));
    // `open` itself is safe to mount on (only its contents are others' to change); nothing below it is.
    expect(launch.args.filter((arg) => arg.startsWith(`${join(workspace, "open")}/`))).toEqual([]);
    await finished(launch, workspace);
    await sandbox.dispose();
  }, 60_000);
});
