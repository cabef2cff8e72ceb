import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestRuntime, makeTempDir, type TestRuntime } from "./helpers/test-runtime.js";

// A task that leaves links in the workspace for DuckLM's own bind mounts to follow: a `gitdir:` or a
// folder that leads out must never bind what it leads to, writable or not. And two commands of one
// workspace share the stand-ins that keep run-later files from being made. Every command here is
// approved in advance: the sandbox alone is the boundary. Each check looks at the target itself.
let runtime: TestRuntime;
let workspace: string;
let outside: string;

beforeAll(async () => {
  workspace = makeTempDir("ducklm-links-ws-");
  // Outside the workspace, where the sandbox shows the host's files read-only (as root, /var/lib; else a
  // temporary folder, which the sandbox hides): bound through a link, the host's folder would cover that.
  outside = process.getuid?.() === 0 ? mkdtempSync("/var/lib/ducklm-links-outside-") : makeTempDir("ducklm-links-outside-");
  // Readable only by its owner: as root, the sandbox hides such a file (only root may read it).
  writeFileSync(join(outside, "secret.txt"), "outside-secret-7f3a9\n", { mode: 0o600 });
  mkdirSync(join(outside, "apt"));
  runtime = createTestRuntime({ workspace, runtime: { timeouts: { step_ms: 20_000 }, retry: { max_step_retries: 0 }, scheduler: { max_running_tasks: 4 } } });
  await runtime.ready();
}, 60_000);

afterAll(async () => {
  await runtime?.dispose();
  rmSync(outside, { recursive: true, force: true });
});

async function run(command: string): Promise<{ state: string; output: string }> {
  const outcome = await runtime.loop.submit({ text: `run \`${command}\``, auto_approve: ["unknown"] }).done;
  if (outcome.state === "awaiting_permission") runtime.loop.cancel(outcome.task_id);
  const result = runtime.store.listEvents(outcome.task_id).find((event) => event.type === "tool-result")?.payload.result as { output: string } | undefined;
  return { state: outcome.state, output: result?.output ?? "" };
}

describe("links a task leaves for DuckLM's bind mounts", () => {
  it("runs confined (bubblewrap)", () => {
    expect(runtime.sandbox.kind).toBe("bwrap");
  });

  it("a gitdir through a link out of the workspace binds nothing of the outside, read-only or writable", async () => {
    await run(`mkdir -p sub1 && printf 'gitdir: ${workspace}/evil/apt\\n' > sub1/.git && ln -sfn ${relative(workspace, outside)} evil`);
    await run(`mkdir -p sub2 && printf 'gitdir: ${workspace}/evil2\\n' > sub2/.git && ln -sfn ${relative(workspace, outside)} evil2`);
    // Paths put together at run time: the classifier cannot follow them, only the sandbox stands in the way.
    // The pinned parent of `evil/apt` would have been the host's folder, bound writable.
    const wrote = await run(`python3 -c "import os; [open(os.path.join(d, 'planted.txt'), 'w').write('pwned') for d in ('ev' + 'il', 'ev' + 'il2')]"; cat ev''il/secret.txt ev''il2/secret.txt`);
    expect(wrote.state).not.toBe("awaiting_permission");
    expect(wrote.output).not.toContain("outside-secret-7f3a9");
    expect(readdirSync(outside).sort()).toEqual(["apt", "secret.txt"]);
  }, 120_000);

  it("an absolute link as a gitdir does not stop later commands from starting", async () => {
    await run(`mkdir -p sub3 && printf 'gitdir: ${workspace}/abs\\n' > sub3/.git && ln -sfn /nonexistent/far abs`);
    const after = await run("echo still-running");
    expect(after.state).toBe("completed");
    expect(after.output).toContain("still-running");
  }, 120_000);

  it("a run-later entry that is a link out is not bound over what it names", async () => {
    await run(`ln -sfn ${relative(workspace, outside)} .vscode`);
    const read = await run("cat .vscode/secret.txt");
    expect(read.output).not.toContain("outside-secret-7f3a9");
  }, 120_000);
});

describe("two commands of one workspace and its stand-ins", () => {
  it("a command that ends does not take the stand-ins from under one still running", async () => {
    const fresh = makeTempDir("ducklm-links-race-");
    const racing = createTestRuntime({ workspace: fresh, runtime: { timeouts: { step_ms: 20_000 }, retry: { max_step_retries: 0 } } });
    await racing.ready();
    try {
      const first = racing.loop.submit({ text: "run `sleep 2`", auto_approve: ["unknown"] }).done;
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const second = racing.loop.submit({
        text: `run \`sleep 3; mkdir .git; echo 'ref: refs/heads/main' > .git/HEAD; mkdir .git/objects .git/refs; touch .envrc; echo 'ref: refs/heads/main' > HEAD; mkdir -p objects refs/heads; printf '[core]\\n\\tbare = false\\n' > config; ls -a\``,
        auto_approve: ["unknown"],
      }).done;
      await Promise.all([first, second]);
      expect(existsSync(join(fresh, ".git", "HEAD"))).toBe(false);
      expect(existsSync(join(fresh, ".git", "objects"))).toBe(false);
      // Nor the workspace itself made a repository while the first command's `.git` stand-in stood:
      // its `config`, `objects/` and `refs/` are ordinary files without a HEAD.
      expect(existsSync(join(fresh, "HEAD")) ? readFileSync(join(fresh, "HEAD"), "utf8") : "").toBe("");
      // Stand-ins are gone once every command ended, and nothing was made in their place.
      expect(readdirSync(fresh).filter((name) => name.startsWith("."))).toEqual([]);
    } finally {
      await racing.dispose();
    }
  }, 120_000);
});

describe("the folders that hold a stand-in", () => {
  it("cannot be moved aside to make the missing hooks folder a repository names", async () => {
    const repository = makeTempDir("ducklm-links-hooks-");
    execFileSync("git", ["init", "-q"], { cwd: repository });
    execFileSync("git", ["config", "core.hooksPath", ".husky/_"], { cwd: repository });
    const hooked = createTestRuntime({ workspace: repository, runtime: { timeouts: { step_ms: 20_000 }, retry: { max_step_retries: 0 } } });
    await hooked.ready();
    try {
      const outcome = await hooked.loop.submit({ text: "run `mv .husky .h_old; mkdir -p .husky/_ && printf '#!/bin/sh\\ntouch MARK\\n' > .husky/_/pre-commit`", auto_approve: ["unknown"] }).done;
      expect(outcome.state).not.toBe("awaiting_permission");
      expect(existsSync(join(repository, ".husky", "_", "pre-commit"))).toBe(false);
      expect(existsSync(join(repository, ".h_old"))).toBe(false);
    } finally {
      await hooked.dispose();
    }
  }, 120_000);
});
