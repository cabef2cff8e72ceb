import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import { isIP } from "node:net";
import { createRequire } from "node:module";
import type TurndownService from "turndown";
import { z } from "zod";
import type { IntegrationsConfig } from "../config/config-schemas.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { defineTool, type AnyToolDefinition, type ToolOutput } from "../tools/tool-definition.js";
import { guardedLookup, isPublicAddress } from "../utils/network-addresses.js";
import { scopedSignal } from "../utils/scoped-signal.js";

export { isPublicAddress };

type FetchConfig = IntegrationsConfig["web"]["fetch"];
type SearchConfig = IntegrationsConfig["web"]["search"];

/** A DNS lookup for fetches: public addresses only, unless private ones are allowed. */
function fetchLookup(allowPrivate: boolean) {
  return guardedLookup((address) => allowPrivate || isPublicAddress(address));
}

const TEXT_TYPES = /^(text\/|application\/(json|xml|xhtml\+xml|rss\+xml|atom\+xml|ld\+json|javascript)\b)/i;

export interface FetchedPage {
  url: string;
  status: number;
  contentType: string;
  body: string;
  truncated: boolean;
}

interface FetchOptions {
  maxBytes: number;
  timeoutMs: number;
  maxRedirects: number;
  allowPrivateNetwork: boolean;
  userAgent: string;
  signal: AbortSignal;
  accept?: string;
  /** Whether a redirect may be followed to a URL: null if so, else why not (the host policy's say). */
  mayGoTo?: ((url: string) => string | null) | undefined;
}

function requestOnce(url: URL, options: FetchOptions, signal: AbortSignal): Promise<IncomingMessage> {
  const host = url.hostname.replace(/^\[|\]$/g, "");
  // A literal address is never looked up, so it is checked here.
  if (isIP(host) && !options.allowPrivateNetwork && !isPublicAddress(host)) {
    return Promise.reject(new DuckError(ErrorCode.WebAddressBlocked, `${host} is not a public address (web.fetch.allow_private_network is off)`));
  }
  const client = url.protocol === "https:" ? https : http;
  return new Promise((resolve, reject) => {
    const request = client.get(url, {
      headers: { "user-agent": options.userAgent, accept: options.accept ?? "text/html,text/plain,text/markdown,application/json;q=0.9,*/*;q=0.5" },
      lookup: fetchLookup(options.allowPrivateNetwork),
      signal,
    });
    request.once("response", resolve);
    request.once("error", reject);
  });
}

async function readCapped(response: IncomingMessage, maxBytes: number): Promise<{ bytes: Buffer; truncated: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response as AsyncIterable<Buffer>) {
    const room = maxBytes - size;
    if (chunk.length >= room) {
      chunks.push(chunk.subarray(0, room));
      response.destroy();
      return { bytes: Buffer.concat(chunks), truncated: true };
    }
    chunks.push(chunk);
    size += chunk.length;
  }
  return { bytes: Buffer.concat(chunks), truncated: false };
}

