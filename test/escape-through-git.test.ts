import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { workspaceRepositoryPaths } from "../src/permissions/git-repository.js";
import { bubblewrapShell, SET_ASIDE_SUFFIX } from "../src/tools/shell-sandbox.js";
import { createTestRuntime, makeTempDir, type TestRuntime } from "./helpers/test-runtime.js";
import { runConfined } from "./helpers/test-tools.js";

// Ways a task gets code run without a question through git, which obeys whatever repository it finds,
// and through what a sandboxed command may leave for the user's own git to read later. Each attack
// aims at a marker file: it must not appear, and the repositories it aims at must not change.
let runtime: TestRuntime;
let workspace: string;
let head: string;

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", args, { cwd, encoding: "utf8", env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_AUTHOR_NAME: "t", GIT_AUTHOR_EMAIL: "t@x", GIT_COMMITTER_NAME: "t", GIT_COMMITTER_EMAIL: "t@x" } });
}

beforeAll(async () => {
  workspace = makeTempDir("ducklm-git-escape-");
  git(workspace, "init", "-q");
  writeFileSync(join(workspace, "notes.txt"), "one\n");
  git(workspace, "add", "notes.txt");
  git(workspace, "commit", "-qm", "first");
  head = git(workspace, "rev-parse", "HEAD").trim();
  mkdirSync(join(workspace, "d1"));
  runtime = createTestRuntime({ workspace, runtime: { timeouts: { step_ms: 15_000 }, retry: { max_step_retries: 0 } } });
  await runtime.ready();
}, 60_000);

afterAll(async () => {
  await runtime?.dispose();
});

async function attempt(command: string, approve: Array<"unknown" | "network"> = []): Promise<{ state: string; output: string }> {
  const outcome = await runtime.loop.submit({ text: `run \`${command}\``, auto_approve: approve }).done;
  if (outcome.state === "awaiting_permission") runtime.loop.cancel(outcome.task_id);
  const result = runtime.store.listEvents(outcome.task_id).find((event) => event.type === "tool-result")?.payload.result as { output: string } | undefined;
  return { state: outcome.state, output: result?.output ?? "" };
}

const marker = (name: string) => join(workspace, name);

describe("git obeys no repository a task made", () => {
  it("runs confined (bubblewrap)", () => {
    expect(runtime.sandbox.kind).toBe("bwrap");
  });

  const bareRepository = (folder: string, markerName: string) =>
    `mkdir -p ${folder}/objects/info ${folder}/refs ${folder}/info && echo ${head} > ${folder}/HEAD && echo ../../.git/objects > ${folder}/objects/info/alternates && echo '* diff=x' > ${folder}/info/attributes && printf '[diff "x"]\\n\\ttextconv = "id > ${marker(markerName)}; cat"\\n' > ${folder}/config`;

  it("asks before git reads a repository built earlier in the same line", async () => {
    const result = await attempt(`${bareRepository("sub", "PWNED-same-line")} && cd sub && git log -p`);
    expect(result.state).toBe("awaiting_permission");
    expect(existsSync(marker("PWNED-same-line"))).toBe(false);
  });

  it("sets aside a repository an earlier step built, so git never obeys its config", async () => {
    const built = await attempt(bareRepository("sub2", "PWNED-later"));
    expect(built.state).toBe("completed");
    // Set aside when the command ended: without its HEAD, git takes it for a plain folder (and
    // finds the workspace's own repository above it), so nothing of its config runs.
    expect(existsSync(join(workspace, "sub2", "HEAD"))).toBe(false);
    expect(existsSync(join(workspace, "sub2", `HEAD${SET_ASIDE_SUFFIX}`))).toBe(true);
    const approved = await attempt("cd sub2 && git log -p", ["unknown"]);
    expect(approved.output).not.toContain("PWNED");
    expect(existsSync(marker("PWNED-later"))).toBe(false);
  });

  it("asks before git runs in a nested repository", async () => {
    mkdirSync(join(workspace, "inner"), { recursive: true });
    git(join(workspace, "inner"), "init", "-q");
    expect((await attempt("cd inner && git status")).state).toBe("awaiting_permission");
  });
});

