import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fixtureModel, fixtureModels } from "../helpers/fixture-models.js";
import { makeTempDir } from "../helpers/test-runtime.js";

const root = resolve(import.meta.dirname, "../..");
const tsxLoader = import.meta.resolve("tsx");
const home = makeTempDir("ducklm-setup-home-");
// Tasks work in a folder of their own: a workspace may not be DuckLM\'s home.
const workspace = makeTempDir("ducklm-models-ws-");
// The user's config folder starts with no models.json of their own; its catalogue pins the fixture
// files (the bundled one pins the real models, which cannot be downloaded here).
const configDir = makeTempDir("ducklm-setup-config-");
const emptyConfigDir = makeTempDir("ducklm-setup-empty-config-");
const FIXTURE_REVISION = "0123456789abcdef0123456789abcdef01234567";
const bundledModels = join(root, "config", "models.json");
let server: Server;
let cdnServer: Server;
let hub = "";
let cdn = "";
const requests: Array<{ method: string; url: string; range: string | undefined; status: number }> = [];
const cdnRequests: Array<{ url: string; authorization: string | undefined }> = [];
const files = new Map<string, { bytes: Buffer; sha256: string }>();
let chat: Buffer;

function ducklm(args: string[], extraEnv: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, ["--import", tsxLoader, join(root, "src/cli/main.ts"), ...args], {
      cwd: workspace,
      env: { ...process.env, DUCKLM_HOME: home, DUCKLM_CONFIG: configDir, HF_ENDPOINT: hub, ...extraEnv },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("close", (code) => done({ code, stdout, stderr }));
  });
}

const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");

/** Serves a file with Range support; `linked` adds what the hub says of it. */
function sendFile(request: IncomingMessage, response: ServerResponse, bytes: Buffer, linked: Record<string, string>, log: (status: number) => void): void {
  const range = request.headers.range;
  const start = range ? Number(/bytes=(\d+)-/.exec(range)![1]) : 0;
  const answer = (status: number, headers: Record<string, string>, body?: Buffer) => {
    log(status);
    response.writeHead(status, headers);
    response.end(request.method === "HEAD" ? undefined : body);
  };
  if (start >= bytes.length && start > 0) return answer(416, { ...linked, "content-range": `bytes */${bytes.length}` });
  if (start > 0) return answer(206, { ...linked, "content-length": String(bytes.length - start), "content-range": `bytes ${start}-${bytes.length - 1}/${bytes.length}` }, bytes.subarray(start));
  answer(200, { ...linked, "content-length": String(bytes.length) }, bytes);
}

