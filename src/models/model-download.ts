import { createHash, type Hash } from "node:crypto";
import { createReadStream, createWriteStream, existsSync, readFileSync, renameSync, rmSync, statfsSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { ensurePrivateDir, makePrivate } from "../storage/private-files.js";
import { isProcessAlive } from "../utils/process-alive.js";
import { ggufModelProblem } from "./gguf/gguf-header.js";

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
  /** The environment `hf:` sources are resolved in (HF_ENDPOINT, HF_TOKEN). Defaults to the process's. */
  env?: NodeJS.ProcessEnv;
  /** How long the server may send nothing before the download is given up (resumable). Defaults to 60 s. */
  stallMs?: number;
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
  /** Why a file already there could not be compared with the server's (it was unreachable). */
  unverified?: string;
}

const SHA256_HEX = /^[0-9a-f]{64}$/;
/** Room left on the disk beyond the file itself. */
const SPARE_BYTES = 64 * 1024 ** 2;
const MAX_REDIRECTS = 8;

/**
 * `hf:user/repo/path/file.gguf` → the file's download URL on the Hugging Face hub (or the mirror
 * HF_ENDPOINT names, as Hugging Face's own tools read it); `hf:user/repo@REVISION/…` pins a commit
 * (or branch or tag) so the file cannot change under a pinned hash. URLs pass through.
 */