describe("what a confined command leaves for the user's own git", () => {
  it("cannot write the hooks folder or an included config that a nested repository's config names", async () => {
    const nested = makeTempDir("ducklm-nested-pointers-");
    const sub = join(nested, "sub");
    mkdirSync(join(sub, ".husky"), { recursive: true });
    git(sub, "init", "-q");
    git(sub, "config", "core.hooksPath", ".husky");
    writeFileSync(join(sub, ".husky", "pre-commit"), "#!/bin/sh\nexit 0\n");
    writeFileSync(join(nested, "shared.inc"), "[user]\n\tname = t\n");
    git(sub, "config", "include.path", "../../shared.inc");
    const sandbox = bubblewrapShell({ hiddenPaths: [] });
    try {
      const output = await runConfined(sandbox, "echo 'touch /tmp/pwned' >> sub/.husky/pre-commit; echo '[core]' >> shared.inc; touch sub/.husky/post-commit; echo done", nested);
      expect(output).toMatch(/Read-only file system/);
      expect(readFileSync(join(sub, ".husky", "pre-commit"), "utf8")).toBe("#!/bin/sh\nexit 0\n");
      expect(readFileSync(join(nested, "shared.inc"), "utf8")).toBe("[user]\n\tname = t\n");
      expect(existsSync(join(sub, ".husky", "post-commit"))).toBe(false);
    } finally {
      await sandbox.dispose();
    }
  });

  it("cannot write the .git of a repository nested in dependencies, however the path is spelt", async () => {
    const nested = join(workspace, "node_modules", "pkg");
    mkdirSync(nested, { recursive: true });
    git(nested, "init", "-q");
    const config = join(nested, ".git", "config");
    const before = readFileSync(config, "utf8");
    for (const path of ["node_modules/pkg/.git/config", "d*/../node_modules/pkg/.git/config"]) {
      const result = await attempt(`printf '[core]\\n\\tfsmonitor = "id > ${marker("FSM")}"\\n' >> ${path}`, ["unknown"]);
      expect(result.output).toMatch(/Read-only file system|Permission denied/);
    }
    expect(readFileSync(config, "utf8")).toBe(before);
  });

  it("cannot carry a nested repository's read-only .git away by renaming the folder above it", async () => {
    const config = join(workspace, "inner", ".git", "config");
    const before = readFileSync(config, "utf8");
    const result = await attempt("mv inner inner_x && mkdir inner && cp -a inner_x/. inner/ && printf '[core]\\n\\tfsmonitor = x\\n' >> inner/.git/config", ["unknown"]);
    expect(result.output).toMatch(/busy|Read-only|Permission denied/i);
    expect(existsSync(join(workspace, "inner_x"))).toBe(false);
    expect(readFileSync(config, "utf8")).toBe(before);
  });

  it("cannot write the hooks folder the repository names (core.hooksPath), with the shell or the file tools", async () => {
    mkdirSync(join(workspace, ".husky"), { recursive: true });
    writeFileSync(join(workspace, ".husky", "pre-commit"), "npm test\n");
    git(workspace, "config", "core.hooksPath", ".husky");
    try {
      expect(workspaceRepositoryPaths(workspace)).toEqual([join(workspace, ".husky")]);
      const result = await attempt(`echo 'id > ${marker("HOOKED")}' >> .husky/pre-commit`, ["unknown"]);
      expect(result.output).toMatch(/Read-only file system|Permission denied/);
      const written = await runtime.tools.run("file_write", { path: ".husky/pre-commit", content: "id\n" }, {
        signal: new AbortController().signal,
        workspace,
        timeoutMs: 5_000,
        outputCapBytes: 65_536,
        fileReadMaxBytes: 1_000_000,
        taskId: "hooks",
        // What the runtime adds for each call (call-tool.ts).
        protectedPaths: [...runtime.protectedPaths, ...workspaceRepositoryPaths(workspace)],
        sandbox: runtime.sandbox,
      });
      expect(written.ok).toBe(false);
      expect(readFileSync(join(workspace, ".husky", "pre-commit"), "utf8")).toBe("npm test\n");
    } finally {
      git(workspace, "config", "--unset", "core.hooksPath");
    }
  });

  it("cannot write a hooks folder named in any form git reads: one line, continued, or in an included file the task could write", async () => {
    const configFile = join(workspace, ".git", "config");
    const original = readFileSync(configFile, "utf8");
    // An include the repository's config names, lying in the workspace, names a second hooks folder.
    writeFileSync(join(workspace, "team.gitconfig"), "[core]\n\thooksPath = .team-hooks\n");
    writeFileSync(configFile, `${original}[core] hooksPath = .one-line\n[include]\n\tpath = ../team.gitconfig\n[core]\n\thooksPath = .con\\\ntinued\n`);
    const folders = [".one-line", ".team-hooks", ".continued"];
    // git itself takes the last of them; each could be the one in force once the file changes.
    expect(git(workspace, "config", "--includes", "--get-all", "core.hooksPath").trim().split("\n")).toEqual(folders);
    for (const folder of folders) {
      mkdirSync(join(workspace, folder), { recursive: true });
      writeFileSync(join(workspace, folder, "pre-commit"), "npm test\n");
    }
    try {
      expect(workspaceRepositoryPaths(workspace)).toEqual(expect.arrayContaining(folders.map((folder) => join(workspace, folder))));
      for (const folder of folders) {
        const outcome = await runtime.loop.submit({ text: `write file ${folder}/pre-commit: id > ${marker("HOOKED")}` }).done;
        expect(outcome.state).toBe("failed");
        const shell = await attempt(`echo 'id > ${marker("HOOKED")}' >> ${folder}/pre-commit`, ["unknown"]);
        expect(shell.output).toMatch(/Read-only file system|Permission denied/);
        expect(readFileSync(join(workspace, folder, "pre-commit"), "utf8")).toBe("npm test\n");
      }
    } finally {
      writeFileSync(configFile, original);
    }
  });

  it("is not held up by an included config a task swapped for a FIFO or /dev/zero", async () => {
    const configFile = join(workspace, ".git", "config");
    const original = readFileSync(configFile, "utf8");
    writeFileSync(configFile, `${original}[include]\n\tpath = ../stuck.gitconfig\n[include]\n\tpath = ../endless.gitconfig\n`);
    // A FIFO nobody writes (reading it would wait for ever) and a link to an endless device.
    execFileSync("mkfifo", [join(workspace, "stuck.gitconfig")]);
    symlinkSync("/dev/zero", join(workspace, "endless.gitconfig"));
    try {
      const started = Date.now();
      // Both are kept read-only for the task's commands, as any config the repository includes from the workspace.
      expect(workspaceRepositoryPaths(workspace).sort()).toEqual([join(workspace, "endless.gitconfig"), join(workspace, "stuck.gitconfig")].map((path) => realpathSync(dirname(path)) + "/" + basename(path)).sort());
      const outcome = await runtime.loop.submit({ text: "write file notes-copy.txt: still working" }).done;
      expect(outcome.state).toBe("completed");
      expect(readFileSync(join(workspace, "notes-copy.txt"), "utf8")).toBe("still working");
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      writeFileSync(configFile, original);
      for (const name of ["stuck.gitconfig", "endless.gitconfig", "notes-copy.txt"]) rmSync(join(workspace, name), { force: true });
    }
  });

  it("cannot write the hooks folder through a workspace that was given by a symbolic link", async () => {
    mkdirSync(join(workspace, ".husky"), { recursive: true });
    writeFileSync(join(workspace, ".husky", "pre-commit"), "npm test\n");
    git(workspace, "config", "core.hooksPath", ".husky");
    const link = join(makeTempDir("ducklm-git-link-"), "workspace");
    symlinkSync(workspace, link);
    const linked = createTestRuntime({ workspace: link, runtime: { retry: { max_step_retries: 0 } } });
    try {
      await linked.ready();
      const outcome = await linked.loop.submit({ text: `write file .husky/pre-commit: id > ${marker("HOOKED")}` }).done;
      // `.husky/` is a run-later folder as well: the write is asked first, or refused.
      expect(["failed", "awaiting_permission"]).toContain(outcome.state);
      if (outcome.state === "awaiting_permission") linked.loop.cancel(outcome.task_id);
      expect(readFileSync(join(workspace, ".husky", "pre-commit"), "utf8")).toBe("npm test\n");
    } finally {
      await linked.dispose();
      git(workspace, "config", "--unset", "core.hooksPath");
    }
  });

  it("cannot write a git directory the .git file points to inside the workspace (--separate-git-dir)", async () => {
    const separate = makeTempDir("ducklm-separate-git-");
    git(separate, "init", "-q", "--separate-git-dir=.repo");
    const config = join(separate, ".repo", "config");
    const before = readFileSync(config, "utf8");
    const other = createTestRuntime({ workspace: separate, runtime: { retry: { max_step_retries: 0 } } });
    try {
      await other.ready();
      const run = async (approve: Array<"unknown">) => {
        const outcome = await other.loop.submit({ text: `run \`printf '[core]\\n\\tfsmonitor = x\\n' >> .repo/config\``, auto_approve: approve }).done;
        if (outcome.state === "awaiting_permission") other.loop.cancel(outcome.task_id);
        const result = other.store.listEvents(outcome.task_id).find((event) => event.type === "tool-result")?.payload.result as { output: string } | undefined;
        return { state: outcome.state, output: result?.output ?? "" };
      };
      expect((await run([])).state).toBe("awaiting_permission");
      expect((await run(["unknown"])).output).toMatch(/Read-only file system|Permission denied/);
      expect(readFileSync(config, "utf8")).toBe(before);
    } finally {
      await other.dispose();
    }
  });

  it("asks before diff -r follows a link that leads out of the workspace", async () => {
    mkdirSync(join(workspace, "docs"), { recursive: true });
    mkdirSync(join(workspace, "empty"), { recursive: true });
    const outside = makeTempDir("ducklm-outside-");
    writeFileSync(join(outside, "secret.json"), "{\"secret\":\"S3CRET\"}\n");
    symlinkSync(outside, join(workspace, "docs", "link"));
    const result = await attempt("diff -r -N docs empty");
    expect(result.state).toBe("awaiting_permission");
    expect(result.output).not.toContain("S3CRET");
  });

  it("cannot point a worktree's .git file at a repository of its own", async () => {
    const worktree = join(makeTempDir("ducklm-worktree-"), "wt");
    git(workspace, "worktree", "add", "-q", worktree);
    const pointer = readFileSync(join(worktree, ".git"), "utf8");
    const other = createTestRuntime({ workspace: worktree, runtime: { retry: { max_step_retries: 0 } } });
    try {
      await other.ready();
      const outcome = await other.loop.submit({ text: "run `echo gitdir: /tmp/evil > .git`", auto_approve: ["unknown"] }).done;
      const result = other.store.listEvents(outcome.task_id).find((event) => event.type === "tool-result")?.payload.result as { output: string } | undefined;
      expect(result?.output).toMatch(/Read-only file system|Device or resource busy|Permission denied/);
      expect(readFileSync(join(worktree, ".git"), "utf8")).toBe(pointer);
    } finally {
      await other.dispose();
    }
  });
});