beforeAll(async () => {
  chat = readFileSync(fixtureModels().chat);
  // An embedding model of the dimension the catalogue gives nomic-embed-text.
  const embedding = readFileSync(fixtureModel("tiny-embedding-768", { seed: 2, blockCount: 1, embeddingLength: 768, name: "ducklm-tiny-embedding-768" }));
  files.set(`/Qwen/Qwen2.5-1.5B-Instruct-GGUF/resolve/${FIXTURE_REVISION}/qwen2.5-1.5b-instruct-q4_k_m.gguf`, { bytes: chat, sha256: sha256(chat) });
  files.set(`/nomic-ai/nomic-embed-text-v1.5-GGUF/resolve/${FIXTURE_REVISION}/nomic-embed-text-v1.5.Q8_0.gguf`, { bytes: embedding, sha256: sha256(embedding) });
  const pinned = (source: string, bytes: Buffer, extra: Record<string, unknown> = {}) => ({ source, bytes: bytes.length, sha256: sha256(bytes), license: "Apache-2.0", description: "a fixture", ...extra });
  const catalogue = {
    models: {
      "qwen2.5-1.5b-instruct": pinned(`hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF@${FIXTURE_REVISION}/qwen2.5-1.5b-instruct-q4_k_m.gguf`, chat),
      "nomic-embed-text-v1.5": pinned(`hf:nomic-ai/nomic-embed-text-v1.5-GGUF@${FIXTURE_REVISION}/nomic-embed-text-v1.5.Q8_0.gguf`, embedding, { dimension: 768 }),
      // Pins the hub contradicts: refused before a byte is fetched.
      "pinned-other-hash": { ...pinned("hf:hub/redirected/good.gguf", chat), sha256: "12".repeat(32) },
      "pinned-other-size": { ...pinned("hf:hub/redirected/good.gguf", chat), bytes: chat.length + 1 },
      "someone-unpinned": { source: "hf:someone/unpinned/unpinned.gguf", approx_bytes: 4_680_000_000, license: "MIT", description: "a file of no pinned size or hash" },
    },
    presets: { unpinned: { description: "a file that is not pinned", roles: { coder: "someone-unpinned" } } },
  };
  writeFileSync(join(configDir, "models-catalogue.json"), JSON.stringify(catalogue));
  // The hub states one hash and sends other bytes.
  files.set("/someone/tampered/resolve/main/tampered.gguf", { bytes: chat, sha256: "ab".repeat(32) });
  // The CDN the hub redirects to: it serves bytes and says nothing of their hash, as the real one does.
  cdnServer = createServer((request, response) => {
    cdnRequests.push({ url: request.url ?? "", authorization: request.headers.authorization });
    if (request.url === "/blob/chat") return sendFile(request, response, chat, {}, () => undefined);
    if (request.url === "/blob/stall") {
      // Half the file, then nothing: a connection that hangs.
      if (request.headers.range || request.method === "HEAD") return sendFile(request, response, chat, {}, () => undefined);
      response.writeHead(200, { "content-length": String(chat.length) });
      response.write(chat.subarray(0, Math.floor(chat.length / 2)));
      return;
    }
    response.writeHead(404).end();
  });
  await new Promise<void>((ready) => cdnServer.listen(0, "127.0.0.1", ready));
  cdn = `http://127.0.0.1:${(cdnServer.address() as AddressInfo).port}`;
  server = createServer((request, response) => {
    const url = request.url ?? "";
    const log = (status: number) => requests.push({ method: request.method ?? "", url, range: request.headers.range, status });
    // The hub's way: a redirect to the CDN that carries the file's size and SHA-256.
    const redirect = (to: string, sha256: string) => {
      log(302);
      response.writeHead(302, { location: `${cdn}${to}`, "x-linked-etag": `"${sha256}"`, "x-linked-size": String(chat.length) }).end();
    };
    if (url === "/hub/redirected/resolve/main/good.gguf") return redirect("/blob/chat", sha256(chat));
    if (url === "/hub/redirected/resolve/main/bad.gguf") return redirect("/blob/chat", "cd".repeat(32));
    if (url === "/hub/redirected/resolve/main/stalls.gguf") return redirect("/blob/stall", sha256(chat));
    if (url === "/hub/gated/resolve/main/gated.gguf") {
      if (request.headers.authorization !== "Bearer hf_test_token") {
        log(401);
        return void response.writeHead(401).end();
      }
      return redirect("/blob/chat", sha256(chat));
    }
    if (url === "/download/12345") {
      // A sign-in page, at an address that does not end in .gguf.
      log(200);
      return void response.writeHead(200, { "content-type": "text/html" }).end(request.method === "HEAD" ? undefined : "<!DOCTYPE html><html><body>Sign in to download</body></html>");
    }
    const file = files.get(url);
    if (!file) {
      log(404);
      return void response.writeHead(404).end();
    }
    // What the Hugging Face hub sends with an LFS file: its SHA-256 as X-Linked-ETag.
    sendFile(request, response, file.bytes, { "x-linked-etag": `"${file.sha256}"`, "x-linked-size": String(file.bytes.length) }, log);
  });
  await new Promise<void>((ready) => server.listen(0, "127.0.0.1", ready));
  hub = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.close();
  cdnServer.closeAllConnections();
  cdnServer.close();
  rmSync(home, { recursive: true, force: true });
  rmSync(configDir, { recursive: true, force: true });
  rmSync(emptyConfigDir, { recursive: true, force: true });
});

