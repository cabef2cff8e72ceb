import { execFileSync, spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "./helpers/cli-child.js";
import type { ContractSetup } from "./helpers/escape-contract.js";
import { startTestPostgres, type TestPostgres } from "./helpers/postgres-server.js";

// The sandbox's whole contract, from the attacker's side, twice: with DuckLM run by root (as in
// containers, CI and many servers) and by an ordinary user. Each run is a child process of that
// identity driving real tasks whose commands are approved in advance, network included, so that the
// sandbox alone is the boundary; this process holds the targets and checks each is unchanged.

const tsxLoader = import.meta.resolve("tsx");
const asRoot = process.getuid?.() === 0;
const nobody = asRoot ? { uid: Number(execFileSync("id", ["-u", "nobody"], { encoding: "utf8" })), gid: Number(execFileSync("id", ["-g", "nobody"], { encoding: "utf8" })) } : null;
const SECRETS = { GITHUB_PAT: "ghp_contractSecretValue1234", MYSQL_PWD: "mysql-contract-pw-5678", DOCKER_PASS: "docker-contract-pass-91", SENTRY_DSN: "https://sentrykey4242@o1.ingest.sentry.io/1" };
const PLANTED = { configstore: "configstore-token-abcdef123", history: "history-secret-curl-token-777", project: "other-project-secret-888", key: "PRIVATE-KEY-CONTRACT-999", header: "extraheader-basic-c2VjcmV0" };
/** What the user's own tools run later: none of these may appear in a workspace that had none. */
const RUN_LATER = [".git", ".envrc", ".vscode", ".idea", ".mcp.json", ".claude", ".cursor", ".pre-commit-config.yaml", "HEAD"];

let base: string;
let postgres: TestPostgres;
let pgSocketDir: string;
const servers: Server[] = [];
let socketConnections = 0;
let corePatternBefore: string;

/** A Unix socket anyone may connect to (a stream one, and a datagram one beside it), counting who does. */
async function serveSocket(path: string): Promise<void> {
  const server = createServer((socket) => {
    socketConnections += 1;
    socket.end("HTTP/1.1 200 OK\r\n\r\nSERVED-OUTSIDE");
  });
  await new Promise<void>((resolve) => server.listen(path, () => resolve()));
  chmodSync(path, 0o777);
  servers.push(server);
}

interface Identity {
  name: string;
  uid: number;
  gid: number;
}

interface ContractRun {
  printed: Record<string, string>;
  setup: ContractSetup;
  home: string;
}

/** Lays out a workspace (no .git) and a home with credentials in it, owned by `who`, and runs the contract as `who`. */
async function runContract(who: Identity): Promise<ContractRun> {
  const root = join(base, who.name);
  const home = join(root, "home");
  const workspace = join(root, "project");
  for (const folder of [root, home, workspace, join(home, ".config", "configstore"), join(home, "other-project"), join(home, ".ssh")]) mkdirSync(folder, { recursive: true });
  writeFileSync(join(home, ".config", "configstore", "update-notifier.json"), JSON.stringify({ token: PLANTED.configstore }));
  writeFileSync(join(home, ".bash_history"), `curl -H 'Authorization: ${PLANTED.history}' https://api.example\n`);
  writeFileSync(join(home, "other-project", "secret.txt"), PLANTED.project);
  writeFileSync(join(home, ".ssh", "id_ed25519"), PLANTED.key, { mode: 0o600 });
  writeFileSync(join(home, ".gitconfig"), `[user]\n\tname = Contract Tester\n\temail = tester@example.com\n[http]\n\textraheader = AUTHORIZATION: basic ${PLANTED.header}\n`);
  writeFileSync(join(workspace, "notes.txt"), "ordinary file\n");
  const socketInParent = join(root, "service.sock");
  await serveSocket(socketInParent);
  execFileSync("chown", ["-R", `${who.uid}:${who.gid}`, root]);
  chmodSync(root, 0o755);
  const setup: ContractSetup = {
    workspace,
    sockets: [join(base, "shared", "service.sock"), socketInParent],
    postgres: { socketDir: pgSocketDir, port: Number(new URL(postgres.url()).port), user: "ducklm" },
    postgresMarker: join(base, "shared", `postgres-ran-for-${who.name}`),
    gitMarker: join(base, "shared", `git-ran-for-${who.name}`),
    secretVariables: SECRETS,
  };
  const printed = await new Promise<Record<string, string>>((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", tsxLoader, join(REPO_ROOT, "test/helpers/escape-contract.ts"), JSON.stringify(setup)], {
      cwd: workspace,
      uid: who.uid,
      gid: who.gid,
      env: { ...process.env, HOME: home, USER: who.name, TMPDIR: "/tmp" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("error", reject);
    child.on("close", (code) => {
      const last = stdout.trim().split("\n").at(-1) ?? "";
      if (code !== 0 || !last.startsWith("{")) reject(new Error(`the contract run as ${who.name} exited ${code}: ${stderr.slice(-2000)}`));
      else resolve(JSON.parse(last) as Record<string, string>);
    });
  });
  return { printed, setup, home };
}

const identities: Identity[] = [
  ...(asRoot ? [{ name: "root", uid: 0, gid: 0 }] : []),
  ...(nobody ? [{ name: "nobody", ...nobody }] : [{ name: "user", uid: process.getuid!(), gid: process.getgid!() }]),
];
const runs = new Map<string, ContractRun>();

beforeAll(async () => {
  // Outside /tmp: what lies here is what a real machine has in /var/tmp (commands get a private one).
  base = mkdtempSync("/var/tmp/ducklm-contract-");
  chmodSync(base, 0o755);
  mkdirSync(join(base, "shared"), { mode: 0o777 });
  chmodSync(join(base, "shared"), 0o777);
  await serveSocket(join(base, "shared", "service.sock"));
  pgSocketDir = join(base, "pg-socket");
  mkdirSync(pgSocketDir);
  postgres = await startTestPostgres({ socketDir: pgSocketDir });
  chmodSync(pgSocketDir, 0o755);
  corePatternBefore = readFileSync("/proc/sys/kernel/core_pattern", "utf8");
  for (const who of identities) runs.set(who.name, await runContract(who));
}, 240_000);

afterAll(() => {
  for (const server of servers) server.close();
  postgres?.stop();
  if (base) rmSync(base, { recursive: true, force: true });
});

describe.each(identities.map((who) => who.name))("the sandbox, with DuckLM run by %s", (name) => {
  const run = () => runs.get(name)!;

  it("ran every probe (a refusal by the classifier would prove nothing about the sandbox)", () => {
    for (const [probe, printed] of Object.entries(run().printed)) expect(printed, probe).not.toMatch(/^\(did not run/);
  });

  it("runs each command as an ordinary uid, without capabilities, with no_new_privs and the seccomp filter", () => {
    const [uid, ...status] = run().printed.identity!.trim().split("\n");
    expect(Number(uid)).not.toBe(0);
    expect(status).toEqual(["CapEff:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"]);
  });

  it("gets no connection to a Unix socket outside the workspace, nor in its parent folder, by stream or datagram", () => {
    const printed = run().printed.sockets!;
    expect(printed).not.toContain("CONNECTED");
    expect(printed).not.toContain("SERVED-OUTSIDE");
    expect(printed).toMatch(/REFUSED EPERM/);
    expect(socketConnections).toBe(0);
  });

  it("cannot write the kernel's knobs: /proc/sys/kernel/core_pattern, vm", () => {
    const printed = run().printed.kernelKnobs!;
    expect(printed).not.toMatch(/WROTE-/);
    expect(readFileSync("/proc/sys/kernel/core_pattern", "utf8")).toBe(corePatternBefore);
  });

  it("gets none of the secrets in DuckLM's environment, by any way of listing it", () => {
    const printed = run().printed.environment!;
    for (const [variable, value] of Object.entries(SECRETS)) {
      expect(printed).not.toContain(value);
      expect(printed).not.toContain(variable);
    }
    expect(printed).toContain("PATH=");
  });

  it("sees an empty home: none of the files planted there, not even through git's settings", () => {
    const printed = run().printed.home!;
    for (const secret of Object.values(PLANTED)) expect(printed).not.toContain(secret);
    // What git commits need is still there.
    expect(printed).toContain("user.name=Contract Tester");
  });

  it("cannot reach a PostgreSQL server by its socket or over TCP, so COPY … TO PROGRAM never runs", () => {
    const printed = run().printed.postgres!;
    expect(printed).not.toMatch(/COPY 1/);
    expect(existsSync(run().setup.postgresMarker)).toBe(false);
  });

  it("cannot create .git, .envrc, .vscode or the other files the user's tools run later, nor a bare repository, and leaves no stand-in behind", () => {
    expect(run().printed.runLater).toMatch(/Read-only file system/);
    const entries = readdirSync(run().setup.workspace);
    expect(entries.filter((entry) => RUN_LATER.includes(entry))).toEqual([]);
    // The user's own git, run there afterwards as it is by default, finds no repository to obey.
    const git = spawnSync("git", ["status"], { cwd: run().setup.workspace, encoding: "utf8", env: { PATH: process.env.PATH, HOME: run().home, GIT_CEILING_DIRECTORIES: base } });
    expect(git.stderr).toMatch(/not a git repository/);
    expect(existsSync(run().setup.gitMarker)).toBe(false);
  });

  it("cannot leave a setuid or setgid file or folder behind for whoever runs it later", () => {
    for (const entry of ["rootsh", "shared"]) {
      const mode = statSync(join(run().setup.workspace, entry), { throwIfNoEntry: false })?.mode ?? 0;
      expect(mode & 0o6000, entry).toBe(0);
    }
  });

  it("cannot read what only root may read", () => {
    const printed = run().printed.rootOnly!;
    // /etc/shadow's lines start with a user name and a colon; root's own home is an empty folder.
    expect(printed).not.toMatch(/^(root|daemon|nobody):/m);
    // The kernel's root-only reports: the slab caches' addresses and the timers help an exploit along.
    expect(printed).not.toMatch(/slabinfo - version|Timer List Version/);
    if (asRoot) expect(printed).not.toContain(readFileSync("/root/.profile", "utf8").slice(0, 32));
  });
});
