import { randomBytes } from "node:crypto";
import { Bot, GrammyError, InlineKeyboard, type Context } from "grammy";
import type { Logger } from "pino";
import type { DuckEvent, EventPayloads } from "../contracts/index.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import type { DuckLM } from "../runtime/ducklm.js";
import type { PermissionAnswer } from "../runtime/runtime-loop.js";

export interface TelegramBotOptions {
  token: string;
  /** Telegram user ids that may use the bot; everyone else is refused. */
  allowedUserIds: readonly number[];
  /** Bot API root (a self-hosted Bot API server, or a stand-in for tests). */
  apiRoot?: string;
  logger: Logger;
}

/** Telegram refuses messages longer than this. */
const MESSAGE_LIMIT = 4096;

function chunks(text: string): string[] {
  const parts: string[] = [];
  for (let i = 0; i < text.length; i += MESSAGE_LIMIT - 96) parts.push(text.slice(i, i + MESSAGE_LIMIT - 96));
  return parts.length > 0 ? parts : [""];
}

function clip(text: string, length: number): string {
  return text.length > length ? `${text.slice(0, length)}…` : text;
}

/** One event as a line for the chat, or null for events not worth a message (token chunks and the like). */
export function summariseEvent(event: DuckEvent): string | null {
  switch (event.type) {
    case "tool-called": {
      const p = event.payload as EventPayloads["tool-called"];
      const args = p.call.tool === "shell_exec" ? `$ ${String(p.call.arguments.command)}` : clip(JSON.stringify(p.call.arguments), 300);
      return `⚙ ${p.call.tool} ${args}`;
    }
    case "tool-result": {
      const p = event.payload as EventPayloads["tool-result"];
      if (p.result.ok) return null;
      return `✗ ${p.result.error?.code ?? "failed"}: ${clip(p.result.error?.message ?? "", 300)}`;
    }
    case "step-retrying": {
      const p = event.payload as EventPayloads["step-retrying"];
      return `↻ retrying ${p.step_id}: ${clip(p.reason, 200)}`;
    }
    case "task-completed":
      return (event.payload as EventPayloads["task-completed"]).answer || "(done, no answer text)";
    case "task-failed": {
      const p = event.payload as EventPayloads["task-failed"];
      return `Failed (${p.code}): ${p.message}`;
    }
    case "task-cancelled":
      return `Cancelled: ${(event.payload as EventPayloads["task-cancelled"]).reason}`;
    default:
      return null;
  }
}

const ANSWERS: Record<string, PermissionAnswer> = { o: "allow", a: "allow_always", d: "deny" };

/**
 * A thin Telegram client for a running DuckLM: people on the allow-list send tasks as messages, get
 * the steps and the answer back, and answer permission requests with inline buttons. Passwords are
 * never asked for here (a chat keeps its history): a step that needs one is left to the web chat or
 * the CLI.
 */
