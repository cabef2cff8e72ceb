import { ducklmOf } from "../../src/runtime/ducklm.js";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTelegramBot } from "../../src/integrations/telegram-bot.js";
import { FakeBotApi } from "../helpers/fake-bot-api.js";
import { createTestRuntime, type TestRuntime } from "../helpers/test-runtime.js";

const OWNER = 1001;
const STRANGER = 2002;
let api: FakeBotApi;
let runtime: TestRuntime;
let telegram: ReturnType<typeof createTelegramBot>;
let polling: Promise<void>;

beforeAll(async () => {
  api = new FakeBotApi();
  await api.start();
  runtime = createTestRuntime();
  await runtime.ready();
  telegram = createTelegramBot(ducklmOf(runtime), { token: "123:test-token", allowedUserIds: [OWNER], apiRoot: api.apiRoot, logger: runtime.logger });
  polling = telegram.start();
});

afterAll(async () => {
  await telegram.stop();
  await polling;
  await api.stop();
  await runtime.dispose();
});

describe("the Telegram bot against a loopback Bot API", () => {
  it("runs a task sent by an allowed user and sends the steps and the answer back", async () => {
    api.sendText(OWNER, "run `echo hi from telegram`");
    await api.waitFor(() => api.sent(OWNER).some((message) => message.text.includes("hi from telegram") && !message.text.startsWith("⚙")));
    const texts = api.sent(OWNER).map((message) => message.text);
    expect(texts[0]).toMatch(/^▸ task [0-9a-f]{8} received$/);
    expect(texts).toContain("⚙ shell_exec $ echo hi from telegram");
    const task = runtime.store.listTasks({ limit: 1 })[0]!;
    expect(task.state).toBe("completed");
    expect(task.session_id).toBe(`telegram-${OWNER}`);
  });

  it("refuses someone not on the allow-list, telling them their id, and starts nothing", async () => {
    const before = runtime.store.listTasks().length;
    api.sendText(STRANGER, "run `touch stranger.txt`");
    const refusal = await api.waitFor(() => api.sent(STRANGER).find((message) => message.text.includes("allow-list")));
    expect(refusal.text).toContain(String(STRANGER));
    expect(runtime.store.listTasks().length).toBe(before);
    expect(existsSync(join(runtime.workspace, "stranger.txt"))).toBe(false);
  });

  it("asks for permission with inline buttons and runs the command when allowed", async () => {
    api.sendText(OWNER, "run `cp /dev/null tg.txt && printf from-telegram > tg.txt`");
    const ask = await api.waitFor(() => api.sent(OWNER).find((message) => message.text.startsWith("Permission needed")));
    expect(ask.text).toContain("[unknown]");
    expect(ask.text).toContain("printf from-telegram > tg.txt");
    const buttons = ask.reply_markup!.inline_keyboard.flat();
    expect(buttons.map((button) => button.text)).toEqual(["Allow once", "Always", "Deny"]);
    expect(existsSync(join(runtime.workspace, "tg.txt"))).toBe(false);
    // A stranger pressing the button changes nothing.
    api.press(STRANGER, buttons[0]!.callback_data);
    await api.waitFor(() => api.calls.some((call) => call.method === "answerCallbackQuery" && String(call.params.text).includes("not allowed")));
    expect(existsSync(join(runtime.workspace, "tg.txt"))).toBe(false);
    api.press(OWNER, buttons[0]!.callback_data);
    // The shell creates the file before the command writes to it: read it once the task has ended.
    await api.waitFor(() => runtime.store.listTasks({ limit: 1 })[0]!.state === "completed");
    expect(readFileSync(join(runtime.workspace, "tg.txt"), "utf8")).toBe("from-telegram");
    // The same button again: the request is closed.
    api.press(OWNER, buttons[0]!.callback_data);
    await api.waitFor(() => api.calls.some((call) => call.method === "answerCallbackQuery" && String(call.params.text).includes("no longer open")));
  });

  it("shows requests that were waiting before the bot saw them on /pending, with working buttons", async () => {
    const waiting = await runtime.loop.submit({ text: "run `cp /dev/null waited.txt`" }).done;
    expect(waiting.state).toBe("awaiting_permission");
    api.sendText(OWNER, "/pending");
    const ask = await api.waitFor(() => api.sent(OWNER).find((message) => message.text.includes("cp /dev/null waited.txt")));
    api.press(OWNER, ask.reply_markup!.inline_keyboard.flat().find((button) => button.text === "Allow once")!.callback_data);
    await api.waitFor(() => existsSync(join(runtime.workspace, "waited.txt")));
    await api.waitFor(() => runtime.store.getTask(waiting.task_id)?.state === "completed");
    api.sendText(OWNER, "/pending");
    await api.waitFor(() => api.sent(OWNER).some((message) => message.text === "nothing is waiting for permission"));
  });

  it("fails the step when the user denies, and lists tasks on /tasks", async () => {
    api.sendText(OWNER, "run `cp /dev/null denied-by-telegram.txt`");
    const asks = () => api.sent(OWNER).filter((message) => message.text.startsWith("Permission needed"));
    const ask = await api.waitFor(() => asks().find((message) => message.text.includes("denied-by-telegram")));
    api.press(OWNER, ask.reply_markup!.inline_keyboard.flat().find((button) => button.text === "Deny")!.callback_data);
    await api.waitFor(() => api.sent(OWNER).some((message) => message.text.includes("DUCK_ERR_PERMISSION_DENIED")));
    expect(existsSync(join(runtime.workspace, "denied-by-telegram.txt"))).toBe(false);
    api.sendText(OWNER, "/tasks");
    const list = await api.waitFor(() => api.sent(OWNER).find((message) => message.text.includes("failed") && message.text.includes("completed")));
    expect(list.text.split("\n").length).toBeGreaterThanOrEqual(3);
  });
});

