import { spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { createHash } from "node:crypto";
import type { AddressInfo } from "node:net";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fixtureModels } from "../helpers/fixture-models.js";
import { makeTempDir } from "../helpers/test-runtime.js";

const root = resolve(import.meta.dirname, "../..");
const tsxLoader = import.meta.resolve("tsx");
const home = makeTempDir("ducklm-models-home-");
// Tasks work in a folder of their own: a workspace may not be DuckLM\'s home.
const workspace = makeTempDir("ducklm-models-ws-");
const configDir = makeTempDir("ducklm-models-config-");
let server: Server;
let baseUrl = "";
const requests: Array<{ url: string; range: string | undefined }> = [];
let fixture: Buffer;

function ducklm(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolvePromise) => {
    const child = spawn(process.execPath, ["--import", tsxLoader, join(root, "src/cli/main.ts"), ...args], {
      cwd: workspace,
      env: { ...process.env, DUCKLM_HOME: home, DUCKLM_CONFIG: configDir },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("close", (code) => resolvePromise({ code, stdout, stderr }));
  });
}

beforeAll(async () => {
  cpSync(join(root, "config"), configDir, { recursive: true });
  // No role has a file yet: each bundled one is removed (null, as in a JSON merge patch).
  const noRoles = Object.fromEntries(["thinker", "json_compiler", "critic", "coder", "sys_util", "orchestrator", "embeddings"].map((role) => [role, null]));
  writeFileSync(join(configDir, "models.json"), JSON.stringify({ roles: noRoles }));
  fixture = readFileSync(fixtureModels().chat);
  const embedding = readFileSync(fixtureModels().embedding);
  server = createServer((request, response) => {
    const range = request.headers.range;
    if (request.url === "/models/embed/tiny-embedding.gguf") {
      response.writeHead(200, { "content-length": String(embedding.length) });
      response.end(request.method === "HEAD" ? undefined : embedding);
      return;
    }
    // What a server says of a file before sending it: its size.
    if (request.method === "HEAD") {
      if (request.url?.endsWith("/tiny.gguf")) response.writeHead(200, { "content-length": String(fixture.length) }).end();
      else if (request.url === "/models/short/short.gguf") response.writeHead(200, { "content-length": "4096" }).end();
      else response.writeHead(request.url === "/models/sign-in/model.gguf" ? 200 : 404, { "content-type": "text/html" }).end();
      return;
    }
    requests.push({ url: request.url ?? "", range });
    if (request.url === "/models/cut/tiny.gguf" && !range) {
      // The first download breaks off half-way.
      response.writeHead(200, { "content-length": String(fixture.length), "content-type": "application/octet-stream" });
      // Given a moment to reach the client before the connection goes, so the part is never empty.
      response.write(fixture.subarray(0, Math.floor(fixture.length / 2)), () => setTimeout(() => response.destroy(), 100));
      return;
    }
    if (request.url === "/models/short/short.gguf") {
      // A mirror's copy cut short, served whole as what it is: its first bytes are a model's.
      response.writeHead(200, { "content-length": "4096", "content-type": "application/octet-stream" });
      response.end(fixture.subarray(0, 4096));
      return;
    }
    if (request.url === "/models/sign-in/model.gguf") {
      // What a hosting site sends instead of the file when it wants a sign-in.
      response.writeHead(200, { "content-type": "text/html" });
      response.end("<!DOCTYPE html><html><body>Please sign in to download this model.</body></html>");
      return;
    }
    if (!request.url?.endsWith("/tiny.gguf")) {
      response.writeHead(404).end();
      return;
    }
    if (range) {
      const start = Number(/bytes=(\d+)-/.exec(range)![1]);
      response.writeHead(206, { "content-length": String(fixture.length - start), "content-range": `bytes ${start}-${fixture.length - 1}/${fixture.length}` });
      response.end(fixture.subarray(start));
      return;
    }
    response.writeHead(200, { "content-length": String(fixture.length) });
    response.end(fixture);
  });
  await new Promise<void>((ready) => server.listen(0, "127.0.0.1", ready));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.close();
  rmSync(home, { recursive: true, force: true });
  rmSync(configDir, { recursive: true, force: true });
});