export function createTelegramBot(ducklm: DuckLM, options: TelegramBotOptions) {
  const bot = new Bot(options.token, options.apiRoot ? { client: { apiRoot: options.apiRoot } } : {});
  // Network errors quote the request URL, which holds the token: it never reaches a log or a terminal.
  const withoutToken = (text: string) => text.split(options.token).join("[token]");
  const allowed = new Set(options.allowedUserIds);
  // callback_data holds at most 64 bytes: buttons carry a short key to the request they answer.
  const pendingButtons = new Map<string, { taskId: string; requestId: string }>();
  const watching = new Map<string, () => void>();

  const send = async (chatId: number, text: string, extra: Parameters<typeof bot.api.sendMessage>[2] = {}) => {
    const parts = chunks(text);
    for (const [index, part] of parts.entries()) {
      await bot.api.sendMessage(chatId, part, index === parts.length - 1 ? extra : {}).catch((error: unknown) => options.logger.warn({ chat: chatId, detail: withoutToken(String(error)) }, "telegram message not sent"));
    }
  };

  /** A permission request as a message with its buttons. */
  const askPermission = async (chatId: number, taskId: string, p: EventPayloads["permission-requested"]) => {
    const key = randomBytes(6).toString("base64url");
    pendingButtons.set(key, { taskId, requestId: p.request_id });
    const keyboard = new InlineKeyboard().text("Allow once", `o:${key}`);
    if (p.category !== "no_always") keyboard.text("Always", `a:${key}`);
    keyboard.text("Deny", `d:${key}`);
    const what = p.call.tool === "shell_exec" ? `$ ${String(p.call.arguments.command)}` : `${p.call.tool} ${clip(JSON.stringify(p.call.arguments), 500)}`;
    await send(chatId, `Permission needed [${p.category}]: ${what}\n${p.reason}`, { reply_markup: keyboard });
  };

  const isAllowed = (ctx: Context): boolean => ctx.from !== undefined && allowed.has(ctx.from.id);

  /** Reports a task's events to the chat until it ends; stored ones first, so nothing is missed. */
  const watch = (taskId: string, chatId: number) => {
    if (watching.has(taskId)) return;
    let queue = Promise.resolve();
    const unsubscribe = ducklm.subscribe(
      taskId,
      (event) => {
        queue = queue.then(async () => {
          if (event.type === "permission-requested") {
            await askPermission(chatId, taskId, event.payload as EventPayloads["permission-requested"]);
            return;
          }
          if (event.type === "secret-requested") {
            await send(chatId, "This step needs a password. For your safety it is not asked for in Telegram: answer it in the web chat or with `ducklm tasks resume`.");
            return;
          }
          const line = summariseEvent(event);
          if (line !== null) await send(chatId, line);
          if (event.type === "task-completed" || event.type === "task-failed" || event.type === "task-cancelled") {
            watching.get(taskId)?.();
            watching.delete(taskId);
          }
        });
      },
      { fromSeq: 1 },
    );
    watching.set(taskId, unsubscribe);
  };

  bot.command("start", async (ctx) => {
    if (!isAllowed(ctx)) return refuse(ctx);
    await ctx.reply("Send me a task in your own words. /tasks lists recent tasks, /pending shows what waits for your permission, /cancel <id> stops one.");
  });

  bot.command("tasks", async (ctx) => {
    if (!isAllowed(ctx)) return refuse(ctx);
    const tasks = ducklm.listTasks({ limit: 10 });
    await ctx.reply(tasks.length === 0 ? "no tasks yet" : tasks.map((task) => `${task.state.padEnd(19)} ${task.id.slice(0, 8)} ${clip(task.text, 60)}`).join("\n"));
  });

  // Requests still open (after a restart of the bot, say) come back with fresh buttons.
  bot.command("pending", async (ctx) => {
    if (!isAllowed(ctx)) return refuse(ctx);
    let asked = 0;
    for (const task of ducklm.listTasks({ state: "awaiting_permission", limit: 20 })) {
      for (const request of ducklm.getTask(task.id).pending_permissions) {
        await askPermission(ctx.chat.id, task.id, request);
        asked += 1;
      }
    }
    if (asked === 0) await ctx.reply("nothing is waiting for permission");
  });

  bot.command("cancel", async (ctx) => {
    if (!isAllowed(ctx)) return refuse(ctx);
    const prefix = ctx.match.trim();
    const task = prefix ? ducklm.listTasks({ limit: 200 }).find((candidate) => candidate.id.startsWith(prefix)) : undefined;
    if (!task) return void (await ctx.reply("usage: /cancel <task id or its first characters>"));
    try {
      ducklm.cancel(task.id, "cancelled from Telegram");
    } catch (error) {
      return void (await ctx.reply(DuckError.isInstance(error) ? error.message : "could not cancel"));
    }
    await ctx.reply(`cancelling ${task.id.slice(0, 8)}`);
  });

  bot.on("message:text", async (ctx) => {
    if (!isAllowed(ctx)) return refuse(ctx);
    try {
      const handle = ducklm.submit({ text: ctx.message.text, session_id: `telegram-${ctx.chat.id}` });
      await ctx.reply(`▸ task ${handle.taskId.slice(0, 8)} received`);
      watch(handle.taskId, ctx.chat.id);
      handle.done.catch((error: unknown) => options.logger.error({ err: error, task_id: handle.taskId }, "telegram task failed to run"));
    } catch (error) {
      await ctx.reply(DuckError.isInstance(error) ? `error ${error.code}: ${error.message}` : "the task could not be started");
    }
  });

  bot.on("callback_query:data", async (ctx) => {
    if (!isAllowed(ctx)) {
      await ctx.answerCallbackQuery({ text: "You are not allowed to answer this." });
      return;
    }
    const [code, key] = ctx.callbackQuery.data.split(":");
    const answer = code ? ANSWERS[code] : undefined;
    const pending = key ? pendingButtons.get(key) : undefined;
    if (!answer || !pending) {
      await ctx.answerCallbackQuery({ text: "This request is no longer open." });
      return;
    }
    try {
      ducklm.answerPermission(pending.taskId, pending.requestId, answer, { by: `telegram:${ctx.from.id}` }).done.catch(() => undefined);
      pendingButtons.delete(key!);
      await ctx.answerCallbackQuery({ text: answer === "deny" ? "Denied" : "Allowed" });
      await ctx.editMessageReplyMarkup({ reply_markup: undefined }).catch(() => undefined);
      if (ctx.chat) watch(pending.taskId, ctx.chat.id);
    } catch (error) {
      await ctx.answerCallbackQuery({ text: DuckError.isInstance(error) ? error.message.slice(0, 190) : "could not answer" });
    }
  });

  async function refuse(ctx: Context): Promise<void> {
    options.logger.warn({ user: ctx.from?.id }, "telegram message from a user not on the allow-list");
    // The id is what the owner needs to add to integrations.json.
    await ctx.reply(`You are not on this bot's allow-list. Your Telegram user id is ${ctx.from?.id ?? "unknown"}.`);
  }

  bot.catch((error) => {
    const detail = error.error instanceof GrammyError ? error.error.description : error.error instanceof Error ? error.error.message : String(error.error);
    options.logger.error({ detail: withoutToken(detail) }, "telegram update failed");
  });

  return {
    bot,
    /** Polls for updates until `stop`; settles when polling ends. */
    start: () =>
      bot.start({ drop_pending_updates: false, allowed_updates: ["message", "callback_query"] }).catch((error: unknown) => {
        const message = error instanceof GrammyError ? error.description : error instanceof Error ? error.message : String(error);
        throw new DuckError(ErrorCode.ToolFailed, `the Telegram bot stopped: ${withoutToken(message)}`);
      }),
    async stop() {
      for (const unsubscribe of watching.values()) unsubscribe();
      watching.clear();
      await bot.stop();
    },
  };
}