describe("`ducklm telegram`", () => {
  const root = join(import.meta.dirname, "../..");
  const tsxLoader = import.meta.resolve("tsx");

  it("says which variable the token goes in when it is missing", () => {
    const env: NodeJS.ProcessEnv = { ...process.env, DUCKLM_HOME: runtime.home, DUCKLM_CONFIG: join(root, "config") };
    delete env.DUCKLM_TELEGRAM_TOKEN;
    const result = spawnSync(process.execPath, ["--import", tsxLoader, join(root, "src/cli/main.ts"), "telegram"], { env, encoding: "utf8", timeout: 60_000 });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain("DUCKLM_TELEGRAM_TOKEN");
  });

  it("stops with a clear error, and without the token, when Telegram refuses the token", async () => {
    const refusing = createServer((_request, response) => {
      response.statusCode = 401;
      response.setHeader("content-type", "application/json");
      response.end(JSON.stringify({ ok: false, error_code: 401, description: "Unauthorized" }));
    });
    await new Promise<void>((resolve) => refusing.listen(0, "127.0.0.1", resolve));
    const home = `${runtime.home}-refused`;
    const env: NodeJS.ProcessEnv = { ...process.env, DUCKLM_HOME: home, DUCKLM_CONFIG: join(root, "config"), DUCKLM_TELEGRAM_TOKEN: "123:secret-token-value" };
    const apiRoot = `http://127.0.0.1:${(refusing.address() as AddressInfo).port}`;
    const child = spawn(process.execPath, ["--import", tsxLoader, join(root, "src/cli/main.ts"), "telegram", "--allow", "1", "--api-root", apiRoot], { env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout!.on("data", (chunk) => (output += chunk));
    child.stderr!.on("data", (chunk) => (output += chunk));
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
    refusing.close();
    expect(code).not.toBe(0);
    expect(output).toContain("the Telegram bot stopped");
    expect(output).toContain("Unauthorized");
    expect(output).not.toContain("secret-token-value");
    // Whatever it logged, in any of its files.
    const logs = readdirSync(join(home, "logs")).map((name) => readFileSync(join(home, "logs", name), "utf8")).join("");
    expect(logs).not.toContain("secret-token-value");
    rmSync(home, { recursive: true, force: true });
  }, 60_000);

  it("serves an allowed user from the command line and stops cleanly on Ctrl+C", async () => {
    const env = { ...process.env, DUCKLM_HOME: runtime.home + "-cli", DUCKLM_CONFIG: join(root, "config"), DUCKLM_TELEGRAM_TOKEN: "123:cli-token" };
    const child = spawn(process.execPath, ["--import", tsxLoader, join(root, "src/cli/main.ts"), "--workspace", runtime.workspace, "telegram", "--allow", "3003", "--api-root", api.apiRoot], { env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    child.stdout!.on("data", (chunk) => (stdout += chunk));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    try {
      await api.waitFor(() => stdout.includes("Telegram bot is running"), 30_000);
      api.sendText(3003, "run `echo through the cli bot`");
      await api.waitFor(() => api.sent(3003).some((message) => message.text.trim() === "through the cli bot"), 30_000);
    } finally {
      child.kill("SIGINT");
    }
    expect(await exited).toBe(0);
    rmSync(env.DUCKLM_HOME!, { recursive: true, force: true });
  }, 60_000);
});