function decode(bytes: Buffer, contentType: string): string {
  const charset = /charset=([^;\s]+)/i.exec(contentType)?.[1]?.replace(/"/g, "") ?? "utf-8";
  try {
    return new TextDecoder(charset).decode(bytes);
  } catch {
    return new TextDecoder("utf-8").decode(bytes);
  }
}

/**
 * GETs a URL with the limits of integrations.json: http(s) only, redirects followed and re-checked,
 * non-public addresses refused at connection time, text content only, body cut at `maxBytes`.
 */
export async function fetchText(target: string, options: FetchOptions): Promise<FetchedPage> {
  const scope = scopedSignal([options.signal], options.timeoutMs, `fetching ${target.slice(0, 200)}`);
  try {
    return await fetchWithin(target, options, scope.signal);
  } finally {
    scope.dispose();
  }
}

async function fetchWithin(target: string, options: FetchOptions, signal: AbortSignal): Promise<FetchedPage> {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    throw new DuckError(ErrorCode.InvalidInput, `not a URL: ${target.slice(0, 200)}`);
  }
  for (let redirects = 0; ; redirects += 1) {
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new DuckError(ErrorCode.InvalidInput, `only http and https URLs can be fetched, not ${url.protocol}`);
    if (url.username || url.password) throw new DuckError(ErrorCode.InvalidInput, "URLs with credentials are not fetched");
    let response: IncomingMessage;
    try {
      response = await requestOnce(url, options, signal);
    } catch (error) {
      if (DuckError.isInstance(error)) throw error;
      if (signal.aborted && !options.signal.aborted) throw new DuckError(ErrorCode.WebFetchFailed, `${url.href} did not answer within ${options.timeoutMs} ms`);
      if (options.signal.aborted) throw error;
      throw new DuckError(ErrorCode.WebFetchFailed, `could not fetch ${url.href}: ${(error as Error).message}`, { cause: error });
    }
    const status = response.statusCode ?? 0;
    if (status >= 300 && status < 400 && response.headers.location) {
      response.resume();
      if (redirects >= options.maxRedirects) throw new DuckError(ErrorCode.WebFetchFailed, `more than ${options.maxRedirects} redirects from ${target}`);
      url = new URL(response.headers.location, url);
      // Where a redirect leads is a request of its own: the host policy decides it as it did the first.
      const refusal = options.mayGoTo?.(url.href) ?? null;
      if (refusal) throw new DuckError(ErrorCode.PermissionDenied, `${target.slice(0, 200)} redirected to ${url.href.slice(0, 200)}, which was not followed: ${refusal}`);
      continue;
    }
    const contentType = response.headers["content-type"] ?? "text/plain";
    if (status >= 400) {
      response.resume();
      throw new DuckError(ErrorCode.WebFetchFailed, `${url.href} answered HTTP ${status}`, { details: { status } });
    }
    if (!TEXT_TYPES.test(contentType)) {
      response.destroy();
      throw new DuckError(ErrorCode.WebContentType, `${url.href} is ${contentType}, not text`, { details: { content_type: contentType } });
    }
    try {
      const { bytes, truncated } = await readCapped(response, options.maxBytes);
      return { url: url.href, status, contentType, body: decode(bytes, contentType), truncated };
    } catch (error) {
      if (signal.aborted && !options.signal.aborted) throw new DuckError(ErrorCode.WebFetchFailed, `${url.href} did not finish within ${options.timeoutMs} ms`);
      throw error;
    }
  }
}

let converter: TurndownService | null = null;

/** The HTML converter, loaded with its DOM on the first page read rather than at every start. */
function turndown(): TurndownService {
  if (!converter) {
    const Turndown = createRequire(import.meta.url)("turndown") as typeof TurndownService;
    converter = new Turndown({ headingStyle: "atx", codeBlockStyle: "fenced", bulletListMarker: "-" });
    converter.remove(["script", "style", "noscript", "iframe", "svg", "canvas", "template", "head", "form", "nav", "footer"]);
  }
  return converter;
}

