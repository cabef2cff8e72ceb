import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { createTelegramBot } from "../integrations/telegram-bot.js";
import type { Runtime } from "../runtime/create-runtime.js";
import { resumeLeftovers } from "./run-command.js";

/** `ducklm telegram`: a thin Telegram bot in front of this runtime, until Ctrl+C. */
export async function telegramCommand(runtime: Runtime, options: { apiRoot?: string; allow?: string[] }, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const config = runtime.config.integrations.telegram;
  const token = env[config.token_env];
  if (!token) {
    throw new DuckError(ErrorCode.ConfigMissing, `no bot token: set ${config.token_env} to the token @BotFather gave you (integrations.json telegram.token_env names the variable)`);
  }
  const extra = (options.allow ?? []).map(Number);
  if (extra.some((id) => !Number.isInteger(id))) throw new DuckError(ErrorCode.InvalidInput, "--allow takes numeric Telegram user ids");
  const allowedUserIds = [...config.allowed_user_ids, ...extra];
  if (allowedUserIds.length === 0) {
    console.error("warning: the allow-list is empty, so the bot will refuse everyone; it tells each person their user id to add to integrations.json telegram.allowed_user_ids");
  }
  const apiRoot = options.apiRoot ?? config.api_root;
  const telegram = createTelegramBot(runtime, { token, allowedUserIds, logger: runtime.logger, ...(apiRoot ? { apiRoot } : {}) });
  const polling = telegram.start();
  console.log(`DuckLM's Telegram bot is running for ${allowedUserIds.length} user(s). Ctrl+C stops it.`);
  await resumeLeftovers(runtime);
  const stopped = await Promise.race([
    polling.then(() => "ended" as const),
    new Promise<"signal">((resolve) => {
      process.once("SIGINT", () => resolve("signal"));
      process.once("SIGTERM", () => resolve("signal"));
    }),
  ]);
  if (stopped === "signal") await telegram.stop();
  return 0;
}
