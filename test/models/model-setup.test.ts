import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fixtureModel, fixtureModels } from "../helpers/fixture-models.js";
import { makeTempDir } from "../helpers/test-runtime.js";

const root = resolve(import.meta.dirname, "../..");
const tsxLoader = import.meta.resolve("tsx");
const home = makeTempDir("ducklm-setup-home-");
// The user's config folder starts empty: no models.json of their own.
const configDir = makeTempDir("ducklm-setup-config-");
const bundledModels = join(root, "config", "models.json");
let server: Server;
let hub = "";
const requests: Array<{ url: string; range: string | undefined; status: number }> = [];
const files = new Map<string, { bytes: Buffer; sha256: string }>();

function ducklm(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, ["--import", tsxLoader, join(root, "src/cli/main.ts"), ...args], {
      cwd: home,
      env: { ...process.env, DUCKLM_HOME: home, DUCKLM_CONFIG: configDir, HF_ENDPOINT: hub },
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

beforeAll(async () => {
  const chat = readFileSync(fixtureModels().chat);
  // An embedding model of the dimension the catalogue gives nomic-embed-text.
  const embedding = readFileSync(fixtureModel("tiny-embedding-768", { seed: 2, blockCount: 1, embeddingLength: 768, name: "ducklm-tiny-embedding-768" }));
  files.set("/Qwen/Qwen2.5-1.5B-Instruct-GGUF/resolve/main/qwen2.5-1.5b-instruct-q4_k_m.gguf", { bytes: chat, sha256: sha256(chat) });
  files.set("/nomic-ai/nomic-embed-text-v1.5-GGUF/resolve/main/nomic-embed-text-v1.5.Q8_0.gguf", { bytes: embedding, sha256: sha256(embedding) });
  // The hub states one hash and sends other bytes.
  files.set("/someone/tampered/resolve/main/tampered.gguf", { bytes: chat, sha256: "ab".repeat(32) });
  server = createServer((request, response) => {
    const file = files.get(request.url ?? "");
    const range = request.headers.range;
    const answer = (status: number, headers: Record<string, string>, body?: Buffer) => {
      requests.push({ url: request.url ?? "", range, status });
      response.writeHead(status, headers);
      response.end(body);
    };
    if (!file) return answer(404, {});
    // What the Hugging Face hub sends with an LFS file: its SHA-256 as X-Linked-ETag.
    const linked = { "x-linked-etag": `"${file.sha256}"`, "x-linked-size": String(file.bytes.length) };
    const start = range ? Number(/bytes=(\d+)-/.exec(range)![1]) : 0;
    if (start >= file.bytes.length) return answer(416, { ...linked, "content-range": `bytes */${file.bytes.length}` });
    if (start > 0) return answer(206, { ...linked, "content-length": String(file.bytes.length - start), "content-range": `bytes ${start}-${file.bytes.length - 1}/${file.bytes.length}` }, file.bytes.subarray(start));
    answer(200, { ...linked, "content-length": String(file.bytes.length) }, file.bytes);
  });
  await new Promise<void>((ready) => server.listen(0, "127.0.0.1", ready));
  hub = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.close();
  rmSync(home, { recursive: true, force: true });
  rmSync(configDir, { recursive: true, force: true });
});

describe("ducklm setup", () => {
  it("lists the starter preset's files, sizes and hashes with --dry-run, and changes nothing", async () => {
    const result = await ducklm(["setup", "--preset", "starter", "--dry-run"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/qwen2\.5-1\.5b-instruct\s+about 1\.0 GiB\s+Apache-2\.0\s+thinker, json_compiler, critic, coder, sys_util, orchestrator/);
    expect(result.stdout).toMatch(/nomic-embed-text-v1\.5\s+about 139\.2 MiB\s+Apache-2\.0\s+embeddings/);
    expect(result.stdout).toContain("hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF/qwen2.5-1.5b-instruct-q4_k_m.gguf");
    expect(result.stdout).toMatch(/sha256 checked against the one the hub states, while downloading/);
    expect(result.stdout).toMatch(/Nothing was downloaded or changed \(--dry-run\)/);
    expect(existsSync(join(home, "models"))).toBe(false);
    expect(existsSync(join(configDir, "models.json"))).toBe(false);
    expect(requests).toEqual([]);
  });

  it("asks for a yes before downloading when no terminal can answer", async () => {
    const result = await ducklm(["setup"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/needs a yes: run `ducklm setup --preset starter --yes`/);
    expect(requests).toEqual([]);
  });

  it("downloads the preset, checks each file against the hub's hash, and assigns every role in the user's models.json", async () => {
    const bundledBefore = readFileSync(bundledModels, "utf8");
    const result = await ducklm(["setup", "--yes"]);
    expect(result.stderr).not.toMatch(/error/);
    expect(result.code).toBe(0);
    expect(result.stdout.match(/matches the hub's/g)).toHaveLength(2);
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

  it("does not download a complete file again", async () => {
    const before = requests.length;
    const result = await ducklm(["setup", "--yes"]);
    expect(result.code).toBe(0);
    expect(result.stdout.match(/is already there .*nothing downloaded/g)).toHaveLength(2);
    // Only probes past the end of each copy, answered "nothing there".
    expect(requests.slice(before).map((request) => request.status)).toEqual([416, 416]);
  }, 60_000);

  it("refuses a file whose bytes do not match the hash the hub states, deletes it and assigns nothing", async () => {
    const modelsBefore = readFileSync(join(configDir, "models.json"), "utf8");
    const result = await ducklm(["models", "pull", "hf:someone/tampered/tampered.gguf", "--role", "thinker"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/DUCK_ERR_MODEL_DOWNLOAD: tampered\.gguf has SHA-256 [0-9a-f]{64}, expected (ab){32} \(as 127\.0\.0\.1:\d+ states\); it was deleted and nothing was assigned/);
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