describe("nested repositories a confined command could hide from the search for them", () => {
  const plantFsmonitor = (config: string) => `printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> ${config} 2>&1`;

  it("cannot write the .git of a repository nested however deep", async () => {
    const space = makeTempDir("ducklm-deep-repo-");
    const deep = join(space, "a", "b", "c", "d", "e", "f", "g");
    mkdirSync(deep, { recursive: true });
    git(deep, "init", "-q");
    const before = readFileSync(join(deep, ".git", "config"), "utf8");
    const sandbox = bubblewrapShell({ hiddenPaths: [] });
    const printed = await runConfined(sandbox, `${plantFsmonitor("a/b/c/d/e/f/g/.git/config")}; mkdir -p a/b/c/d/e/f/g/.git/hooks && echo x > a/b/c/d/e/f/g/.git/hooks/pre-commit 2>&1; true`, space);
    expect(printed).toMatch(/Read-only file system/);
    expect(readFileSync(join(deep, ".git", "config"), "utf8")).toBe(before);
    expect(existsSync(join(deep, ".git", "hooks", "pre-commit"))).toBe(false);
    await sandbox.dispose();
  }, 60_000);

  it("refuses to run beside more repositories than it protects, rather than leave the real one writable", async () => {
    const space = makeTempDir("ducklm-many-repos-");
    // Decoys first in the search's order; the real repository last and deep.
    for (let index = 0; index < 1100; index += 1) {
      mkdirSync(join(space, "decoys", `r${index}`, ".git"), { recursive: true });
      writeFileSync(join(space, "decoys", `r${index}`, ".git", "HEAD"), "ref: refs/heads/main\n");
    }
    const real = join(space, "zz", "y", "x", "w", "v", "real");
    mkdirSync(real, { recursive: true });
    git(real, "init", "-q");
    const before = readFileSync(join(real, ".git", "config"), "utf8");
    const sandbox = bubblewrapShell({ hiddenPaths: [] });
    await expect(runConfined(sandbox, plantFsmonitor("zz/y/x/w/v/real/.git/config"), space)).rejects.toThrow(/more than 1,024 git repositories/);
    expect(readFileSync(join(real, ".git", "config"), "utf8")).toBe(before);
    await sandbox.dispose();
  }, 120_000);

  it("refuses to run in a workspace of more folders than it searches", async () => {
    const space = makeTempDir("ducklm-many-folders-");
    const real = join(space, "zz", "real");
    mkdirSync(real, { recursive: true });
    git(real, "init", "-q");
    const before = readFileSync(join(real, ".git", "config"), "utf8");
    execFileSync("python3", ["-c", "import os\nfor i in range(100001): os.mkdir('pad%d' % i)"], { cwd: space });
    const sandbox = bubblewrapShell({ hiddenPaths: [] });
    await expect(runConfined(sandbox, plantFsmonitor("zz/real/.git/config"), space)).rejects.toThrow(/more than 100,000 folders/);
    expect(readFileSync(join(real, ".git", "config"), "utf8")).toBe(before);
    await sandbox.dispose();
  }, 180_000);

  it.runIf(process.getuid?.() !== 0)("refuses to run when a command has made a folder unreadable to the search", async () => {
    const space = makeTempDir("ducklm-hidden-repo-");
    const real = join(space, "locked", "real");
    mkdirSync(real, { recursive: true });
    git(real, "init", "-q");
    const before = readFileSync(join(real, ".git", "config"), "utf8");
    const sandbox = bubblewrapShell({ hiddenPaths: [] });
    try {
      await runConfined(sandbox, "chmod 000 locked", space);
      await expect(runConfined(sandbox, `chmod 755 locked; ${plantFsmonitor("locked/real/.git/config")}`, space)).rejects.toThrow(/cannot read the folder .*locked/);
    } finally {
      chmodSync(join(space, "locked"), 0o755);
    }
    expect(readFileSync(join(real, ".git", "config"), "utf8")).toBe(before);
    await sandbox.dispose();
  }, 60_000);

  it("cannot write a bare repository's config or hooks", async () => {
    const space = makeTempDir("ducklm-bare-repo-");
    const bare = join(space, "mirror.git");
    execFileSync("git", ["init", "-q", "--bare", bare]);
    rmSync(join(bare, "hooks"), { recursive: true, force: true });
    const before = readFileSync(join(bare, "config"), "utf8");
    const sandbox = bubblewrapShell({ hiddenPaths: [] });
    const printed = await runConfined(sandbox, `${plantFsmonitor("mirror.git/config")}; mkdir -p mirror.git/hooks 2>&1; printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > mirror.git/hooks/post-update 2>&1; true`, space);
    expect(printed).toMatch(/Read-only file system/);
    expect(readFileSync(join(bare, "config"), "utf8")).toBe(before);
    expect(existsSync(join(bare, "hooks", "post-update"))).toBe(false);
    await sandbox.dispose();
  }, 60_000);
});

