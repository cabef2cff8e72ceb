import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** What the next chat completion answers: text streamed in chunks, or a first chunk and then silence. */
export type ServerReply = { text: string } | { stallAfter: string } | { text?: string; toolCalls: Array<{ name: string; arguments: Record<string, unknown> | string }> };

export interface LoopbackModelServer {
  /** The OpenAI-compatible base URL, ending in /v1. */
  baseUrl: string;
  /** Queues answers for the next chat completions, in order. */
  answer(...replies: ServerReply[]): void;
  /** Answers every chat completion the queue does not, from what the request holds (a model that reads its prompt). */
  play(respond: (messages: Array<{ role: string; content: string }>, body: Record<string, unknown>) => ServerReply): void;
  /** Bodies of the requests received, newest last. */
  readonly received: Array<{ path: string; body: Record<string, unknown> }>;
  close(): Promise<void>;
}

/** A vector that depends only on the text, so order and repeatability can be checked. */
export function loopbackEmbedding(text: string): number[] {
  const vowels = [...text].filter((character) => "aeiou".includes(character)).length;
  return [text.length, vowels, text.charCodeAt(0) || 0, 1];
}
export const LOOPBACK_EMBEDDING_DIMENSION = 4;

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let text = "";
    request.on("data", (chunk) => (text += chunk));
    request.on("end", () => resolve(text));
  });
}

function chunkEvent(piece: string, first: boolean): string {
  const delta = first ? { role: "assistant", content: piece } : { content: piece };
  return `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
}

function toolCallEvent(call: Record<string, unknown>): string {
  return `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", choices: [{ index: 0, delta: { tool_calls: [call] }, finish_reason: null }] })}\n\n`;
}

/**
 * A loopback server that plays an OpenAI-compatible model: chat completions streamed as server-sent
 * events from a queue of answers, embeddings from the text itself (rows sent out of order, as the
 * API allows, with their `index`).
 */
export async function startLoopbackModelServer(): Promise<LoopbackModelServer> {
  const queue: ServerReply[] = [];
  let player: ((messages: Array<{ role: string; content: string }>, body: Record<string, unknown>) => ServerReply) | null = null;
  const received: LoopbackModelServer["received"] = [];
  const open = new Set<ServerResponse>();

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const body = JSON.parse((await readBody(request)) || "{}") as Record<string, unknown>;
    received.push({ path: request.url ?? "", body });
    if (request.url === "/v1/embeddings") {
      const input = body.input as string[];
      response.setHeader("content-type", "application/json");
      response.end(JSON.stringify({ data: input.map((text, index) => ({ index, embedding: loopbackEmbedding(text) })).reverse() }));
      return;
    }
    const reply = queue.shift() ?? player?.(body.messages as Array<{ role: string; content: string }>, body);
    if (!reply) {
      response.statusCode = 500;
      response.end(JSON.stringify({ error: { message: "the loopback server has no answer queued" } }));
      return;
    }
    response.setHeader("content-type", "text/event-stream");
    if ("stallAfter" in reply) {
      open.add(response);
      response.on("close", () => open.delete(response));
      response.write(chunkEvent(reply.stallAfter, true));
      return;
    }
    const pieces = reply.text?.match(/[\s\S]{1,8}/g) ?? [];
    for (const [index, piece] of pieces.entries()) response.write(chunkEvent(piece, index === 0));
    // Tool calls as servers stream them: the name first, then the arguments in pieces, by index.
    for (const [index, call] of ("toolCalls" in reply ? reply.toolCalls : []).entries()) {
      const args = typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments);
      response.write(toolCallEvent({ index, id: `call_${index}`, type: "function", function: { name: call.name, arguments: "" } }));
      for (const piece of args.match(/[\s\S]{1,8}/g) ?? []) response.write(toolCallEvent({ index, function: { arguments: piece } }));
    }
    response.end("data: [DONE]\n\n");
  }

  const server = createServer((request, response) => void handle(request, response));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    answer: (...replies) => queue.push(...replies),
    play: (respond) => {
      player = respond;
    },
    received,
    close: () =>
      new Promise<void>((resolve) => {
        for (const response of open) response.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
