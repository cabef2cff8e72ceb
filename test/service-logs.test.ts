import { spawn } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { Writable } from "node:stream";
import { setTimeout as delay } from "node:timers/promises";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { createLogger } from "../src/runtime/logger.js";
import { createServiceLogger } from "../src/runtime/service-logger.js";
import { makeTempDir } from "./helpers/test-runtime.js";

const root = resolve(import.meta.dirname, "..");
const tsxLoader = import.meta.resolve("tsx");

const logFiles = (home: string) => readdirSync(join(home, "logs")).filter((name) => /^server\.\d+\.log$/.test(name));

describe("the log of a short command", () => {
  it("is set aside once full, when the next command opens it: never more than two files", () => {
    const home = makeTempDir();
    const file = join(home, "logs", "ducklm.log");
    const readLines = (path: string) => readFileSync(path, "utf8").split("\n").filter(Boolean).map((text) => JSON.parse(text) as { command: number; secret: string });
    const writeCommand = (command: number) => {
      const logger = createLogger({ file, maxBytes: 2048 });
      for (let line = 0; line < 20; line += 1) logger.info({ command, line, secret: "never-in-a-log" }, "a line of about a hundred bytes");
    };
    writeCommand(1);
    // Twenty lines pass 2 KiB, so the next command sets this file aside before writing.
    expect(readLines(file).every((record) => record.command === 1)).toBe(true);
    writeCommand(2);
    expect(readLines(file).map((record) => record.command)).toEqual(new Array(20).fill(2));
    expect(readLines(join(home, "logs", "ducklm.1.log")).every((record) => record.command === 1)).toBe(true);
    writeCommand(3);
    // The oldest command's lines are gone; the files are the last two commands'.
    expect(readdirSync(join(home, "logs")).sort()).toEqual(["ducklm.1.log", "ducklm.log"]);
    expect(readLines(join(home, "logs", "ducklm.1.log")).every((record) => record.command === 2)).toBe(true);
    expect(readLines(file).every((record) => record.command === 3 && record.secret === "[Redacted]")).toBe(true);
  });

  it("is left alone while under its limit", () => {
    const home = makeTempDir();
    const file = join(home, "logs", "ducklm.log");
    createLogger({ file }).info("first");
    createLogger({ file }).info("second");
    expect(readdirSync(join(home, "logs"))).toEqual(["ducklm.log"]);
    expect(readFileSync(file, "utf8").split("\n").filter(Boolean)).toHaveLength(2);
  });
});

