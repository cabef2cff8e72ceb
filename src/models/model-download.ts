import { createHash } from "node:crypto";
import { createReadStream, createWriteStream, existsSync, mkdirSync, renameSync, rmSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import { Readable } from "node:stream";
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
  /** Expected SHA-256 (hex); the file is refused when it differs. */
  sha256?: string;
  /** Expected size in bytes. */
  size?: number;
  onProgress?: (progress: DownloadProgress) => void;
  signal?: AbortSignal;
  /** The fetch to use (tests). Defaults to the global one. */
  fetch?: typeof fetch;
}

export interface DownloadResult {
  file: string;
  bytes: number;
  resumedFrom: number;
  sha256: string;
}

/** `hf:user/repo/path/file.gguf` → the file's download URL on the Hugging Face hub; URLs pass through. */
export function resolveModelSource(source: string): URL {
  if (source.startsWith("hf:")) {
    const [user, repo, ...path] = source.slice(3).split("/");
    if (!user || !repo || path.length === 0 || !path.at(-1)?.endsWith(".gguf")) {
      throw new DuckError(ErrorCode.InvalidInput, `"${source}" is not of the form hf:user/repo/file.gguf`);
    }
    return new URL(`https://huggingface.co/${user}/${repo}/resolve/main/${path.join("/")}`);
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

async function sha256Of(file: string): Promise<string> {
  const hash = createHash("sha256");
  await pipeline(createReadStream(file), hash);
  return hash.digest("hex");
}

/**
 * Downloads a model file into `directory`, resuming a `.part` file left by an interrupted download
 * (HTTP Range), then checks size and checksum and moves it into place.
 */
export async function downloadModel(source: string, options: DownloadOptions): Promise<DownloadResult> {
  const url = resolveModelSource(source);
  const name = decodeURIComponent(basename(url.pathname)) || "model.gguf";
  mkdirSync(options.directory, { recursive: true });
  const target = join(options.directory, name);
  const partial = `${target}.part`;
  const doFetch = options.fetch ?? fetch;
  const resumeFrom = existsSync(partial) ? statSync(partial).size : 0;
  const response = await doFetch(url, {
    headers: resumeFrom > 0 ? { Range: `bytes=${resumeFrom}-` } : {},
    ...(options.signal ? { signal: options.signal } : {}),
  });
  if (response.status === 416 && resumeFrom > 0) {
    // The part file is already whole: nothing left to fetch.
  } else if (!response.ok || !response.body) {
    throw new DuckError(ErrorCode.InvalidInput, `download of ${url} failed: HTTP ${response.status} ${response.statusText}`);
  }
  const resumed = response.status === 206;
  const start = resumed ? resumeFrom : 0;
  const length = Number(response.headers.get("content-length") ?? NaN);
  const total = Number.isFinite(length) ? start + length : (options.size ?? null);
  if (response.status !== 416 && response.body) {
    let received = start;
    const body = Readable.fromWeb(response.body as import("node:stream/web").ReadableStream<Uint8Array>);
    body.on("data", (chunk: Buffer) => {
      received += chunk.length;
      options.onProgress?.({ received, total });
    });
    await pipeline(body, createWriteStream(partial, { flags: resumed ? "a" : "w" }));
  }
  const bytes = statSync(partial).size;
  if (total !== null && bytes !== total) {
    throw new DuckError(ErrorCode.InvalidInput, `download of ${url} stopped at ${bytes} of ${total} bytes; run the same pull again to resume`);
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
  const digest = await sha256Of(partial);
  if (options.sha256 && digest !== options.sha256.toLowerCase()) {
    throw new DuckError(ErrorCode.InvalidInput, `${name} has SHA-256 ${digest}, expected ${options.sha256}; the partial file is kept at ${partial}`);
  }
  renameSync(partial, target);
  return { file: target, bytes, resumedFrom: resumed ? resumeFrom : 0, sha256: digest };
}