describe("ducklm setup", () => {
  it("lists the starter preset's files, exact sizes and pinned hashes with --dry-run, and changes nothing", async () => {
    const result = await ducklm(["setup", "--preset", "starter", "--dry-run"], { DUCKLM_CONFIG: emptyConfigDir });
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/qwen2\.5-1\.5b-instruct\s+1\.0 GiB\s+Apache-2\.0\s+thinker, json_compiler, critic, coder, sys_util, orchestrator/);
    expect(result.stdout).toMatch(/nomic-embed-text-v1\.5\s+139\.4 MiB\s+Apache-2\.0\s+embeddings/);
    // Each file pinned: a commit of its repository, its exact size and its SHA-256.
    expect(result.stdout).toContain("hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF@91cad51170dc346986eccefdc2dd33a9da36ead9/qwen2.5-1.5b-instruct-q4_k_m.gguf");
    expect(result.stdout).toContain("1117320736 bytes exactly");
    expect(result.stdout).toContain("sha256 6a1a2eb6d15622bf3c96857206351ba97e1af16c30d7a74ee38970e434e9407e");
    expect(result.stdout).toContain("146146432 bytes exactly");
    expect(result.stdout).toContain("sha256 3e24342164b3d94991ba9692fdc0dd08e3fd7362e0aacc396a9a5c54a544c3b7");
    // The bundled defaults already name these files, and the dry run says so, naming that file.
    expect(result.stdout).toMatch(/Every role is already set to these files \(in the bundled defaults, .*config\/models\.json\)/);
    expect(result.stdout).toMatch(/Nothing was downloaded or changed \(--dry-run\)/);
    expect(existsSync(join(home, "models"))).toBe(false);
    expect(existsSync(join(emptyConfigDir, "models.json"))).toBe(false);
    expect(requests).toEqual([]);
  });

  it("pins every file of the bundled gpu preset: revision, exact size and hash", async () => {
    const result = await ducklm(["setup", "--preset", "gpu", "--dry-run"], { DUCKLM_CONFIG: emptyConfigDir });
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/qwen2\.5-7b-instruct\s+4\.4 GiB/);
    expect(result.stdout).toMatch(/bartowski\/Qwen2\.5-7B-Instruct-GGUF@[0-9a-f]{40}\/Qwen2\.5-7B-Instruct-Q4_K_M\.gguf/);
    expect(result.stdout).toMatch(/4683074240 bytes exactly/);
    expect(result.stdout).toMatch(/sha256 65b8fcd92af6b4fefa935c625d1ac27ea29dcb6ee14589c55a8f115ceaaa1423/);
    expect(result.stdout).toMatch(/Qwen\/Qwen2\.5-Coder-7B-Instruct-GGUF@[0-9a-f]{40}\/qwen2\.5-coder-7b-instruct-q4_k_m\.gguf/);
    expect(result.stdout).not.toMatch(/not pinned/);
    expect(result.stdout).toMatch(/thinker: qwen2\.5-1\.5b-instruct-q4_k_m\.gguf → Qwen2\.5-7B-Instruct-Q4_K_M\.gguf/);
    expect(requests).toEqual([]);
  });

  it("says which files of a preset are not pinned and how they are checked instead", async () => {
    const result = await ducklm(["setup", "--preset", "unpinned", "--dry-run"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/someone-unpinned\s+about 4\.4 GiB/);
    expect(result.stdout).toMatch(/size not pinned: the download states it/);
    expect(result.stdout).toMatch(/sha256 not pinned: checked against the one the hub states, while downloading/);
    expect(requests).toEqual([]);
  });

  it("refuses a catalogue model whose pinned hash or size the hub contradicts, before downloading it", async () => {
    const before = requests.length;
    const hash = await ducklm(["models", "pull", "pinned-other-hash"]);
    expect(hash.code).toBe(1);
    expect(hash.stderr).toMatch(/says good\.gguf has SHA-256 [0-9a-f]{64}, not the (12){32} given; nothing was downloaded/);
    const size = await ducklm(["models", "pull", "pinned-other-size"]);
    expect(size.code).toBe(1);
    expect(size.stderr).toMatch(/says good\.gguf is \d+ bytes, not the \d+ given; nothing was downloaded/);
    expect(requests.slice(before).every((request) => request.method === "HEAD")).toBe(true);
    expect(existsSync(join(home, "models", "good.gguf"))).toBe(false);
  });

  it("asks for a yes before downloading when no terminal can answer", async () => {
    const before = requests.length;
    const result = await ducklm(["setup"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/needs a yes: run `ducklm setup --preset starter --yes`/);
    expect(requests.slice(before)).toEqual([]);
  });

  it("downloads the preset, checks each file against the hub's hash, and assigns every role in the user's models.json", async () => {
    const bundledBefore = readFileSync(bundledModels, "utf8");
    const result = await ducklm(["setup", "--yes"]);
    expect(result.stderr).not.toMatch(/error/);
    expect(result.code).toBe(0);
    expect(result.stdout.match(/matches the catalogue's pinned hash/g)).toHaveLength(2);
    for (const [url, file] of files) {
      if (url.includes("tampered")) continue;
      expect(readFileSync(join(home, "models", url.split("/").at(-1)!)).equals(file.bytes)).toBe(true);
    }
    const models = JSON.parse(readFileSync(join(configDir, "models.json"), "utf8"));
    for (const role of ["thinker", "json_compiler", "critic", "coder", "sys_util", "orchestrator"]) {
      expect(models.roles[role]).toMatchObject({ file: "qwen2.5-1.5b-instruct-q4_k_m.gguf", backend: "auto" });
    }
    expect(models.roles.embeddings).toMatchObject({ file: "nomic-embed-text-v1.5.Q8_0.gguf", dimension: 768 });
    // The package's own defaults are never written.
    expect(readFileSync(bundledModels, "utf8")).toBe(bundledBefore);

    const list = await ducklm(["models", "list", "--json"]);
    const rows = list.stdout.trim().split("\n").map((line) => JSON.parse(line) as { role: string; present: boolean });
    expect(rows.every((row) => row.present)).toBe(true);
  }, 120_000);

  it("does not download a complete file again, and does download one that was changed", async () => {
    let before = requests.length;
    const result = await ducklm(["setup", "--yes"]);
    expect(result.code).toBe(0);
    expect(result.stdout.match(/is already there .*sha256 matches the catalogue's pinned hash\); nothing downloaded/g)).toHaveLength(2);
    expect(result.stdout).toContain(`Every role is already set to these files (in ${join(configDir, "models.json")}).`);
    // Only asked what the files are.
    expect(requests.slice(before).map((request) => request.method)).toEqual(["HEAD", "HEAD"]);

    // A copy damaged in the middle, its size unchanged: fetched again and replaced.
    const model = join(home, "models", "qwen2.5-1.5b-instruct-q4_k_m.gguf");
    const damaged = Buffer.from(chat);
    damaged.write("XXXX", Math.floor(damaged.length / 2));
    writeFileSync(model, damaged);
    before = requests.length;
    const again = await ducklm(["setup", "--yes"]);
    expect(again.code).toBe(0);
    expect(readFileSync(model).equals(chat)).toBe(true);
    expect(requests.slice(before).some((request) => request.method === "GET" && request.url.endsWith("q4_k_m.gguf"))).toBe(true);
  }, 60_000);

  it("keeps each role's own settings when it sets up its model", async () => {
    const models = JSON.parse(readFileSync(join(configDir, "models.json"), "utf8"));
    models.roles.coder = { ...models.roles.coder, context_size: 16384, gpu_layers: 20 };
    models.roles.critic = { server: { base_url: "http://127.0.0.1:8/v1", model: "judge" } };
    writeFileSync(join(configDir, "models.json"), JSON.stringify(models));
    const dry = await ducklm(["setup", "--dry-run"]);
    expect(dry.stdout).toMatch(/critic: the server judge @ http:\/\/127\.0\.0\.1:8\/v1 → qwen2\.5-1\.5b-instruct-q4_k_m\.gguf/);
    expect((await ducklm(["setup", "--yes"])).code).toBe(0);
    const after = JSON.parse(readFileSync(join(configDir, "models.json"), "utf8"));
    expect(after.roles.coder).toMatchObject({ file: "qwen2.5-1.5b-instruct-q4_k_m.gguf", context_size: 16384, gpu_layers: 20 });
    expect(after.roles.critic).toMatchObject({ file: "qwen2.5-1.5b-instruct-q4_k_m.gguf", context_size: 8192 });
    expect(after.roles.critic.server).toBeUndefined();
  }, 60_000);

  it("checks the hash the hub states on its redirect, though its CDN states none", async () => {
    const good = await ducklm(["models", "pull", "hf:hub/redirected/good.gguf"]);
    expect(good.code).toBe(0);
    expect(good.stdout).toMatch(/good\.gguf .*sha256 [0-9a-f]{64}, matches the hub's/);
    const bad = await ducklm(["models", "pull", "hf:hub/redirected/bad.gguf", "--role", "coder"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/bad\.gguf has SHA-256 [0-9a-f]{64}, expected (cd){32} \(as 127\.0\.0\.1:\d+ states\); the download was deleted and nothing was assigned/);
    expect(existsSync(join(home, "models", "bad.gguf"))).toBe(false);
  }, 60_000);

  it("starts afresh from a partial file longer than the file, and checks it", async () => {
    writeFileSync(join(home, "models", "good.gguf.part"), Buffer.concat([chat, Buffer.alloc(5000, 7)]));
    rmSync(join(home, "models", "good.gguf"), { force: true });
    const result = await ducklm(["models", "pull", "hf:hub/redirected/good.gguf"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/matches the hub's/);
    expect(readFileSync(join(home, "models", "good.gguf")).equals(chat)).toBe(true);
  }, 60_000);

  it("refuses a second download of the same file while one runs", async () => {
    // A lock held by a process that is alive (this one).
    writeFileSync(join(home, "models", "good.gguf.lock"), String(process.pid));
    try {
      const result = await ducklm(["models", "pull", "hf:hub/redirected/good.gguf"]);
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(new RegExp(`good\\.gguf is being downloaded by another DuckLM process \\(pid ${process.pid}\\)`));
    } finally {
      rmSync(join(home, "models", "good.gguf.lock"), { force: true });
    }
  });

  it("gives up on a server that stops sending, and resumes on the next run", async () => {
    const first = await ducklm(["models", "pull", "hf:hub/redirected/stalls.gguf"], { DUCKLM_DOWNLOAD_STALL_S: "1" });
    expect(first.code).toBe(1);
    expect(first.stderr).toMatch(/the download of stalls\.gguf broke off at [\d.]+ MiB of [\d.]+ MiB \(the server sent nothing for 1 s; run the same command again to resume from there\)/);
    const second = await ducklm(["models", "pull", "hf:hub/redirected/stalls.gguf"], { DUCKLM_DOWNLOAD_STALL_S: "1" });
    expect(second.code).toBe(0);
    expect(second.stdout).toMatch(/resumed at .*matches the hub's/);
    expect(readFileSync(join(home, "models", "stalls.gguf")).equals(chat)).toBe(true);
  }, 60_000);

  it("refuses what cannot match before downloading it: another size, a hash the hub contradicts", async () => {
    const before = requests.length;
    const size = await ducklm(["models", "pull", "hf:hub/redirected/good.gguf", "--size", "1000"]);
    expect(size.code).toBe(1);
    expect(size.stderr).toMatch(/says good\.gguf is \d+ bytes, not the 1000 given; nothing was downloaded/);
    const hash = await ducklm(["models", "pull", "hf:hub/redirected/good.gguf", "--sha256", "ef".repeat(32)]);
    expect(hash.stderr).toMatch(/says good\.gguf has SHA-256 [0-9a-f]{64}, not the (ef){32} given; nothing was downloaded/);
    expect(requests.slice(before).every((request) => request.method === "HEAD")).toBe(true);
  });

  it("refuses a web page at an address without .gguf, and assigns nothing", async () => {
    const modelsBefore = readFileSync(join(configDir, "models.json"), "utf8");
    const result = await ducklm(["models", "pull", `${hub}/download/12345`, "--role", "thinker"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/HTML or XML page, not a GGUF model.*nothing was saved or assigned/);
    expect(existsSync(join(home, "models", "12345"))).toBe(false);
    expect(readFileSync(join(configDir, "models.json"), "utf8")).toBe(modelsBefore);
  });

  it("sends HF_TOKEN to the hub for a gated repository, never to the CDN it redirects to, and says what to do without it", async () => {
    const without = await ducklm(["models", "pull", "hf:hub/gated/gated.gguf"]);
    expect(without.code).toBe(1);
    expect(without.stderr).toMatch(/HTTP 401.*the repository may be gated — accept its terms on huggingface\.co and set HF_TOKEN/);
    const cdnBefore = cdnRequests.length;
    const withToken = await ducklm(["models", "pull", "hf:hub/gated/gated.gguf"], { HF_TOKEN: "hf_test_token" });
    expect(withToken.code).toBe(0);
    expect(cdnRequests.slice(cdnBefore).length).toBeGreaterThan(0);
    expect(cdnRequests.slice(cdnBefore).every((request) => request.authorization === undefined)).toBe(true);
  }, 60_000);

  it("refuses a file whose bytes do not match the hash the hub states, deletes it and assigns nothing", async () => {
    const modelsBefore = readFileSync(join(configDir, "models.json"), "utf8");
    const result = await ducklm(["models", "pull", "hf:someone/tampered/tampered.gguf", "--role", "thinker"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/DUCK_ERR_MODEL_DOWNLOAD: tampered\.gguf has SHA-256 [0-9a-f]{64}, expected (ab){32} \(as 127\.0\.0\.1:\d+ states\); the download was deleted and nothing was assigned/);
    expect(existsSync(join(home, "models", "tampered.gguf"))).toBe(false);
    expect(existsSync(join(home, "models", "tampered.gguf.part"))).toBe(false);
    expect(readFileSync(join(configDir, "models.json"), "utf8")).toBe(modelsBefore);
  });

  it("runs a task on the models it set up, with backend auto", async () => {
    // One thread: on two cores the tiny model is much faster on one.
    const models = JSON.parse(readFileSync(join(configDir, "models.json"), "utf8"));
    writeFileSync(join(configDir, "models.json"), JSON.stringify({ ...models, threads: 1 }));
    const run = await ducklm(["run", "--json", "say something"]);
    expect([0, 1, 3]).toContain(run.code);
    const events = run.stdout.trim().split("\n").map((line) => JSON.parse(line) as { type: string; payload: { code?: string } });
    expect(events.some((event) => event.type === "model-output-delta")).toBe(true);
    const last = events.at(-1)!;
    expect(last.type).toMatch(/^task-(completed|failed|awaiting-permission)$/);
    if (last.type === "task-failed") expect(last.payload.code).toMatch(/^DUCK_ERR_/);
  }, 180_000);
});
