import { connect, type Socket } from "node:net";
import type { Duplex } from "node:stream";

/**
 * A confined command cannot open a Unix socket (the seccomp filter refuses `socket(AF_UNIX)`), and
 * its network namespace has nothing but its own loopback. What DuckLM serves it — the filtering
 * proxy, the sudo relay — reaches it over one channel instead: a socket pair DuckLM hands the
 * sandbox as a file descriptor at start. Inside, a supervisor listens on loopback ports of the
 * sandbox's own network and carries each connection over the channel as a stream of frames; outside,
 * each stream is connected to the Unix socket of the service it asked for.
 *
 * A frame is a type byte, a stream id (u32) and a length (u32), big-endian, then that many bytes.
 * The sandbox's side is the command's to forge (it runs as the same user as the supervisor): DuckLM's
 * side reads every frame as untrusted, and a malformed one closes the channel.
 */
export const ChannelService = { proxy: 1, sudo: 2 } as const;
export type ChannelService = (typeof ChannelService)[keyof typeof ChannelService];

const OPEN = 1;
const DATA = 2;
const END = 3;
const CLOSE = 4;
const HEADER_BYTES = 9;
/** Larger than any read a socket hands over at once; a frame announcing more is malformed. */
const MAX_FRAME_BYTES = 1024 * 1024;
/** Streams one sandbox may have open at once. */
const MAX_STREAMS = 256;

function frame(type: number, id: number, payload?: Buffer): Buffer {
  const head = Buffer.alloc(HEADER_BYTES);
  head.writeUInt8(type, 0);
  head.writeUInt32BE(id, 1);
  head.writeUInt32BE(payload?.length ?? 0, 5);
  return payload ? Buffer.concat([head, payload]) : head;
}

/**
 * DuckLM's end of a sandbox's channel: each stream the supervisor opens is connected to the Unix
 * socket of its service (one not offered is closed at once). Returns a function that ends every
 * stream; the channel closing, or sending a malformed frame, does the same.
 */
export function serveSandboxChannel(channel: Duplex, services: Partial<Record<ChannelService, string>>): () => void {
  const streams = new Map<number, Socket>();
  const send = (data: Buffer) => {
    if (!channel.destroyed) channel.write(data);
  };
  const closeStream = (id: number, tell: boolean) => {
    const socket = streams.get(id);
    if (!socket) return;
    streams.delete(id);
    socket.destroy();
    if (tell) send(frame(CLOSE, id));
  };
  const open = (id: number, service: number) => {
    const path = services[service as ChannelService];
    if (!path || streams.has(id) || streams.size >= MAX_STREAMS) {
      send(frame(CLOSE, id));
      return;
    }
    const socket = connect(path);
    streams.set(id, socket);
    socket.on("data", (data: Buffer) => {
      if (channel.destroyed) return;
      if (!channel.write(frame(DATA, id, data))) {
        socket.pause();
        channel.once("drain", () => socket.resume());
      }
    });
    socket.on("end", () => send(frame(END, id)));
    socket.on("error", () => closeStream(id, true));
    socket.on("close", () => closeStream(id, true));
  };
  const closeAll = () => {
    for (const id of [...streams.keys()]) closeStream(id, false);
  };
  let pending: Buffer = Buffer.alloc(0);
  channel.on("data", (chunk: Buffer) => {
    pending = pending.length > 0 ? Buffer.concat([pending, chunk]) : chunk;
    while (pending.length >= HEADER_BYTES) {
      const type = pending.readUInt8(0);
      const id = pending.readUInt32BE(1);
      const length = pending.readUInt32BE(5);
      if (length > MAX_FRAME_BYTES || type < OPEN || type > CLOSE || (type === OPEN && length !== 1)) {
        // Not what the supervisor sends: the command forged it. Its services end here.
        closeAll();
        channel.destroy();
        return;
      }
      if (pending.length < HEADER_BYTES + length) break;
      const payload = pending.subarray(HEADER_BYTES, HEADER_BYTES + length);
      pending = pending.subarray(HEADER_BYTES + length);
      if (type === OPEN) {
        open(id, payload.readUInt8(0));
        continue;
      }
      const socket = streams.get(id);
      if (!socket) continue;
      if (type === DATA && !socket.write(payload)) {
        channel.pause();
        socket.once("drain", () => channel.resume());
      } else if (type === END) socket.end();
      else if (type === CLOSE) closeStream(id, false);
    }
  });
  channel.on("error", closeAll);
  channel.on("close", closeAll);
  return () => {
    closeAll();
    channel.destroy();
  };
}

