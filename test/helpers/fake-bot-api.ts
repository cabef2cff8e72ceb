import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface BotApiCall {
  method: string;
  params: Record<string, unknown>;
}

/**
 * A loopback stand-in for Telegram's Bot API, enough for a polling bot: getMe, deleteWebhook,
 * getUpdates (long polling, offsets honoured), and every other method recorded and answered `true`
 * (sendMessage answers a message object).
 */
export class FakeBotApi {
  readonly calls: BotApiCall[] = [];
  private readonly updates: Array<Record<string, unknown>> = [];
  private nextUpdateId = 1;
  private nextMessageId = 100;
  private waiters: Array<() => void> = [];
  private server: Server | null = null;
  apiRoot = "";

  async start(): Promise<void> {
    this.server = createServer((request, response) => {
      let body = "";
      request.on("data", (chunk) => (body += chunk));
      request.on("end", () => {
        const method = (request.url ?? "").split("/").pop() ?? "";
        const params = body ? (JSON.parse(body) as Record<string, unknown>) : {};
        void this.answer(method, params).then((result) => {
          response.setHeader("content-type", "application/json");
          response.end(JSON.stringify({ ok: true, result }));
        });
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    this.apiRoot = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    for (const wake of this.waiters.splice(0)) wake();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }

  /** A text message from a user, as Telegram would deliver it. */
  sendText(userId: number, text: string): void {
    const entities = text.startsWith("/") ? [{ type: "bot_command", offset: 0, length: text.split(" ")[0]!.length }] : undefined;
    this.push({ message: { message_id: this.nextMessageId++, date: 0, chat: { id: userId, type: "private" }, from: { id: userId, is_bot: false, first_name: "U" }, text, ...(entities ? { entities } : {}) } });
  }

  /** A press of an inline button. */
  press(userId: number, data: string): void {
    this.push({ callback_query: { id: String(this.nextUpdateId), from: { id: userId, is_bot: false, first_name: "U" }, chat_instance: "c", data, message: { message_id: 1, date: 0, chat: { id: userId, type: "private" }, text: "permission" } } });
  }

  /** Messages the bot sent, in order. */
  sent(chatId?: number): Array<{ text: string; reply_markup?: { inline_keyboard: Array<Array<{ text: string; callback_data: string }>> } }> {
    return this.calls
      .filter((call) => call.method === "sendMessage" && (chatId === undefined || call.params.chat_id === chatId))
      .map((call) => call.params as { text: string; reply_markup?: { inline_keyboard: Array<Array<{ text: string; callback_data: string }>> } });
  }

  /** Waits until `predicate` holds over what the bot sent. */
  async waitFor<T>(predicate: () => T | undefined | false, timeoutMs = 10_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = predicate();
      if (value) return value;
      if (Date.now() > deadline) throw new Error(`timed out; the bot sent: ${JSON.stringify(this.sent().map((message) => message.text))}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  private push(update: Record<string, unknown>): void {
    this.updates.push({ update_id: this.nextUpdateId++, ...update });
    for (const wake of this.waiters.splice(0)) wake();
  }

  private async answer(method: string, params: Record<string, unknown>): Promise<unknown> {
    if (method !== "getUpdates") this.calls.push({ method, params });
    switch (method) {
      case "getMe":
        return { id: 42, is_bot: true, first_name: "DuckLM", username: "ducklm_test_bot" };
      case "getUpdates": {
        const offset = Number(params.offset ?? 0);
        const ready = () => this.updates.filter((update) => (update.update_id as number) >= offset);
        if (ready().length === 0 && Number(params.timeout ?? 0) > 0) {
          await new Promise<void>((resolve) => {
            this.waiters.push(resolve);
            setTimeout(resolve, 200);
          });
        }
        return ready();
      }
      case "sendMessage":
        return { message_id: this.nextMessageId++, date: 0, chat: { id: params.chat_id, type: "private" }, text: params.text };
      default:
        return true;
    }
  }
}