/** Readable markdown (or plain text) of an HTML page, with its title. */
export function htmlToReadable(html: string, format: "markdown" | "text"): { title: string | null; text: string } {
  const title = /<title[^>]*>([\s\S]*?)<\/title>/i.exec(html)?.[1]?.replace(/\s+/g, " ").trim() ?? null;
  const main = /<(main|article)\b[\s\S]*?<\/\1>/i.exec(html)?.[0] ?? /<body\b[\s\S]*<\/body>/i.exec(html)?.[0] ?? html;
  const markdown = turndown().turndown(main).replace(/\n{3,}/g, "\n\n").trim();
  if (format === "markdown") return { title, text: markdown };
  const text = markdown
    .replace(/!\[[^\]]*\]\([^)]*\)/g, "")
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/^#+\s*/gm, "")
    .replace(/[*_`]{1,3}/g, "");
  return { title, text };
}

const WebFetchInput = z.object({
  url: z.string().min(1).max(4000).describe("an http or https URL"),
  format: z.enum(["markdown", "text"]).default("markdown").describe("how HTML is returned"),
});

export function createWebFetchTool(config: FetchConfig): AnyToolDefinition {
  return defineTool({
    name: "web_fetch",
    description: "Fetch a web page (http/https) and return its readable text as markdown. Public addresses only.",
    inputSchema: WebFetchInput,
    effect: "read-only",
    permission: config.permission,
    outbound: (args) => (typeof args.url === "string" ? [args.url] : []),
    async execute(input, context): Promise<ToolOutput> {
      const page = await fetchText(input.url, {
        maxBytes: config.max_bytes,
        timeoutMs: Math.min(config.timeout_ms, context.timeoutMs),
        maxRedirects: config.max_redirects,
        allowPrivateNetwork: config.allow_private_network,
        userAgent: config.user_agent,
        signal: context.signal,
        mayGoTo: context.mayGoTo,
      });
      const isHtml = /html/i.test(page.contentType);
      const readable = isHtml ? htmlToReadable(page.body, input.format) : { title: null, text: page.body };
      const cut = readable.text.length > config.max_chars;
      const text = cut ? readable.text.slice(0, config.max_chars) : readable.text;
      const head = `${readable.title ? `# ${readable.title}\n` : ""}${page.url}\n\n`;
      const notes = [page.truncated ? `[cut at ${config.max_bytes} bytes]` : "", cut ? `[cut at ${config.max_chars} characters]` : ""].filter(Boolean).join(" ");
      return {
        ok: true,
        output: `${head}${text}${notes ? `\n\n${notes}` : ""}`,
        data: { url: page.url, status: page.status, content_type: page.contentType, title: readable.title },
        truncated: page.truncated || cut,
      };
    },
  });
}

const WebSearchInput = z.object({
  query: z.string().min(1).max(500),
  max_results: z.number().int().positive().max(50).optional(),
});

interface SearxResult {
  title?: string;
  url?: string;
  content?: string;
}

export function createWebSearchTool(search: SearchConfig, fetchConfig: FetchConfig): AnyToolDefinition {
  const instance = search.url!;
  return defineTool({
    name: "web_search",
    description: "Search the web and return titles, URLs and snippets of the top results.",
    inputSchema: WebSearchInput,
    effect: "read-only",
    permission: fetchConfig.permission,
    // The query goes to the search instance (and from there to the engines it asks).
    outbound: () => [instance],
    async execute(input, context): Promise<ToolOutput> {
      const url = new URL("search", instance.endsWith("/") ? instance : `${instance}/`);
      url.searchParams.set("q", input.query);
      url.searchParams.set("format", "json");
      const page = await fetchText(url.href, {
        maxBytes: fetchConfig.max_bytes,
        timeoutMs: Math.min(search.timeout_ms, context.timeoutMs),
        maxRedirects: fetchConfig.max_redirects,
        // The instance is the user's own choice (often on this machine); only its address is contacted.
        allowPrivateNetwork: true,
        userAgent: fetchConfig.user_agent,
        signal: context.signal,
        accept: "application/json",
      });
      let results: SearxResult[];
      try {
        results = ((JSON.parse(page.body) as { results?: SearxResult[] }).results ?? []).filter((result) => typeof result.url === "string");
      } catch {
        throw new DuckError(ErrorCode.WebFetchFailed, `the search instance at ${instance} did not answer JSON (is format=json enabled in its settings.yml?)`);
      }
      const top = results.slice(0, input.max_results ?? search.max_results).map((result) => ({ title: result.title ?? "", url: result.url!, snippet: (result.content ?? "").slice(0, 500) }));
      const output = top.length === 0 ? `no results for "${input.query}"` : top.map((result, index) => `${index + 1}. ${result.title}\n   ${result.url}\n   ${result.snippet}`).join("\n");
      return { ok: true, output, data: { query: input.query, results: top } };
    },
  });
}

/** web_fetch when enabled, web_search when a provider is configured. */
export function createWebTools(config: IntegrationsConfig["web"]): AnyToolDefinition[] {
  const tools: AnyToolDefinition[] = [];
  if (config.fetch.enabled) tools.push(createWebFetchTool(config.fetch));
  if (config.search.provider === "searxng") {
    if (!config.search.url) throw new DuckError(ErrorCode.ConfigInvalid, "integrations.json: web.search.provider is searxng but web.search.url is not set");
    tools.push(createWebSearchTool(config.search, config.fetch));
  }
  return tools;
}
