import { createHash, type Hash } from "node:crypto";
import { createReadStream, createWriteStream, existsSync, mkdirSync, renameSync, rmSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { ggufFileProblem } from "./gguf/gguf-header.js";

export interface DownloadProgress {
  received: number;
  total: number | null;
}

export interface DownloadOptions {
  /** Where the file goes. */
  directory: string;
  /** Expected SHA-256 (hex); the file is refused when it differs. Else the hub's own, when it says. */
  sha256?: string;
  /** Expected size in bytes. */
  size?: number;
  onProgress?: (progress: DownloadProgress) => void;
  signal?: AbortSignal;
  /** The fetch to use (tests). Defaults to the global one. */
  fetch?: typeof fetch;
  /** The environment `hf:` sources are resolved in (HF_ENDPOINT). Defaults to the process's. */
  env?: NodeJS.ProcessEnv;
}

export interface DownloadResult {
  file: string;
  bytes: number;
  resumedFrom: number;
  sha256: string;
  /** Where the expected SHA-256 came from, if one was checked. */
  checkedAgainst: "given" | "server" | null;
  /** The file was already complete in the models folder; nothing was downloaded. */
  alreadyPresent: boolean;
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

/**
 * `hf:user/repo/path/file.gguf` → the file's download URL on the Hugging Face hub (or the mirror
 * HF_ENDPOINT names, as Hugging Face's own tools read it); URLs pass through.
 */
export function resolveModelSource(source: string, env: NodeJS.ProcessEnv = process.env): URL {
  if (source.startsWith("hf:")) {
    const [user, repo, ...path] = source.slice(3).split("/");
    if (!user || !repo || path.length === 0 || !path.at(-1)?.endsWith(".gguf")) {
      throw new DuckError(ErrorCode.InvalidInput, `"${source}" is not of the form hf:user/repo/file.gguf`);
    }
    const endpoint = (env.HF_ENDPOINT || "https://huggingface.co").replace(/\/+$/, "");
    return new URL(`${endpoint}/${user}/${repo}/resolve/main/${path.join("/")}`);
  }
  let url: URL;
  try {
    url = new URL(source);
  } catch {
    throw new DuckError(ErrorCode.InvalidInput, `"${source}" is neither a URL nor hf:user/repo/file.gguf`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new DuckError(ErrorCode.InvalidInput, `only http(s) URLs can be pulled, not ${url.protocol}`);
  return url;
}

/** The SHA-256 a server states for the file: the hub's LFS object id (`X-Linked-ETag`), when it is one. */
function serverSha256(response: Response): string | null {
  const tag = (response.headers.get("x-linked-etag") ?? "").replace(/^W\//, "").replace(/"/g, "").toLowerCase();
  return SHA256_HEX.test(tag) ? tag : null;
}

async function feedFile(hash: Hash, file: string): Promise<void> {
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
}

async function sha256Of(file: string): Promise<string> {
  const hash = createHash("sha256");
  await feedFile(hash, file);
  return hash.digest("hex");
}

const mebibytes = (bytes: number) => `${(bytes / 1024 ** 2).toFixed(1)} MiB`;

/**
 * Downloads a model file into `directory`, resuming a `.part` file left by an interrupted download
 * (HTTP Range). The SHA-256 is computed as the bytes arrive and checked against the one given, else
 * the one the hub states; size and GGUF header are checked before the file takes its name. A file
 * already complete there is not downloaded again.
 */
export async function downloadModel(source: string, options: DownloadOptions): Promise<DownloadResult> {
  const url = resolveModelSource(source, options.env);
  const name = decodeURIComponent(basename(url.pathname)) || "model.gguf";
  mkdirSync(options.directory, { recursive: true });
  const target = join(options.directory, name);
  const partial = `${target}.part`;
  const doFetch = options.fetch ?? fetch;
  const given = options.sha256?.toLowerCase() ?? null;
  if (given !== null && !SHA256_HEX.test(given)) throw new DuckError(ErrorCode.InvalidInput, "--sha256 must be 64 hexadecimal digits");
  const request = async (from: number) => {
    try {
      return await doFetch(url, { headers: from > 0 ? { Range: `bytes=${from}-` } : {}, ...(options.signal ? { signal: options.signal } : {}) });
    } catch (error) {
      throw new DuckError(ErrorCode.ModelDownloadFailed, `could not reach ${url.host} to download ${name} (${(error as Error).message}); check the address and the network, then run the same command again`, { cause: error });
    }
  };

  if (existsSync(target)) {
    const have = statSync(target).size;
    // Asking for what lies past the end of our copy: "nothing" means it is whole.
    const probe = await request(have);
    await probe.body?.cancel();
    const expected = given ?? serverSha256(probe);
    if (probe.status === 416 && (options.size === undefined || options.size === have)) {
      const digest = await sha256Of(target);
      if (expected === null || digest === expected) {
        return { file: target, bytes: have, resumedFrom: 0, sha256: digest, checkedAgainst: expected === null ? null : given ? "given" : "server", alreadyPresent: true };
      }
    }
    // Another file under that name, or one cut short: fetched afresh beside it, replacing it once whole.
  }

  const resumeFrom = existsSync(partial) ? statSync(partial).size : 0;
  const response = await request(resumeFrom);
  if (response.status === 416 && resumeFrom > 0) {
    // The part file is already whole: nothing left to fetch.
  } else if (!response.ok || !response.body) {
    throw new DuckError(ErrorCode.ModelDownloadFailed, `download of ${url} failed: HTTP ${response.status} ${response.statusText}`);
  }
  const expected = given ?? serverSha256(response);
  const resumed = response.status === 206;
  const start = resumed ? resumeFrom : 0;
  const length = Number(response.headers.get("content-length") ?? NaN);
  const total = response.status === 416 ? resumeFrom : Number.isFinite(length) ? start + length : (options.size ?? null);
  const hash = createHash("sha256");
  // What is already on disk counts first; the rest is hashed as it is written.
  if (response.status === 416 || resumed) await feedFile(hash, partial);
  if (response.status !== 416 && response.body) {
    let received = start;
    const body = Readable.fromWeb(response.body as import("node:stream/web").ReadableStream<Uint8Array>);
    const hashing = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        hash.update(chunk);
        received += chunk.length;
        options.onProgress?.({ received, total });
        done(null, chunk);
      },
    });
    try {
      await pipeline(body, hashing, createWriteStream(partial, { flags: resumed ? "a" : "w" }));
    } catch (error) {
      if (options.signal?.aborted) throw error;
      const at = existsSync(partial) ? statSync(partial).size : 0;
      throw new DuckError(
        ErrorCode.ModelDownloadFailed,
        `the download of ${name} broke off at ${mebibytes(at)}${total ? ` of ${mebibytes(total)}` : ""} (${(error as Error).message}); run the same command again to resume from there`,
        { cause: error },
      );
    }
  }
  const bytes = statSync(partial).size;
  if (total !== null && bytes !== total) {
    throw new DuckError(ErrorCode.ModelDownloadFailed, `the download of ${name} stopped at ${mebibytes(bytes)} of ${mebibytes(total)}; run the same command again to resume from there`);
  }
  if (options.size !== undefined && bytes !== options.size) {
    throw new DuckError(ErrorCode.InvalidInput, `${name} is ${bytes} bytes, expected ${options.size}`);
  }
  // A sign-in page or an error page saved under the model's name must not become a role's model.
  const problem = name.toLowerCase().endsWith(".gguf") ? ggufFileProblem(partial) : null;
  if (problem) {
    rmSync(partial, { force: true });
    throw new DuckError(ErrorCode.InvalidInput, `what ${url} sent ${problem}; nothing was saved or assigned: check the address (does it need a sign-in or a token?)`);
  }
  const digest = hash.digest("hex");
  if (expected !== null && digest !== expected) {
    // Not the file asked for: resuming it would only grow the wrong bytes, so it goes.
    rmSync(partial, { force: true });
    throw new DuckError(
      ErrorCode.ModelDownloadFailed,
      `${name} has SHA-256 ${digest}, expected ${expected} (${given ? "as given" : `as ${url.host} states`}); it was deleted and nothing was assigned`,
    );
  }
  renameSync(partial, target);
  return { file: target, bytes, resumedFrom: resumed ? resumeFrom : 0, sha256: digest, checkedAgainst: expected === null ? null : given ? "given" : "server", alreadyPresent: false };
}
