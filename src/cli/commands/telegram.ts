import type { Command } from "commander";
import { DuckError, ErrorCode } from "../../errors/duck-error.js";
import type { DuckLM } from "../../runtime/ducklm.js";
import { startAndResume } from "../follow-task.js";
import { TASK_RUNNER, withDuckLM, type GlobalOptions } from "../with-ducklm.js";

/** `ducklm telegram`: a thin Telegram bot in front of this DuckLM, until Ctrl+C. */
export async function runTelegram(ducklm: DuckLM, options: { apiRoot?: string; allow?: string[] }, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const config = ducklm.config.integrations.telegram;
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
  const { createTelegramBot } = await import("../../integrations/telegram-bot.js");
  const telegram = createTelegramBot(ducklm, { token, allowedUserIds, logger: ducklm.logger, ...(apiRoot ? { apiRoot } : {}) });
  const polling = telegram.start();
  console.log(`DuckLM's Telegram bot is running for ${allowedUserIds.length} user(s). Ctrl+C stops it.`);
  // Long-running like the server: it also carries on tasks whose process stops while it runs.
  await startAndResume(ducklm, { adoptOrphans: true });
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

export function registerTelegram(program: Command): void {
  program
    .command("telegram")
    .description("run a Telegram bot for this DuckLM (token from $DUCKLM_TELEGRAM_TOKEN; users from integrations.json)")
    .option("--allow <ids...>", "also allow these Telegram user ids")
    .option("--api-root <url>", "Bot API root (a self-hosted Bot API server)")
    .action(async (options: { allow?: string[]; apiRoot?: string }) => withDuckLM(program.opts<GlobalOptions>(), (ducklm) => runTelegram(ducklm, options), { ...TASK_RUNNER, longRunning: true }));
}
