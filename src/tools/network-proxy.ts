import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { connect, isIP, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger } from "pino";
import { addressAllowed, guardedLookup, ownAddresses } from "../utils/network-addresses.js";

/** The port the sandbox's supervisor serves the proxy on, inside the sandbox's own network namespace. */
export const SANDBOX_PROXY_PORT = 3128;

export interface NetworkProxy {
  /** Where the proxy listens, outside every sandbox: the sandbox channel connects its streams here. */
  socketPath: string;
  close(): Promise<void>;
}

export interface NetworkProxyOptions {
  /** Private (LAN) addresses may be reached; loopback and this machine's own addresses never. Defaults to false. */
  allowPrivate?: boolean;
  /** Decides which addresses may be reached, instead of the rule above (tests point it at loopback). */
  allowAddress?: (address: string) => boolean;
  /** Host names never contacted (permissions.json `hosts.deny`): the request is refused before any lookup. */
  deniedHost?: (host: string) => boolean;
  logger?: Logger;
}

function refuse(socket: Socket, status: number, message: string): void {
  socket.end(`HTTP/1.1 ${status} ${message}\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n${message}\n`);
}

/**
 * The only way out of a sandbox that was given the network: an HTTP proxy (CONNECT and plain
 * requests) on a unix socket, which refuses loopback, this machine's own addresses and — unless
 * allowed — private ones, resolving each name once so the check and the connection agree. DuckLM's
 * own API is on loopback, so a confined command can never reach it.
 */
export async function startNetworkProxy(options: NetworkProxyOptions = {}): Promise<NetworkProxy> {
  const folder = mkdtempSync(join(tmpdir(), "ducklm-net-"));
  chmodSync(folder, 0o700);
  const socketPath = join(folder, "proxy.sock");
  const own = ownAddresses();
  const allowed = options.allowAddress ?? ((address: string) => addressAllowed(address, options.allowPrivate ?? false, own));
  const lookup = guardedLookup(allowed);
  // Node does not ask the lookup about an address written as such: those are checked here.
  const refusedLiteral = (host: string) => (isIP(host) !== 0 && !allowed(host) ? `${host} is this machine or a private address; the sandbox may not reach it` : null);
  const refusedHost = (host: string) => (options.deniedHost?.(host.toLowerCase()) ? `${host} is in permissions.json hosts.deny` : null);
  const sockets = new Set<Socket>();

  const server = http.createServer((request, response) => {
    let target: URL;
    try {
      target = new URL(request.url ?? "");
    } catch {
      response.writeHead(400).end("the proxy takes absolute http:// URLs or CONNECT\n");
      return;
    }
    if (target.protocol !== "http:") {
      response.writeHead(400).end("only http:// is proxied this way; https goes through CONNECT\n");
      return;
    }
    const literal = refusedLiteral(target.hostname.replace(/^\[|\]$/g, "")) ?? refusedHost(target.hostname);
    if (literal) {
      response.writeHead(403).end(`${literal}\n`);
      return;
    }
    const upstream = http.request(
      { host: target.hostname.replace(/^\[|\]$/g, ""), port: target.port || 80, path: `${target.pathname}${target.search}`, method: request.method, headers: request.headers, lookup },
      (answer) => {
        response.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(response);
      },
    );
    upstream.on("error", (error) => {
      options.logger?.info({ target: target.host, err: error.message }, "sandbox network request refused or failed");
      if (!response.headersSent) response.writeHead(403).end(`${error.message}\n`);
      else response.destroy();
    });
    request.pipe(upstream);
  });

  server.on("connect", (request, client: Socket, head: Buffer) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.on("error", () => client.destroy());
    const match = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(request.url ?? "");
    if (!match) {
      refuse(client, 400, "CONNECT needs host:port");
      return;
    }
    const literal = refusedLiteral(match[1]!) ?? refusedHost(match[1]!);
    if (literal) {
      refuse(client, 403, literal);
      return;
    }
    const upstream = connect({ host: match[1]!, port: Number(match[2]), lookup });
    sockets.add(upstream);
    upstream.on("close", () => sockets.delete(upstream));
    upstream.once("connect", () => {
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on("error", (error) => {
      options.logger?.info({ target: request.url, err: error.message }, "sandbox network connection refused or failed");
      if (!client.destroyed) refuse(client, 403, error.message.replace(/[\r\n]+/g, " "));
      upstream.destroy();
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(socketPath, () => resolve());
  });
  server.unref();
  return {
    socketPath,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(folder, { recursive: true, force: true });
    },
  };
}