/**
 * The supervisor, run by Node inside the sandbox:
 * `node supervisor.cjs <channel fd> <[[port, service], …]> <program> <args…>`. It listens on the
 * sandbox's loopback, starts the command, and exits with its status. The command does not inherit
 * the channel: it gets the services only through the ports, as any program there would.
 */
export const SUPERVISOR_SOURCE = `"use strict";
const net = require("node:net");
const { spawn } = require("node:child_process");
const [fdText, listenText, ...command] = process.argv.slice(2);
const channel = new net.Socket({ fd: Number(fdText), readable: true, writable: true });
const streams = new Map();
let nextId = 1;
function frame(type, id, payload) {
  const head = Buffer.alloc(${HEADER_BYTES});
  head.writeUInt8(type, 0); head.writeUInt32BE(id, 1); head.writeUInt32BE(payload ? payload.length : 0, 5);
  return payload ? Buffer.concat([head, payload]) : head;
}
function closeStream(id, tell) {
  const socket = streams.get(id);
  if (!socket) return;
  streams.delete(id);
  socket.destroy();
  if (tell && !channel.destroyed) channel.write(frame(${CLOSE}, id));
}
let pending = Buffer.alloc(0);
channel.on("data", (chunk) => {
  pending = pending.length > 0 ? Buffer.concat([pending, chunk]) : chunk;
  while (pending.length >= ${HEADER_BYTES}) {
    const length = pending.readUInt32BE(5);
    if (pending.length < ${HEADER_BYTES} + length) break;
    const type = pending.readUInt8(0), id = pending.readUInt32BE(1), payload = pending.subarray(${HEADER_BYTES}, ${HEADER_BYTES} + length);
    pending = pending.subarray(${HEADER_BYTES} + length);
    const socket = streams.get(id);
    if (!socket) continue;
    if (type === ${DATA} && !socket.write(payload)) { channel.pause(); socket.once("drain", () => channel.resume()); }
    else if (type === ${END}) socket.end();
    else if (type === ${CLOSE}) closeStream(id, false);
  }
});
channel.on("error", () => undefined);
function serve(port, service) {
  return new Promise((resolve, reject) => {
    const server = net.createServer((socket) => {
      const id = nextId++;
      streams.set(id, socket);
      channel.write(frame(${OPEN}, id, Buffer.from([service])));
      socket.on("data", (data) => { if (!channel.write(frame(${DATA}, id, data))) { socket.pause(); channel.once("drain", () => socket.resume()); } });
      socket.on("end", () => channel.write(frame(${END}, id)));
      socket.on("error", () => closeStream(id, true));
      socket.on("close", () => closeStream(id, true));
    });
    server.on("error", reject);
    server.listen(port, "127.0.0.1", resolve);
  });
}
Promise.all(JSON.parse(listenText).map(([port, service]) => serve(port, service))).then(() => {
  const child = spawn(command[0], command.slice(1), { stdio: ["inherit", "inherit", "inherit"] });
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(signal, () => child.kill(signal));
  child.on("error", (error) => { process.stderr.write(error.message + "\\n"); process.exit(127); });
  child.on("exit", (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
}, (error) => { process.stderr.write("ducklm sandbox supervisor: " + error.message + "\\n"); process.exit(125); });
`;