export function resolveModelSource(source: string, env: NodeJS.ProcessEnv = process.env): URL {
  if (source.startsWith("hf:")) {
    const [user, repoAndRevision, ...path] = source.slice(3).split("/");
    const [repo, revision = "main", ...extra] = (repoAndRevision ?? "").split("@");
    if (!user || !repo || path.length === 0 || !path.at(-1)?.endsWith(".gguf") || extra.length > 0 || !/^[A-Za-z0-9._-]+$/.test(revision) || [user, repo, revision, ...path].some((part) => part === "." || part === "..")) {
      throw new DuckError(ErrorCode.InvalidInput, `"${source}" is not of the form hf:user/repo/file.gguf (or hf:user/repo@revision/file.gguf)`);
    }
    const endpoint = (env.HF_ENDPOINT || "https://huggingface.co").replace(/\/+$/, "");
    if (!/^https?:\/\/[^/]/.test(endpoint)) throw new DuckError(ErrorCode.InvalidInput, `HF_ENDPOINT must be an http(s) URL such as https://huggingface.co, not "${endpoint}"`);
    return new URL(`${endpoint}/${user}/${repo}/resolve/${revision}/${path.join("/")}`);
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

const mebibytes = (bytes: number) => (bytes >= 1024 ** 3 ? `${(bytes / 1024 ** 3).toFixed(1)} GiB` : `${(bytes / 1024 ** 2).toFixed(1)} MiB`);

/** What the server says of the file before any byte of it is fetched. */
interface Located {
  /** Where the bytes are (after the hub's redirects, e.g. to its CDN). */
  url: URL;
  size: number | null;
  sha256: string | null;
}

/** The SHA-256 a server states for a file: the hub's LFS object id (`X-Linked-ETag`), when it is one. */
function statedSha256(headers: Headers): string | null {
  const tag = (headers.get("x-linked-etag") ?? "").replace(/^W\//, "").replace(/"/g, "").toLowerCase();
  return SHA256_HEX.test(tag) ? tag : null;
}

function statedSize(headers: Headers, final: boolean): number | null {
  const linked = Number(headers.get("x-linked-size") ?? NaN);
  if (Number.isSafeInteger(linked) && linked > 0) return linked;
  const length = Number(headers.get("content-length") ?? NaN);
  return final && Number.isSafeInteger(length) && length >= 0 ? length : null;
}

/** Bytes free on the disk that holds `folder`, or null when it cannot be told. */
function freeBytes(folder: string): number | null {
  try {
    const stats = statfsSync(folder);
    return stats.bavail * stats.bsize;
  } catch {
    return null;
  }
}

async function feedFile(hash: Hash, file: string): Promise<void> {
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
}

async function sha256Of(file: string): Promise<string> {
  const hash = createHash("sha256");
  await feedFile(hash, file);
  return hash.digest("hex");
}

/** One download at a time per file: a second pull of it (another terminal, setup beside pull) waits its turn by failing clearly. */
function takeLock(lock: string, name: string): () => void {
  for (let attempt = 0; attempt < 2; attempt += 1) {
    try {
      writeFileSync(lock, String(process.pid), { flag: "wx", mode: 0o600 });
      return () => rmSync(lock, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const holder = Number(readFileSync(lock, "utf8"));
      if (Number.isInteger(holder) && holder !== process.pid && isProcessAlive(holder)) {
        throw new DuckError(ErrorCode.ModelDownloadFailed, `${name} is being downloaded by another DuckLM process (pid ${holder}); wait for it, or stop it and run this again`);
      }
      // Left by a process that is gone.
      rmSync(lock, { force: true });
    }
  }
  throw new DuckError(ErrorCode.ModelDownloadFailed, `could not take ${lock}`);
}

/**
 * Downloads a model file into `directory`. Before fetching, it asks the server (following the hub's
 * redirects itself, since the hub states the file's size and SHA-256 on the redirect and its CDN does
 * not) what the file is, and refuses what cannot match: a size or hash given that differs, a disk
 * too small. A `.part` left by an interrupted download is resumed (HTTP Range). The SHA-256 is
 * computed as the bytes arrive and checked against the one given, else the one the server states;
 * the GGUF header is checked before the file takes its name. A file already there whole (its size
 * and hash the server's) is not downloaded again.
 */
export async function downloadModel(source: string, options: DownloadOptions): Promise<DownloadResult> {
  const env = options.env ?? process.env;
  const url = resolveModelSource(source, env);
  const name = decodeURIComponent(basename(url.pathname)) || "model.gguf";
  const given = options.sha256?.toLowerCase() ?? null;
  if (given !== null && !SHA256_HEX.test(given)) throw new DuckError(ErrorCode.InvalidInput, "--sha256 must be 64 hexadecimal digits");
  ensurePrivateDir(dirname(options.directory));
  ensurePrivateDir(options.directory);
  const target = join(options.directory, name);
  const partial = `${target}.part`;
  const doFetch = options.fetch ?? fetch;
  // A token for gated repositories goes to the hub only, never to where it redirects.
  const token = source.startsWith("hf:") && env.HF_TOKEN ? env.HF_TOKEN : null;
  const request = async (at: URL, init: { method?: string; range?: number; signal?: AbortSignal }) => {
    const headers: Record<string, string> = {};
    if (init.range !== undefined && init.range > 0) headers.Range = `bytes=${init.range}-`;
    if (token && at.host === url.host) headers.Authorization = `Bearer ${token}`;
    try {
      return await doFetch(at, { method: init.method ?? "GET", headers, redirect: "manual", ...(init.signal ? { signal: init.signal } : {}) });
    } catch (error) {
      if (init.signal?.aborted) throw init.signal.reason;
      throw new DuckError(ErrorCode.ModelDownloadFailed, `could not reach ${at.host} to download ${name} (${(error as Error).message}); check the address and the network, then run the same command again`, { cause: error });
    }
  };
  const refused = (status: number, statusText: string, at: URL) => {
    const gated = status === 401 || status === 403 ? (source.startsWith("hf:") ? (token ? ": HF_TOKEN was refused, or the repository's terms are not accepted on huggingface.co" : ": the repository may be gated — accept its terms on huggingface.co and set HF_TOKEN") : ": the server wants a sign-in") : "";
    return new DuckError(ErrorCode.ModelDownloadFailed, `download of ${at.href} failed: HTTP ${status} ${statusText}${gated}`);
  };
  /** Follows redirects itself, collecting what each hop says of the file. */
  const follow = async (method: "HEAD" | "GET", range: number, signal?: AbortSignal) => {
    let at = url;
    let sha256: string | null = null;
    let size: number | null = null;
    for (let hop = 0; hop <= MAX_REDIRECTS; hop += 1) {
      const response = await request(at, { method, range, ...(signal ? { signal } : {}) });
      sha256 ??= statedSha256(response.headers);
      const location = response.headers.get("location");
      if (response.status >= 300 && response.status < 400 && location) {
        size ??= statedSize(response.headers, false);
        await response.body?.cancel();
        at = new URL(location, at);
        continue;
      }
      return { response, at, sha256, size };
    }
    throw new DuckError(ErrorCode.ModelDownloadFailed, `download of ${url.href} was redirected more than ${MAX_REDIRECTS} times`);
  };

  const release = takeLock(`${target}.lock`, name);
  try {
    // What the server says of the file.
    let located: Located | null = null;
    let unreachable: string | null = null;
    try {
      // A server that does not answer is given up on as one that stops sending would be.
      const probeSignal = AbortSignal.any([...(options.signal ? [options.signal] : []), AbortSignal.timeout(options.stallMs ?? 60_000)]);
      const probe = await follow("HEAD", 0, probeSignal).catch((error: unknown) => {
        if (probeSignal.aborted && !options.signal?.aborted) throw new DuckError(ErrorCode.ModelDownloadFailed, `could not reach ${url.host} to download ${name} (no answer within ${Math.round((options.stallMs ?? 60_000) / 1000)} s); check the address and the network, then run the same command again`);
        throw error;
      });
      await probe.response.body?.cancel();
      if (probe.response.ok) located = { url: probe.at, size: probe.size ?? statedSize(probe.response.headers, true), sha256: probe.sha256 };
      else if (probe.response.status !== 405 && probe.response.status !== 501) throw refused(probe.response.status, probe.response.statusText, probe.at);
    } catch (error) {
      if (options.signal?.aborted) throw error;
      if (!(DuckError.isInstance(error) && error.message.startsWith("could not reach"))) throw error;
      unreachable = error.message;
    }
    const expectedSize = options.size ?? located?.size ?? null;
    const expectedHash = given ?? located?.sha256 ?? null;
    const against = (hash: string | null) => (hash === null ? null : given ? ("given" as const) : ("server" as const));
    if (options.size !== undefined && located?.size != null && located.size !== options.size) {
      throw new DuckError(ErrorCode.ModelDownloadFailed, `${url.host} says ${name} is ${located.size} bytes, not the ${options.size} given; nothing was downloaded`);
    }
    if (given && located?.sha256 && located.sha256 !== given) {
      throw new DuckError(ErrorCode.ModelDownloadFailed, `${url.host} says ${name} has SHA-256 ${located.sha256}, not the ${given} given; nothing was downloaded`);
    }

    if (existsSync(target)) {
      const have = statSync(target).size;
      if (unreachable) {
        // Nothing to compare it with; it stays what it is, and the caller says so.
        if ((await ggufModelProblem(target)) === null) return { file: target, bytes: have, resumedFrom: 0, sha256: await sha256Of(target), checkedAgainst: null, alreadyPresent: true, unverified: unreachable };
        throw new DuckError(ErrorCode.ModelDownloadFailed, unreachable);
      }
      if (expectedSize === null || have === expectedSize) {
        const digest = await sha256Of(target);
        if ((expectedHash === null || digest === expectedHash) && (await ggufModelProblem(target)) === null) {
          return { file: target, bytes: have, resumedFrom: 0, sha256: digest, checkedAgainst: against(expectedHash), alreadyPresent: true };
        }
      }
      // Another file under that name, cut short or changed: fetched afresh beside it, replacing it once whole.
    }
    if (unreachable) throw new DuckError(ErrorCode.ModelDownloadFailed, unreachable);

    // A part longer than the file is not a part of it.
    if (existsSync(partial) && expectedSize !== null && statSync(partial).size > expectedSize) rmSync(partial, { force: true });
    const resumeFrom = existsSync(partial) ? statSync(partial).size : 0;
    const free = freeBytes(options.directory);
    if (expectedSize !== null && free !== null && expectedSize - resumeFrom + SPARE_BYTES > free) {
      throw new DuckError(ErrorCode.ModelDownloadFailed, `${name} needs ${mebibytes(expectedSize - resumeFrom)} more in ${options.directory}, and the disk has ${mebibytes(free)} free; make room (or choose another --home), then run this again`);
    }

    const stallMs = options.stallMs ?? 60_000;
    const stall = new AbortController();
    const signal = options.signal ? AbortSignal.any([options.signal, stall.signal]) : stall.signal;
    const hash = createHash("sha256");
    let start = 0;
    const complete = resumeFrom > 0 && expectedSize !== null && resumeFrom === expectedSize;
    if (!complete) {
      const fetched = await follow("GET", resumeFrom, signal);
      const { response } = fetched;
      if (response.status === 416 && resumeFrom > 0) {
        // Past the end: the part is no part of this file. Start again.
        await response.body?.cancel();
        rmSync(partial, { force: true });
        throw new DuckError(ErrorCode.ModelDownloadFailed, `the partial download of ${name} did not fit the file on the server and was deleted; run the same command again to download it afresh`);
      }
      if (!response.ok || !response.body) throw refused(response.status, response.statusText, fetched.at);
      const resumed = response.status === 206;
      start = resumed ? resumeFrom : 0;
      if (resumed) await feedFile(hash, partial);
      let received = start;
      const total = expectedSize ?? statedSize(response.headers, true);
      let timer = setTimeout(() => stall.abort(), stallMs);
      const body = Readable.fromWeb(response.body as import("node:stream/web").ReadableStream<Uint8Array>);
      const hashing = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          clearTimeout(timer);
          timer = setTimeout(() => stall.abort(), stallMs);
          hash.update(chunk);
          received += chunk.length;
          options.onProgress?.({ received, total });
          done(null, chunk);
        },
      });
      try {
        await pipeline(body, hashing, createWriteStream(partial, { flags: resumed ? "a" : "w", mode: 0o600 }), { signal });
      } catch (error) {
        if (options.signal?.aborted) {
          const at = existsSync(partial) ? statSync(partial).size : 0;
          throw new DuckError(ErrorCode.Cancelled, `the download of ${name} was stopped at ${mebibytes(at)}${total ? ` of ${mebibytes(total)}` : ""}; run the same command again to resume from there`, { cause: error });
        }
        const at = existsSync(partial) ? statSync(partial).size : 0;
        const code = (error as NodeJS.ErrnoException).code;
        const why =
          code === "ENOSPC"
            ? `the disk holding ${options.directory} is full; make room, then run the same command again to resume`
            : stall.signal.aborted
              ? `the server sent nothing for ${Math.round(stallMs / 1000)} s; run the same command again to resume from there`
              : `${(error as Error).message}; run the same command again to resume from there`;
        throw new DuckError(ErrorCode.ModelDownloadFailed, `the download of ${name} broke off at ${mebibytes(at)}${total ? ` of ${mebibytes(total)}` : ""} (${why})`, { cause: error });
      } finally {
        clearTimeout(timer);
      }
    } else {
      await feedFile(hash, partial);
    }
    makePrivate(partial);
    const bytes = statSync(partial).size;
    if (expectedSize !== null && bytes !== expectedSize) {
      if (bytes > expectedSize) rmSync(partial, { force: true });
      throw new DuckError(ErrorCode.ModelDownloadFailed, `the download of ${name} ended at ${mebibytes(bytes)} of ${mebibytes(expectedSize)}; run the same command again to ${bytes > expectedSize ? "download it afresh" : "resume from there"}`);
    }
    // A sign-in page or an error page saved as the model must not become a role's model.
    const problem = await ggufModelProblem(partial);
    if (problem) {
      rmSync(partial, { force: true });
      throw new DuckError(ErrorCode.InvalidInput, `what ${url} sent ${problem}; nothing was saved or assigned: check the address (does it need a sign-in or a token?)`);
    }
    const digest = hash.digest("hex");
    if (expectedHash !== null && digest !== expectedHash) {
      // Not the file asked for: resuming it would only grow the wrong bytes, so it goes.
      rmSync(partial, { force: true });
      const kept = existsSync(target) ? `; ${target} was left as it was` : "";
      throw new DuckError(ErrorCode.ModelDownloadFailed, `${name} has SHA-256 ${digest}, expected ${expectedHash} (${given ? "as given" : `as ${url.host} states`}); the download was deleted and nothing was assigned${kept}`);
    }
    renameSync(partial, target);
    return { file: target, bytes, resumedFrom: start, sha256: digest, checkedAgainst: against(expectedHash), alreadyPresent: false };
  } finally {
    release();
  }
}