describe("ducklm models", () => {
  it("lists roles as not configured, and says how to get a model", async () => {
    const result = await ducklm(["models", "list"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/thinker\s+not configured/);
    expect(result.stdout).toMatch(/IntentParser mode/);
  });

  it("resumes an interrupted pull, checks the checksum and assigns the role", async () => {
    const sha = createHash("sha256").update(fixture).digest("hex");
    const first = await ducklm(["models", "pull", `${baseUrl}/models/cut/tiny.gguf`, "--role", "thinker", "--sha256", sha]);
    expect(first.code).not.toBe(0);
    expect(first.stderr).toMatch(/DUCK_ERR_MODEL_DOWNLOAD: the download of tiny\.gguf (broke off|stopped) at [\d.]+ MiB of [\d.]+ MiB.*run the same command again to resume from there/);
    const partial = join(home, "models", "tiny.gguf.part");
    expect(existsSync(partial)).toBe(true);
    const partialSize = statSync(partial).size;
    expect(partialSize).toBeGreaterThan(0);
    expect(partialSize).toBeLessThan(fixture.length);

    const second = await ducklm(["models", "pull", `${baseUrl}/models/cut/tiny.gguf`, "--role", "thinker", "--sha256", sha]);
    expect(second.stderr + second.stdout).toMatch(/resumed at/);
    expect(second.code).toBe(0);
    expect(requests.at(-1)?.range).toBe(`bytes=${partialSize}-`);
    expect(readFileSync(join(home, "models", "tiny.gguf")).equals(fixture)).toBe(true);
    const models = JSON.parse(readFileSync(join(configDir, "models.json"), "utf8"));
    expect(models.roles.thinker.file).toBe("tiny.gguf");

    const list = await ducklm(["models", "list", "--json"]);
    const rows = list.stdout.trim().split("\n").map((line) => JSON.parse(line));
    expect(rows.find((row: { role: string }) => row.role === "thinker")).toMatchObject({ present: true, served_by: "thinker", size_bytes: fixture.length });
    expect(rows.find((row: { role: string }) => row.role === "json_compiler")).toMatchObject({ present: false, served_by: "thinker" });
  }, 60_000);

  it("refuses a web page saved under a model's name, and assigns nothing", async () => {
    const before = readFileSync(join(configDir, "models.json"), "utf8");
    const result = await ducklm(["models", "pull", `${baseUrl}/models/sign-in/model.gguf`, "--role", "coder"]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/HTML or XML page, not a GGUF model.*nothing was saved or assigned/);
    expect(existsSync(join(home, "models", "model.gguf"))).toBe(false);
    expect(existsSync(join(home, "models", "model.gguf.part"))).toBe(false);
    expect(readFileSync(join(configDir, "models.json"), "utf8")).toBe(before);
  });

  it("refuses a model cut short though its first bytes look right, and lists one already in place as broken", async () => {
    const before = readFileSync(join(configDir, "models.json"), "utf8");
    const result = await ducklm(["models", "pull", `${baseUrl}/models/short/short.gguf`, "--role", "critic"]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/is cut short.*nothing was saved or assigned/);
    expect(existsSync(join(home, "models", "short.gguf"))).toBe(false);
    expect(readFileSync(join(configDir, "models.json"), "utf8")).toBe(before);

    // One that got there some other way is named in the list and by doctor, not called present.
    mkdirSync(join(home, "models"), { recursive: true });
    writeFileSync(join(home, "models", "copied.gguf"), fixture.subarray(0, fixture.length - 1000));
    writeFileSync(join(configDir, "models.json"), JSON.stringify({ roles: { critic: { file: "copied.gguf" } } }));
    try {
      const list = await ducklm(["models", "list", "--json"]);
      const critic = list.stdout.trim().split("\n").map((line) => JSON.parse(line)).find((row: { role: string }) => row.role === "critic");
      expect(critic).toMatchObject({ present: false, problem: expect.stringMatching(/^is cut short: it holds/) });
      const doctor = await ducklm(["doctor"]);
      expect(doctor.stdout).toMatch(/critic: .*copied\.gguf is cut short/);
      // A task with a configured file that is no model at all says so where the user sees it, not only in the log.
      writeFileSync(join(home, "models", "copied.gguf"), "<!DOCTYPE html><html><body>Sign in</body></html>");
      const run = await ducklm(["run", "hello there"]);
      expect(run.stderr).toMatch(/warning: the critic model file .*copied\.gguf is an HTML or XML page.*DuckLM runs without a model until it is fixed/);
    } finally {
      writeFileSync(join(configDir, "models.json"), before);
      rmSync(join(home, "models", "copied.gguf"));
    }
  });

  it("records an embedding model's dimension from its file, and names a file of another width", async () => {
    const before = readFileSync(join(configDir, "models.json"), "utf8");
    try {
      const pulled = await ducklm(["models", "pull", `${baseUrl}/models/embed/tiny-embedding.gguf`, "--role", "embeddings"]);
      expect(pulled.code).toBe(0);
      expect(pulled.stdout).toMatch(/role embeddings now uses it \(64-dimensional vectors\)/);
      expect(JSON.parse(readFileSync(join(configDir, "models.json"), "utf8")).roles.embeddings).toEqual({ file: "tiny-embedding.gguf", dimension: 64 });
      // Said wrong by hand: the list and doctor name the width the file gives and the setting to change.
      const models = JSON.parse(readFileSync(join(configDir, "models.json"), "utf8"));
      models.roles.embeddings.dimension = 768;
      writeFileSync(join(configDir, "models.json"), JSON.stringify(models));
      const list = await ducklm(["models", "list", "--json"]);
      const row = list.stdout.trim().split("\n").map((line) => JSON.parse(line)).find((entry: { role: string }) => entry.role === "embeddings");
      expect(row).toMatchObject({ present: false, problem: expect.stringMatching(/gives 64-dimensional vectors, but models\.json says dimension 768: set roles\.embeddings\.dimension to 64/) });
      const doctor = await ducklm(["doctor"]);
      expect(doctor.stdout).toMatch(/embeddings: .*tiny-embedding\.gguf gives 64-dimensional vectors/);
    } finally {
      writeFileSync(join(configDir, "models.json"), before);
    }
  });

  it("refuses a file whose checksum differs", async () => {
    const result = await ducklm(["models", "pull", `${baseUrl}/other/tiny.gguf`, "--sha256", "00".repeat(32)]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/has SHA-256 [0-9a-f]{64}, expected 0000/);
  });

  it("rejects bad sources and roles with a clear error", async () => {
    expect((await ducklm(["models", "pull", "ftp://example/x.gguf"])).stderr).toMatch(/only http\(s\) URLs/);
    expect((await ducklm(["models", "pull", "hf:only-user"])).stderr).toMatch(/hf:user\/repo\/file.gguf/);
    expect((await ducklm(["models", "pull", `${baseUrl}/x/tiny.gguf`, "--role", "wizard"])).stderr).toMatch(/unknown role "wizard"/);
    const bench = await ducklm(["models", "bench", "thinker", "--tokens", "0"]);
    expect(bench.code).toBe(2);
    expect(bench.stderr).toMatch(/--tokens must be a whole number from 1 to 8192/);
  });

  it("runs a task on the pulled model from the command line, and measures it", async () => {
    // Threads 1: on two cores the tiny model is much faster on one.
    const models = JSON.parse(readFileSync(join(configDir, "models.json"), "utf8"));
    models.threads = 1;
    writeFileSync(join(configDir, "models.json"), JSON.stringify(models));
    const run = await ducklm(["run", "--json", "say something"]);
    expect([0, 1, 3]).toContain(run.code);
    const events = run.stdout.trim().split("\n").map((line) => JSON.parse(line));
    expect(events.some((event: { type: string }) => event.type === "model-output-delta")).toBe(true);
    expect(events.at(-1).type).toMatch(/^task-(completed|failed|awaiting-permission)$/);

    const bench = spawnSync(process.execPath, ["--import", tsxLoader, join(root, "src/cli/main.ts"), "models", "bench", "thinker", "--tokens", "16"], {
      cwd: workspace,
      env: { ...process.env, DUCKLM_HOME: home, DUCKLM_CONFIG: configDir },
      encoding: "utf8",
    });
    expect(bench.status).toBe(0);
    expect(bench.stdout).toMatch(/generation\s+\d+ tokens in \d+ ms \([\d.]+ tokens\/s\)/);
    // The generator's own count: never more than were asked for (tokenising the noise again can count more).
    const generated = Number(/generation\s+(\d+) tokens/.exec(bench.stdout)![1]);
    expect(generated).toBeGreaterThan(0);
    expect(generated).toBeLessThanOrEqual(16);
  }, 120_000);
});