describe("the log of a long-running process", () => {
  it("rotates: a new file once one is full, and only the newest ones kept, each line a JSON record", async () => {
    const home = makeTempDir();
    const logger = await createServiceLogger(home, { fileSize: "1k", filesKept: 3, pretty: false });
    const readRecords = () =>
      logFiles(home)
        .flatMap((name) => readFileSync(join(home, "logs", name), { encoding: "utf8", flag: "r" }).split("\n"))
        .filter(Boolean)
        .flatMap((text) => {
          try {
            return [JSON.parse(text) as { line: number; token: string }];
          } catch {
            return []; // a line the worker is still writing
          }
        });
    // The file is rolled between writes, so a batch is written, and waited for, before the next: on a
    // busy machine the writer's thread may otherwise start late and write all 400 lines as one.
    for (let batch = 0; batch < 25; batch += 1) {
      for (let line = batch * 16; line < (batch + 1) * 16; line += 1) logger.info({ line, token: "never-in-a-log" }, "a line long enough to fill a one-kilobyte file after a dozen or so of them");
      logger.flush();
      const last = (batch + 1) * 16 - 1;
      for (let waited = 0; waited < 200 && !readRecords().some((record) => record.line === last); waited += 1) await delay(25);
    }
    await delay(100);
    const files = logFiles(home);
    expect(files.length).toBeGreaterThan(1);
    expect(files.length).toBeLessThanOrEqual(3);
    const records = readRecords();
    // The newest lines survive; the oldest went with the files that were dropped.
    expect(records.some((record) => record.line === 399)).toBe(true);
    expect(records.some((record) => record.line === 0)).toBe(false);
    expect(records.every((record) => record.token === "[Redacted]")).toBe(true);
    // Every file, the rolled ones too, readable by this user alone.
    // (A file rolled away since it was listed is skipped.)
    const modes = files.map((name) => statSync(join(home, "logs", name), { throwIfNoEntry: false })?.mode).filter((mode) => mode !== undefined);
    expect(modes.length).toBeGreaterThan(0);
    for (const mode of modes) expect(mode & 0o777).toBe(0o600);
  });

  it("shows each request on the terminal as a readable line: what was asked, how it ended, and its id", async () => {
    const home = makeTempDir();
    const lines: string[] = [];
    const terminal = new Writable({ write: (chunk: Buffer, _encoding, done) => (lines.push(...chunk.toString().split("\n").filter(Boolean)), done()) });
    const logger = await createServiceLogger(home, { pretty: true, prettyDestination: terminal });
    const request = logger.child({ reqId: "req-7" });
    request.info({ req: { method: "GET", url: "/tasks?limit=5", remote: "127.0.0.1" } }, "incoming request");
    request.info({ res: { statusCode: 200 }, responseTime: 3.4 }, "request completed");
    request.error({ req: { method: "POST", url: "/chat" }, err: new Error("boom") }, "the handler failed");
    logger.info("plain");
    await delay(200);
    // A record's first line starts with its time; an error's stack follows on lines of its own.
    const records = lines.filter((line) => /^\[\d\d:\d\d:\d\d/.test(line));
    expect(records).toHaveLength(4);
    expect(records[0]).toMatch(/INFO.*: → GET \/tasks\?limit=5 \[req-7\]$/);
    expect(records[1]).toMatch(/INFO.*: ← 200 in 3 ms \[req-7\]$/);
    expect(records[2]).toMatch(/ERROR.*: the handler failed \(POST \/chat\) \[req-7\]/);
    expect(lines.join("\n")).toContain("boom");
    expect(records[3]).toMatch(/INFO.*: plain$/);
  });

  it("`ducklm serve` logs each request at info, with no login code and no token in the file", async () => {
    const home = makeTempDir("ducklm-serve-logs-");
    const child = spawn(process.execPath, ["--import", tsxLoader, join(root, "src/cli/main.ts"), "serve", "--port", "0"], {
      env: { ...process.env, DUCKLM_HOME: home, DUCKLM_CONFIG: join(root, "config") },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
    try {
      for (let waited = 0; !/Log in by opening (\S+)/.test(stdout); waited += 100) {
        if (waited > 60_000) throw new Error(`serve did not start: ${stdout}`);
        await delay(100);
      }
      const link = /Log in by opening (\S+)/.exec(stdout)![1]!;
      const code = new URL(link).searchParams.get("code")!;
      const login = await fetch(link, { redirect: "manual" });
      expect(login.status).toBe(303);
      const token = readFileSync(join(home, "token"), "utf8").trim();
      const tasks = await fetch(new URL("/tasks", link), { headers: { authorization: `Bearer ${token}` } });
      expect(tasks.status).toBe(200);
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
      const text = logFiles(home).map((name) => readFileSync(join(home, "logs", name), "utf8")).join("");
      const records = text.trim().split("\n").map((line) => JSON.parse(line) as { msg: string; level: number; req?: { url: string; method: string }; res?: { statusCode: number } });
      expect(records).toContainEqual(expect.objectContaining({ msg: "incoming request", level: 30, req: expect.objectContaining({ method: "GET", url: "/login?code=[hidden]" }) }));
      expect(records).toContainEqual(expect.objectContaining({ msg: "request completed", res: expect.objectContaining({ statusCode: 200 }) }));
      expect(text).not.toContain(code);
      expect(text).not.toContain(token);
    } finally {
      child.kill("SIGKILL");
    }
  }, 120_000);
});

describe("npm start", () => {
  it("takes its server down with it when npm itself is killed", async () => {
    const home = makeTempDir("ducklm-npm-start-");
    const npm = spawn("npm", ["start", "--silent", "--", "--port", "0", "--home", home], {
      cwd: root,
      env: { ...process.env, DUCKLM_CONFIG: join(root, "config") },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    npm.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    try {
      for (let waited = 0; !stdout.includes("Log in by opening"); waited += 100) {
        if (waited > 90_000) throw new Error(`npm start did not serve: ${stdout}`);
        await delay(100);
      }
      const { pid } = (JSON.parse(readFileSync(join(home, "server.json"), "utf8")) as { servers: Array<{ pid: number }> }).servers[0]!;
      expect(pid).not.toBe(npm.pid);
      // What a process manager does when npm does not stop in time.
      npm.kill("SIGKILL");
      const alive = () => {
        try {
          process.kill(pid, 0);
          return true;
        } catch {
          return false;
        }
      };
      for (let waited = 0; alive() && waited < 20_000; waited += 200) await delay(200);
      expect(alive()).toBe(false);
    } finally {
      npm.kill("SIGKILL");
    }
  }, 150_000);
});