describe("what bash reads otherwise than it looks", () => {
  it("hides no command behind a $'…' string bash ends early, a carriage return or another shell's reading", async () => {
    for (const [command, name] of [
      ["echo $'\\\\' ; cp notes.txt PWN_ANSI ; echo ' #'", "PWN_ANSI"],
      ["ls \r# ; cp notes.txt PWN_CR", "PWN_CR"],
      ["sh -c \"echo \\$'a\\\\' ; cp notes.txt PWN_DASH ; echo ' #'\"", "PWN_DASH"],
    ]) {
      expect((await attempt(command!)).state, command).toBe("awaiting_permission");
      expect(existsSync(marker(name!))).toBe(false);
    }
  });
});

describe("paths a task could hide its way out in", () => {
  it("does not let a glob followed by .. read outside the workspace or into .git unasked", async () => {
    for (const command of ["cat d*/../../../../../../etc/hostname", "cat */../.git/config", "cat d*/../.git/HEAD"]) {
      expect((await attempt(command)).state, command).toBe("awaiting_permission");
    }
  });

  it("does not give commands the directory DuckLM was started from as $OLDPWD, nor let `cd -` go there unasked", async () => {
    const saved = process.env.OLDPWD;
    process.env.OLDPWD = "/etc";
    try {
      expect((await attempt("cd - && ls -la")).state).toBe("awaiting_permission");
      const approved = await attempt("cd - ; pwd", ["unknown"]);
      expect(approved.output).not.toContain("/etc");
      expect(approved.output).toMatch(/OLDPWD not set/);
    } finally {
      if (saved === undefined) delete process.env.OLDPWD;
      else process.env.OLDPWD = saved;
    }
  });
});
