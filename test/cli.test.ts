import { spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import pino from "pino";
import { openStores } from "../src/state/open-stores.js";
import { endlessFixtureModel } from "./helpers/fixture-models.js";
import { makeTempDir } from "./helpers/test-runtime.js";

// Resolved here, because `--import tsx` would be looked up from the child's working directory.
const tsxLoader = import.meta.resolve("tsx");

const root = resolve(import.meta.dirname, "..");
const home = makeTempDir("ducklm-cli-home-");
const workspace = makeTempDir("ducklm-cli-ws-");
// The terminal's questions are what these tests are about: a command no rule covers is asked here,
// as permissions.json "confined": "ask" says, instead of run by the sandbox's decision.
const askingConfig = makeTempDir("ducklm-cli-config-");
writeFileSync(join(askingConfig, "permissions.json"), JSON.stringify({ confined: "ask" }));
afterAll(() => {
  rmSync(home, { recursive: true, force: true });
  rmSync(workspace, { recursive: true, force: true });
  rmSync(askingConfig, { recursive: true, force: true });
});

function ducklm(args: string[], options: { cwd?: string; bin?: boolean; home?: string } = {}) {
  const entry = options.bin ? [join(root, "bin/ducklm.js")] : ["--import", tsxLoader, join(root, "src/cli/main.ts")];
  const result = spawnSync(process.execPath, [...entry, ...args], {
    cwd: options.cwd ?? workspace,
    env: { ...process.env, DUCKLM_HOME: options.home ?? home, DUCKLM_CONFIG: askingConfig },
    encoding: "utf8",
    timeout: 60_000,
    stdio: ["ignore", "pipe", "pipe"],
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe("ducklm CLI", () => {
  it("`ducklm run \"read file README.md\"` completes with no model and shows the file's first lines", () => {
    const result = ducklm(["run", "read file README.md"], { cwd: root, bin: true });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("✔ completed");
    expect(result.stdout).toContain("# DuckLM");
  });

  it("prints one JSON event a line with --json, numbered without gaps", () => {
    writeFileSync(join(workspace, "x.txt"), "hello\n");
    const result = ducklm(["run", "--json", "read file x.txt"]);
    expect(result.code).toBe(0);
    const events = result.stdout.trim().split("\n").map((line) => JSON.parse(line));
    expect(events[0].type).toBe("task-received");
    expect(events.at(-1).type).toBe("task-completed");
    expect(events.map((event: { seq: number }) => event.seq)).toEqual(events.map((_: unknown, i: number) => i + 1));
  });

  it("exits non-zero when the task fails", () => {
    const result = ducklm(["run", "read file missing.txt"]);
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/✘ failed DUCK_ERR_FILE_NOT_FOUND/);
  });

  it("refuses a bad task before it starts anything: a task another run left unfinished is not resumed for it", () => {
    const leftHome = makeTempDir("ducklm-cli-left-");
    const stores = openStores(join(leftHome, "ducklm.sqlite3"), { logger: pino({ level: "silent" }) });
    const left = stores.tasks.createTask({ text: "left running by a run that crashed", workspace });
    stores.tasks.append(left.task_id, "task-started", {});
    stores.tasks.flush();
    const before = stores.tasks.listEvents(left.task_id);
    stores.database.close();
    const result = ducklm(["run", "--session", "s".repeat(500), "read file x.txt"], { home: leftHome });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("session_id");
    expect(result.stdout).not.toContain("resuming");
    // A workspace that is not there: the same.
    const noWorkspace = ducklm(["--workspace", join(leftHome, "no-such-folder"), "run", "read file x.txt"], { home: leftHome });
    expect(noWorkspace.code).toBe(2);
    expect(noWorkspace.stderr).toContain(`workspace ${join(leftHome, "no-such-folder")} is not a directory`);
    expect(noWorkspace.stdout + noWorkspace.stderr).not.toContain("resum");
    // --no-resume: the run does its own task and leaves the other as it is, saying so.
    const own = ducklm(["run", "--no-resume", "read file no-such-file.txt"], { home: leftHome });
    expect(own.stderr).toMatch(/1 unfinished task\(s\) from an earlier run \(resume: never\)/);
    expect(own.stdout).toContain("DUCK_ERR_FILE_NOT_FOUND");
    const after = openStores(join(leftHome, "ducklm.sqlite3"), { logger: pino({ level: "silent" }) });
    try {
      expect(after.tasks.listEvents(left.task_id)).toEqual(before);
      expect(after.tasks.listTasks().map((task) => task.id)).toContain(left.task_id);
    } finally {
      after.database.close();
      rmSync(leftHome, { recursive: true, force: true });
    }
  });

  it("stops its task when the program reading its output stops (`ducklm run … | head -1`)", async () => {
    const pipeHome = makeTempDir("ducklm-cli-pipe-");
    // A model that writes until it is stopped: output goes on while the task runs.
    const pipeConfig = makeTempDir("ducklm-cli-pipe-config-");
    const role = { file: endlessFixtureModel(), backend: "cpu", gpu_layers: 0, context_size: 2048, max_tokens: 4096, threads: 1 };
    writeFileSync(join(pipeConfig, "models.json"), JSON.stringify({ threads: 1, roles: { thinker: role, json_compiler: role, embeddings: null } }));
    const child = spawn(process.execPath, ["--import", tsxLoader, join(root, "src/cli/main.ts"), "run", "--json", "tell me about ducks"], {
      cwd: workspace,
      env: { ...process.env, DUCKLM_HOME: pipeHome, DUCKLM_CONFIG: pipeConfig },
      stdio: ["ignore", "pipe", "pipe"],
    });
    // The first line read, the reader goes, as `head -1` does.
    await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
    child.stdout.destroy();
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    expect(code).toBe(130);
    const listed = ducklm(["tasks", "--json"], { home: pipeHome }).stdout.trim().split("\n").map((line) => JSON.parse(line) as { state: string });
    expect(listed.map((task) => task.state)).toEqual(["cancelled"]);
    rmSync(pipeHome, { recursive: true, force: true });
    rmSync(pipeConfig, { recursive: true, force: true });
  }, 120_000);

  it("exits 3 when a task waits for permission and no terminal can answer", () => {
    const result = ducklm(["run", "run `cp a.txt b.txt`"]);
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(/waiting for permission/);
  });

  it("lists tasks and a task's events", () => {
    const list = ducklm(["tasks", "--json"]);
    expect(list.code).toBe(0);
    const tasks = list.stdout.trim().split("\n").map((line) => JSON.parse(line));
    expect(tasks.length).toBeGreaterThanOrEqual(3);
    const completed = tasks.find((task: { state: string }) => task.state === "completed");
    const events = ducklm(["events", "--task", completed.id, "--since", "2", "--json"]);
    expect(events.code).toBe(0);
    const parsed = events.stdout.trim().split("\n").map((line) => JSON.parse(line));
    expect(parsed[0].seq).toBe(2);
    expect(parsed.at(-1).type).toBe("task-completed");
    // 0, as over HTTP: from the start.
    const all = ducklm(["events", "--task", completed.id, "--since", "0", "--json"]);
    expect(all.code).toBe(0);
    expect(JSON.parse(all.stdout.split("\n")[0]!).seq).toBe(1);
    // As text, each event's line says what it holds, not just its type.
    const text = ducklm(["events", "--task", completed.id]).stdout.trim().split("\n");
    expect(text[0]).toMatch(new RegExp(`^# {2}1 \\S+ task-received {2}task ${completed.id} received: \\S`));
    expect(text.every((line) => !line.includes("\u001b"))).toBe(true);
  });

  it("answers bad input with a clear error and exit code 2", () => {
    expect(ducklm(["events", "--task", "no-such-task"])).toMatchObject({ code: 2 });
    expect(ducklm(["help", "bogus"])).toMatchObject({ code: 2, stderr: expect.stringContaining("error: unknown command 'bogus'") });
    expect(ducklm(["events", "--task", "no-such-task"]).stderr).toMatch(/DUCK_ERR_TASK_NOT_FOUND/);
    expect(ducklm(["tasks", "--state", "sleeping"]).stderr).toMatch(/--state must be one of/);
    expect(ducklm(["run", "   "]).stderr).toMatch(/task text is empty/);
    expect(ducklm(["frobnicate"]).code).toBe(2);
    expect(ducklm(["run", "-", "extra"])).toMatchObject({ code: 2, stderr: expect.stringContaining("`-` reads the task from standard input and takes no other words") });
    expect(ducklm(["--home", "", "tasks"])).toMatchObject({ code: 2, stderr: expect.stringContaining("--home is empty") });
    expect(ducklm(["--config", "", "tasks"])).toMatchObject({ code: 2, stderr: expect.stringContaining("--config is empty") });
    // A directory where a file is to be read: refused at once, not tried three times.
    const folderRead = ducklm(["run", "read file ."]);
    expect(folderRead.code).toBe(1);
    expect(folderRead.stdout).toContain("is not a regular file");
    expect(folderRead.stdout).not.toMatch(/retry in/);
  });

  it("prints its version", () => {
    const version = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version;
    for (const flag of ["--version", "-V"]) expect(ducklm([flag], { bin: true })).toMatchObject({ code: 0, stdout: `${version}\n` });
  });

  it("names a home it cannot use, and stops at once (a folder under a file, inside /proc)", () => {
    const file = join(workspace, "not-a-folder");
    writeFileSync(file, "x");
    for (const unusable of [join(file, "home"), "/proc/no-such-home"]) {
      const result = ducklm(["tasks", "--home", unusable]);
      expect(result.code, unusable).toBe(1);
      expect(result.stderr).toContain("DUCK_ERR_STORAGE");
      expect(result.stderr).toContain(`cannot create the folder ${unusable}`);
      expect(result.stderr).toContain("--home");
      expect(result.stderr).not.toMatch(/ENOTDIR|ENOENT|mkdir '/);
    }
    // doctor says it once, under the data directory; the database line does not repeat it.
    const doctor = ducklm(["doctor", "--home", join(file, "home")]);
    expect(doctor.code).toBe(1);
    expect(doctor.stdout.match(/cannot create the folder/g)).toHaveLength(1);
    expect(doctor.stdout).toMatch(/FAIL {2}database +not checked: the database lives in the data directory above/);
    // A file (`--home /dev/null`): refused, and its mode left as it was.
    chmodSync(file, 0o666);
    const onFile = ducklm(["tasks", "--home", file]);
    expect(onFile.code).toBe(1);
    expect(onFile.stderr).toContain(`${file} is not a folder`);
    expect(statSync(file).mode & 0o777).toBe(0o666);
    // Every command names the home itself, in words: not a folder made in it, not an errno.
    for (const args of [["run", "hi"], ["models", "list"], ["db", "check"]]) {
      const result = ducklm([...args, "--home", file]);
      expect(result.code, args.join(" ")).not.toBe(0);
      expect(result.stderr, args.join(" ")).toContain(`${file} is not a folder`);
      expect(result.stderr, args.join(" ")).not.toMatch(/ENOTDIR|\/logs/);
    }
    // A folder that takes no file though it says it may be written (inside /proc): doctor finds it.
    expect(ducklm(["doctor", "--home", "/proc/1/fd"]).stdout).toMatch(/FAIL {2}data directory +\/proc\/1\/fd (takes no new files|cannot be written by this user)/);
  });

  // A read-only home, even for root: the home bound read-only into a bubblewrap namespace.
  const bwrapWorks = spawnSync("bwrap", ["--dev-bind", "/", "/", "true"]).status === 0;
  it.runIf(bwrapWorks)("names a read-only home and the file it could not write", () => {
    const readOnly = makeTempDir("ducklm-ro-home-");
    expect(ducklm(["tasks", "--home", readOnly]).code).toBe(0);
    const result = spawnSync("bwrap", ["--dev-bind", "/", "/", "--ro-bind", readOnly, readOnly, process.execPath, "--import", tsxLoader, join(root, "src/cli/main.ts"), "tasks", "--home", readOnly], {
      cwd: workspace,
      env: { ...process.env, DUCKLM_CONFIG: join(root, "config") },
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("DUCK_ERR_STORAGE");
    expect(result.stderr).toContain(`cannot write ${readOnly}/`);
    expect(result.stderr).toContain("the filesystem is read-only");
    expect(result.stderr).not.toMatch(/EROFS|EACCES/);
    expect(result.stderr).toContain("--home");
  });

  it("takes the task from standard input with `-`, and refuses text that is not UTF-8 instead of changing it", () => {
    const run = (input: Buffer, args: string[]) =>
      spawnSync(process.execPath, ["--import", tsxLoader, join(root, "src/cli/main.ts"), "run", ...args], { cwd: root, env: { ...process.env, DUCKLM_HOME: home, DUCKLM_CONFIG: join(root, "config") }, input, encoding: "utf8", timeout: 60_000 });
    const piped = run(Buffer.from("read file README.md\n"), ["-"]);
    expect(piped.status).toBe(0);
    expect(piped.stdout).toContain("received: read file README.md");
    const latin1 = run(Buffer.from([0x72, 0x65, 0x61, 0x64, 0x20, 0xe9, 0x74, 0xe9]), ["-"]);
    expect(latin1.status).toBe(2);
    expect(latin1.stderr).toContain("not valid UTF-8");
    const argument = run(Buffer.alloc(0), ["read file caf\uFFFD.md"]);
    expect(argument.status).toBe(2);
    expect(argument.stderr).toContain("not valid UTF-8");
  });

  it("says in plain words when the port to serve on is taken", async () => {
    const blocker = createServer();
    const port = await new Promise<number>((resolve) => blocker.listen(0, "127.0.0.1", () => resolve((blocker.address() as AddressInfo).port)));
    try {
      const result = ducklm(["serve", "--port", String(port), "--home", makeTempDir("ducklm-port-home-")]);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(`port ${port} on 127.0.0.1 is already in use`);
      expect(result.stderr).toContain("--port");
    } finally {
      blocker.close();
    }
  });

  it("says in plain words when the address to serve on is no address, and stops at once", () => {
    const result = ducklm(["serve", "--host", "999.1.1.1", "--port", "0", "--home", makeTempDir("ducklm-host-home-")]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("--host 999.1.1.1 is neither an address nor a name this machine can resolve");
    expect(result.stderr).not.toMatch(/getaddrinfo|ENOTFOUND|EAI_AGAIN/);
    // An address, but none of this machine's: said as such, and no warning about serving on it.
    const foreign = ducklm(["serve", "--host", "8.8.8.8", "--port", "0", "--home", makeTempDir("ducklm-host-home-")]);
    expect(foreign.code).toBe(2);
    expect(foreign.stderr).toContain("8.8.8.8 is not an address of this machine");
    expect(foreign.stderr).not.toMatch(/EADDRNOTAVAIL|warning: serving/);
  });

  it("names what is wrong with what replay was given, with exit 2", () => {
    const folder = makeTempDir("ducklm-replay-dir-");
    const cases: Array<[string[], RegExp]> = [
      [["replay"], /give a task id or --file/],
      [["replay", "some-id", "--file", "x.jsonl"], /not both/],
      [["replay", "--file", join(folder, "missing.jsonl")], /missing\.jsonl: no such file/],
      [["replay", "--file", folder], /: a folder, not a recording/],
      [["replay", "--file", join(folder, "object.jsonl")], /object\.jsonl:1: not an event of a task \(\S+ is missing\): give a file written by `ducklm events --json`/],
    ];
    writeFileSync(join(folder, "object.jsonl"), '{"a":1}\n');
    for (const [args, message] of cases) {
      const result = ducklm(args);
      expect(result.code, args.join(" ")).toBe(2);
      expect(result.stderr).toMatch(message);
      expect(result.stderr).not.toMatch(/ENOENT|EISDIR|no task with id $/m);
    }
  });

  it("`ducklm login` links to a server of this home that answers: the other of two, and none once they are gone or the PID is another program's", async () => {
    const serverHome = makeTempDir("ducklm-login-home-");
    const startServer = async () => {
      const child = spawn(process.execPath, ["--import", tsxLoader, join(root, "src/cli/main.ts"), "serve", "--port", "0"], { cwd: workspace, env: { ...process.env, DUCKLM_HOME: serverHome, DUCKLM_CONFIG: join(root, "config") }, stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
      for (let waited = 0; !stdout.includes("Log in by opening"); waited += 100) {
        if (waited > 60_000 || child.exitCode !== null) throw new Error(`serve did not start: ${stdout}`);
        await new Promise((wait) => setTimeout(wait, 100));
      }
      return { child, url: /serving the chat at (\S+)/.exec(stdout)![1]! };
    };
    const exited = (child: ReturnType<typeof spawn>) => new Promise((done) => (child.exitCode !== null ? done(null) : child.once("exit", done)));
    const loginAsync = () =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((done) => {
        const child = spawn(process.execPath, ["--import", tsxLoader, join(root, "src/cli/main.ts"), "login"], { cwd: workspace, env: { ...process.env, DUCKLM_HOME: serverHome, DUCKLM_CONFIG: join(root, "config") } });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
        child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
        child.on("exit", (code) => done({ code, stdout, stderr }));
      });
    const first = await startServer();
    const second = await startServer();
    try {
      expect((await loginAsync()).stdout).toContain(`${second.url}login?code=`);
      // The second stops: its line goes, the first's stays, and its link works in a browser's place.
      second.child.kill("SIGTERM");
      await exited(second.child);
      const afterSecond = await loginAsync();
      expect(afterSecond.code).toBe(0);
      const link = afterSecond.stdout.trim();
      expect(link.startsWith(`${first.url}login?code=`)).toBe(true);
      const redeemed = await fetch(link, { redirect: "manual" });
      expect(redeemed.headers.get("set-cookie")).toMatch(/session=/);
      // Killed outright, the first leaves its line behind; its PID then belongs to another program.
      first.child.kill("SIGKILL");
      await exited(first.child);
      const { servers } = JSON.parse(readFileSync(join(serverHome, "server.json"), "utf8")) as { servers: Array<{ url: string; pid: number }> };
      expect(servers.map((server) => server.url)).toEqual([first.url]);
      writeFileSync(join(serverHome, "server.json"), JSON.stringify({ servers: [{ url: first.url, pid: process.pid }] }));
      const stale = await loginAsync();
      expect(stale.code).toBe(1);
      expect(stale.stderr).toContain("error DUCK_ERR_SERVER_NOT_RUNNING: no DuckLM server is running");
      expect(stale.stdout).toBe("");
    } finally {
      first.child.kill("SIGKILL");
      second.child.kill("SIGKILL");
    }
  }, 180_000);

  it("stops with the file and field when a config file is wrong", () => {
    const config = makeTempDir("ducklm-badconfig-");
    writeFileSync(join(config, "runtime.json"), JSON.stringify({ scheduler: { max_parallel_steps: 0 } }));
    const result = spawnSync(process.execPath, ["--import", tsxLoader, join(root, "src/cli/main.ts"), "tasks"], {
      cwd: workspace,
      env: { ...process.env, DUCKLM_HOME: home, DUCKLM_CONFIG: config },
      encoding: "utf8",
    });
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/runtime\.json: scheduler\.max_parallel_steps: Too small/);
    // The commands that help with it still help: where the files are, and what else is fine.
    const run = (args: string[]) => spawnSync(process.execPath, ["--import", tsxLoader, join(root, "src/cli/main.ts"), ...args], { cwd: workspace, env: { ...process.env, DUCKLM_HOME: home, DUCKLM_CONFIG: config }, encoding: "utf8" });
    const path = run(["config", "path"]);
    expect(path.stdout).toContain(`config   ${config}`);
    // It lists the files in force, the broken one among them, before it says what is wrong.
    expect(path.stdout).toMatch(new RegExp(`runtime\\.json\\s+${join(config, "runtime.json")} {2}\\(over the default\\)`));
    expect(path.stdout).toMatch(/prompts\/system\.md\s+\S+\/config\/prompts\/system\.md {2}\(default\)/);
    expect(path.status).toBe(2);
    expect(path.stderr).toMatch(/runtime\.json: scheduler\.max_parallel_steps/);
    const doctor = run(["doctor"]);
    expect(doctor.status).toBe(1);
    expect(doctor.stdout).toMatch(/FAIL {2}config +.*runtime\.json: scheduler\.max_parallel_steps/);
    expect(doctor.stdout).toMatch(/ok {4}data directory/);
    rmSync(config, { recursive: true, force: true });
  });

  it("says which config files are in force, and shows the settings without the credentials a file holds", () => {
    const config = makeTempDir("ducklm-config-");
    const server = { base_url: "http://127.0.0.1:8/v1", model: "m", api_key_env: "MY_KEY", headers: { Authorization: "Bearer sk-live-123", "X-Org": "${ORG_ID}" } };
    writeFileSync(join(config, "models.json"), JSON.stringify({ roles: { thinker: { server } } }));
    const run = (args: string[]) => spawnSync(process.execPath, ["--import", tsxLoader, join(root, "src/cli/main.ts"), ...args], { cwd: workspace, env: { ...process.env, DUCKLM_HOME: home, DUCKLM_CONFIG: config }, encoding: "utf8" });
    const path = run(["config", "path"]);
    expect(path.status).toBe(0);
    expect(path.stdout).toContain(`config   ${config}`);
    expect(path.stdout).toContain(`data     ${home}`);
    expect(path.stdout).toMatch(new RegExp(`models\\.json\\s+${join(config, "models.json")} {2}\\(over the default\\)\n`));
    expect(path.stdout).toMatch(/runtime\.json\s+\S+\/config\/runtime\.json {2}\(default\)/);
    const shown = run(["config", "show", "models"]);
    expect(shown.status).toBe(0);
    const thinker = (JSON.parse(shown.stdout) as { roles: Record<string, { server: typeof server; backend: string }> }).roles.thinker!;
    expect(thinker.server.headers).toEqual({ Authorization: "(hidden)", "X-Org": "${ORG_ID}" });
    expect(thinker.server.api_key_env).toBe("MY_KEY");
    // Defaults filled in, as the runtime sees them.
    expect(thinker.backend).toBe("auto");
    expect(shown.stdout).not.toContain("sk-live-123");
    writeFileSync(
      join(config, "integrations.json"),
      JSON.stringify({
        mcp: {
          servers: {
            db: { command: "db-mcp", env: { DB_PASS: "pw-typed", LOG_LEVEL: "debug", GITHUB_TOKEN: "${GH_TOKEN}" }, enabled: false },
            remote: { url: "https://mcp.example/api?token=QSECRET&team=ducks", headers: { "X-Session": "sess-typed", "X-Api-Key": "k-typed" }, enabled: false },
          },
        },
      }),
    );
    const integrations = run(["config", "show", "integrations"]);
    expect(integrations.status).toBe(0);
    const servers = (JSON.parse(integrations.stdout) as { mcp: { servers: Record<string, { env: Record<string, string>; url?: string; headers: Record<string, string> }> } }).mcp.servers;
    expect(servers.db!.env).toEqual({ DB_PASS: "(hidden)", LOG_LEVEL: "(hidden)", GITHUB_TOKEN: "${GH_TOKEN}" });
    expect(servers.remote!.url).toBe("https://mcp.example/api?token=hidden&team=ducks");
    expect(servers.remote!.headers).toEqual({ "X-Session": "(hidden)", "X-Api-Key": "(hidden)" });
    for (const typed of ["pw-typed", "QSECRET", "sess-typed", "k-typed"]) expect(integrations.stdout).not.toContain(typed);
    const all = JSON.parse(run(["config", "show"]).stdout) as Record<string, unknown>;
    expect(Object.keys(all)).toEqual(["models", "runtime", "permissions", "integrations"]);
    const wrong = run(["config", "show", "prompts"]);
    expect(wrong.status).toBe(2);
    expect(wrong.stderr).toMatch(/no config file "prompts": choose one of models, runtime, permissions, integrations/);
    rmSync(config, { recursive: true, force: true });
  });
});

describe("ducklm permissions, feedback and --yes", () => {
  it("pre-approves commands no rule covers with --yes, lists and revokes approvals, records feedback", () => {
    writeFileSync(join(workspace, "src.txt"), "data\n");
    const yes = ducklm(["run", "--yes", "run `cp src.txt copy.txt`"]);
    expect(yes.code).toBe(0);
    const noAlways = ducklm(["run", "--yes", "run `rm -f copy.txt`"]);
    expect(noAlways.code).toBe(3);

    // A permissions.json of one's own, with no safety rules in it, still has the bundled ones in force.
    const ownConfig = makeTempDir("ducklm-cli-own-config-");
    writeFileSync(join(ownConfig, "permissions.json"), JSON.stringify({ categories: { normal: [], no_always: [], hard_stop: [] }, network: [] }));
    mkdirSync(join(workspace, "keep"));
    writeFileSync(join(workspace, "keep", "notes.txt"), "kept\n");
    const ownRules = ducklm(["--config", ownConfig, "run", "--yes", "run `rm -r keep`"]);
    expect(ownRules.code).toBe(3);
    expect(ownRules.stdout).toMatch(/no_always/);
    expect(readFileSync(join(workspace, "keep", "notes.txt"), "utf8")).toBe("kept\n");
    // One that says it stands alone is warned about.
    writeFileSync(join(ownConfig, "permissions.json"), JSON.stringify({ extends_bundled: false }));
    expect(ducklm(["--config", ownConfig, "doctor"]).stdout).toMatch(/warn {2}config +.*permissions\.json stands alone/);
    rmSync(ownConfig, { recursive: true, force: true });

    const list = ducklm(["permissions", "list"]);
    expect(list.code).toBe(0);
    const revoke = ducklm(["permissions", "revoke", "no-such-approval"]);
    expect(revoke.code).toBe(2);
    expect(revoke.stderr).toMatch(/no approval with id/);

    const tasks = ducklm(["tasks", "--json", "--state", "completed"]).stdout.trim().split("\n").map((line) => JSON.parse(line));
    const feedback = ducklm(["feedback", "--task", tasks[0].id, "down", "too", "slow"]);
    expect(feedback.code).toBe(0);
    const events = ducklm(["events", "--task", tasks[0].id, "--json"]).stdout.trim().split("\n").map((line) => JSON.parse(line));
    expect(events.at(-1)).toMatchObject({ type: "feedback-received", payload: { rating: "down", comment: "too slow", target: "answer" } });
    expect(ducklm(["feedback", "--task", tasks[0].id, "meh"]).code).toBe(2);
    for (const bad of [["--iteration", "0", "--step", "step-1"], ["--iteration", "two", "--step", "step-1"], ["--iteration", "1"], ["--step", "no-such-step"]]) {
      const refused = ducklm(["feedback", "--task", tasks[0].id, ...bad, "down"]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/DUCK_ERR_INVALID_INPUT/);
    }
  });
});

describe("ducklm run at a terminal", () => {
  it("asks for permission at the prompt and runs the command when allowed", () => {
    writeFileSync(join(workspace, "tty-src.txt"), "x\n");
    // `script` gives the CLI a real terminal; "y" answers the prompt.
    const result = spawnSync("script", ["-qec", `${process.execPath} ${join(root, "bin/ducklm.js")} run 'run \`cp tty-src.txt tty-copy.txt\`'`, "/dev/null"], {
      cwd: workspace,
      // A terminal that takes colour, whatever the environment running the tests says: CI has no TERM, and
      // sets CI, which makes Node report a two-colour terminal.
      env: { ...process.env, DUCKLM_HOME: home, DUCKLM_CONFIG: askingConfig, TERM: "xterm-256color", NO_COLOR: undefined, CI: undefined, FORCE_COLOR: undefined, NODE_DISABLE_COLORS: undefined },
      input: "y\n",
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(result.stdout).toMatch(/Allow cp tty-src.txt tty-copy.txt \[unknown\]\?/);
    // On a terminal, how it ended stands out in colour (the chat test checks NO_COLOR).
    expect(result.stdout).toContain("\u001b[32m✔ completed\u001b[39m");
    expect(result.status).toBe(0);
  });

  it("holds a conversation in `ducklm chat`: two turns in one session, a permission asked inline", () => {
    writeFileSync(join(workspace, "chat-notes.txt"), "ducks like bread\n");
    const result = spawnSync("script", ["-qec", `${process.execPath} ${join(root, "bin/ducklm.js")} chat`, "/dev/null"], {
      cwd: workspace,
      env: { ...process.env, DUCKLM_HOME: home, DUCKLM_CONFIG: askingConfig, NO_COLOR: "1" },
      // Typed ahead: each line waits its turn. A mistyped command is not sent as a task; a typo at the
      // question is asked about again, and the "y" after it answers.
      input: "read file chat-notes.txt\n/bogus\nrun `cp chat-notes.txt chat-copy.txt`\nyse\ny\n/exit\n",
      encoding: "utf8",
      timeout: 90_000,
    });
    expect(result.status).toBe(0);
    expect(result.stdout).toContain("DuckLM chat — conversation chat-");
    expect(result.stdout.match(/✔ completed/g)).toHaveLength(2);
    expect(result.stdout).toMatch(/Allow cp chat-notes\.txt chat-copy\.txt \[unknown\]\?/);
    expect(result.stdout).toContain("unknown command /bogus");
    expect(result.stdout).toContain("Please answer y (yes, once), a (always) or n (no; Enter alone is no)");
    expect(readFileSync(join(workspace, "chat-copy.txt"), "utf8")).toBe("ducks like bread\n");
    const ids = [...result.stdout.matchAll(/▸ task (\S+) received/g)].map((match) => match[1]!);
    expect(ids).toHaveLength(2);
    const sessions = ids.map((id) => (JSON.parse(ducklm(["events", "--task", id, "--json"]).stdout.split("\n")[0]!) as { payload: { session_id: string } }).payload.session_id);
    expect(sessions[0]).toMatch(/^chat-/);
    expect(sessions[1]).toBe(sessions[0]);
    // NO_COLOR: no escape codes.
    expect(result.stdout.includes("\u001b[1m")).toBe(false);
  });

  /** `ducklm chat` on a real terminal (`script`): what it printed so far, and a wait for what it will print. */
  function chatOnTerminal(args: string[] = []) {
    const child = spawn("script", ["-qec", `${process.execPath} ${join(root, "bin/ducklm.js")} chat ${args.join(" ")}`, "/dev/null"], {
      cwd: workspace,
      env: { ...process.env, DUCKLM_HOME: home, DUCKLM_CONFIG: askingConfig, NO_COLOR: "1" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
    /** Until `pattern` has been printed `count` times. */
    const waitFor = async (pattern: RegExp, count = 1) => {
      const every = new RegExp(pattern.source, "g");
      for (let waited = 0; (output.match(every) ?? []).length < count; waited += 100) {
        if (waited > 60_000) throw new Error(`no ${pattern} (×${count}): ${output}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    };
    return { child, exited, waitFor, output: () => output };
  }

  it("takes SIGINT from another program in `ducklm chat` as Ctrl-C: it stops the running task, and at the prompt ends the session", async () => {
    const chat = chatOnTerminal(["--yes"]);
    // The CLI's own process, below script and its shell.
    const cliPid = () => {
      const rows = spawnSync("ps", ["-eo", "pid=,ppid=,args="], { encoding: "utf8" }).stdout.split("\n").map((line) => line.trim().split(/\s+/));
      const below = new Set([chat.child.pid!]);
      for (let changed = true; changed; ) {
        changed = false;
        for (const [pid, ppid] of rows) {
          if (!pid || !below.has(Number(ppid)) || below.has(Number(pid))) continue;
          below.add(Number(pid));
          changed = true;
        }
      }
      return Number(rows.find(([pid, , command, entry]) => below.has(Number(pid)) && command === process.execPath && entry?.endsWith("bin/ducklm.js"))![0]);
    };
    try {
      await chat.waitFor(/› /);
      chat.child.stdin.write("run `sleep 30`\n");
      await chat.waitFor(/sleep 30/, 2);
      await new Promise((resolve) => setTimeout(resolve, 1500));
      process.kill(cliPid(), "SIGINT");
      await chat.waitFor(/› /, 2);
      expect(chat.output()).toMatch(/cancel/i);
      process.kill(cliPid(), "SIGINT");
      expect(await chat.exited).toBe(130);
    } finally {
      chat.child.kill("SIGKILL");
    }
  }, 120_000);

  it("keeps `ducklm chat` going when Ctrl-C is pressed at a permission question: the task waits, the next message runs", async () => {
    writeFileSync(join(workspace, "kept.txt"), "x\n");
    const chat = chatOnTerminal();
    try {
      await chat.waitFor(/› /);
      chat.child.stdin.write("run `cp kept.txt chat-interrupted-copy.txt`\n");
      await chat.waitFor(/\[N\]o:/);
      chat.child.stdin.write("\u0003");
      await chat.waitFor(/Left unanswered: task \S+ still waits for permission/);
      const id = /Left unanswered: task (\S+) still waits/.exec(chat.output())![1]!;
      // Still a chat: the next message is a task of its own, which completes.
      chat.child.stdin.write("read file kept.txt\n");
      await chat.waitFor(/read file kept\.txt[\s\S]*✔ completed/);
      chat.child.stdin.write("/exit\n");
      expect([0, 130]).toContain(await chat.exited);
      expect(JSON.parse(ducklm(["tasks", "--json", "--state", "awaiting_permission"]).stdout.trim().split("\n").find((line) => line.includes(id))!).state).toBe("awaiting_permission");
      expect(existsSync(join(workspace, "chat-interrupted-copy.txt"))).toBe(false);
    } finally {
      chat.child.kill("SIGKILL");
    }
  }, 120_000);

  it("leaves the task waiting, with exit 130, when Ctrl-C is pressed at the permission question", async () => {
    const child = spawn("script", ["-qec", `${process.execPath} ${join(root, "bin/ducklm.js")} run 'run \`cp kept.txt interrupted-copy.txt\`'`, "/dev/null"], {
      cwd: workspace,
      env: { ...process.env, DUCKLM_HOME: home, DUCKLM_CONFIG: askingConfig },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
    for (let waited = 0; !output.includes("[N]o:"); waited += 100) {
      if (waited > 60_000) throw new Error(`no question: ${output}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    child.stdin.write("\u0003");
    expect(await exited).toBe(130);
    const id = /task (\S+) still waits for permission/.exec(output)?.[1];
    expect(id).toBeDefined();
    expect(JSON.parse(ducklm(["tasks", "--json", "--state", "awaiting_permission"]).stdout.trim().split("\n").find((line) => line.includes(id!))!).state).toBe("awaiting_permission");
    expect(existsSync(join(workspace, "interrupted-copy.txt"))).toBe(false);
  }, 90_000);

  it("ends as denied, with exit 4 and the refusal said once, when the permission is refused", () => {
    writeFileSync(join(workspace, "kept.txt"), "x\n");
    const result = spawnSync("script", ["-qec", `${process.execPath} ${join(root, "bin/ducklm.js")} run 'run \`cp kept.txt refused-copy.txt\`'`, "/dev/null"], {
      cwd: workspace,
      env: { ...process.env, DUCKLM_HOME: home, DUCKLM_CONFIG: askingConfig },
      input: "n\n",
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(result.stdout).toContain("⊘ denied: you did not allow cp kept.txt refused-copy.txt, so the task stopped");
    // Said once: the answer, then what it meant; not again by the step, the critic and the task.
    expect(result.stdout).toContain("permission deny (cli)");
    expect(result.stdout.match(/⊘ denied/g)).toHaveLength(1);
    expect(result.stdout).not.toContain("DUCK_ERR_PERMISSION_DENIED");
    expect(result.stdout).not.toContain("✘ failed");
    expect(result.status).toBe(4);
    expect(existsSync(join(workspace, "refused-copy.txt"))).toBe(false);
  });
});

describe("ducklm doctor", () => {
  it("checks the machine and reports each part", () => {
    const result = ducklm(["doctor"]);
    expect(result.code).toBe(0);
    for (const part of ["node", "config", "database", "shell parser", "shell confinement", "command environment", "undo (workspace checkpoints)", "models", "plugins"]) expect(result.stdout).toContain(part);
    expect(result.stdout).toMatch(/ok\s+database\s+integrity ok/);
  });

  it("lists which of its variables commands get, and never a secret one", () => {
    const result = spawnSync(process.execPath, ["--import", tsxLoader, join(root, "src/cli/main.ts"), "doctor"], {
      cwd: workspace,
      env: { ...process.env, DUCKLM_HOME: home, DUCKLM_CONFIG: join(root, "config"), GITHUB_PAT: "ghp_doctorSecret", LANG: "C.UTF-8" },
      encoding: "utf8",
      timeout: 60_000,
    });
    const line = result.stdout.split("\n").find((entry) => entry.includes("command environment")) ?? "";
    expect(line).toMatch(/commands get .*\bLANG\b.*\bPATH\b/);
    expect(line).not.toContain("GITHUB_PAT");
    expect(line).not.toContain("ghp_doctorSecret");
    expect(line).toMatch(/\d+ other variable\(s\) never reach them/);
  });
});

describe("ducklm memory", () => {
  it("adds, searches, pins, lists, reports and removes entries", () => {
    const added = ducklm(["memory", "add", "--json", "the", "heron", "nests", "by", "the", "weir"]);
    expect(added.code).toBe(0);
    const id = JSON.parse(added.stdout).entry.id as number;
    expect(JSON.parse(ducklm(["memory", "add", "--json", "the heron nests by the weir"]).stdout).action).toBe("reinforce");
    expect(ducklm(["memory", "search", "heron"]).stdout).toMatch(new RegExp(`#${id} .*\\(keyword\\).*heron nests`));
    expect(ducklm(["memory", "pin", String(id)]).code).toBe(0);
    expect(ducklm(["memory", "list"]).stdout).toMatch(new RegExp(`#${id}  w=2.00  pinned`));
    expect(ducklm(["memory", "stats"]).stdout).toMatch(/keyword search only/);
    expect(ducklm(["memory", "rm", String(id)]).code).toBe(0);
    expect(ducklm(["memory", "rm", String(id)]).code).toBe(2);
    expect(ducklm(["memory", "frobnicate"]).stderr).toMatch(/unknown memory action/);
    for (const limit of ["x", "1.5", "0", "-1"]) {
      for (const action of [["list"], ["search", "heron"]]) expect(ducklm(["memory", ...action, "--limit", limit]), `${action[0]} --limit ${limit}`).toMatchObject({ code: 2, stderr: expect.stringContaining("DUCK_ERR_INVALID_INPUT: --limit must be a whole number from 1") });
    }
  });
});
