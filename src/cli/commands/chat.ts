import { randomUUID } from "node:crypto";
import { createInterface } from "node:readline";
import { styleText } from "node:util";
import type { Command } from "commander";
import type { DuckLM } from "../../runtime/ducklm.js";
import { createEventPrinter, finishLeftovers, followTask, startAndResume, type AskLine } from "../follow-task.js";
import { TASK_RUNNER, withDuckLM, type GlobalOptions } from "../with-ducklm.js";

/** Colour on a terminal that has it, none under NO_COLOR or into a pipe. */
function coloured(format: Parameters<typeof styleText>[0], text: string): string {
  return process.stdout.isTTY && !process.env.NO_COLOR && process.env.TERM !== "dumb" ? styleText(format, text) : text;
}

/**
 * The terminal's lines, one reader for the whole session: what is typed while a task runs waits its
 * turn (an answer to the permission question it will ask, or the next message), nothing is lost.
 */
function lineReader(): { ask: AskLine; askMessage: AskLine; close: () => void } {
  const lines: string[] = [];
  const waiting: Array<(line: string | null) => void> = [];
  let ended = false;
  // Whether what waits is the chat's own prompt, or a question a task asks (a permission).
  let atPrompt = false;
  const reader = createInterface({ input: process.stdin, output: process.stdout, terminal: process.stdin.isTTY === true });
  reader.on("line", (line) => {
    const next = waiting.shift();
    if (next) next(line);
    else lines.push(line);
  });
  reader.on("close", () => {
    ended = true;
    for (const next of waiting.splice(0)) next(null);
  });
  // Ctrl-C at the prompt ends the session; at a task's question it leaves that question unanswered
  // (the task waits) and the chat goes on; while a task runs it cancels that task (see followTask).
  const interrupt = (): boolean => {
    if (waiting.length === 0) return false;
    if (atPrompt) reader.close();
    else waiting.shift()!(null);
    return true;
  };
  reader.on("SIGINT", () => {
    if (!interrupt()) process.emit("SIGINT");
  });
  // The same for SIGINT sent by another program (`kill -INT`, a process manager); with neither a
  // prompt nor a running task to take it, the signal is not swallowed.
  const onSignal = () => {
    if (!interrupt() && process.listenerCount("SIGINT") === 1) {
      reader.close();
      process.exit(130);
    }
  };
  process.on("SIGINT", onSignal);
  reader.on("close", () => process.removeListener("SIGINT", onSignal));
  const ask: AskLine = (question) => {
    process.stdout.write(question);
    const queued = lines.shift();
    if (queued !== undefined) {
      if (!process.stdin.isTTY) process.stdout.write(`${queued}\n`);
      return Promise.resolve(queued);
    }
    if (ended) return Promise.resolve(null);
    return new Promise((resolve) => waiting.push(resolve));
  };
  return {
    ask,
    askMessage: async (question) => {
      atPrompt = true;
      try {
        return await ask(question);
      } finally {
        atPrompt = false;
      }
    },
    close: () => reader.close(),
  };
}

const HELP = "Type a message and press Enter. /new starts a new conversation, /exit (or Ctrl-D, or Ctrl-C at this prompt) leaves; Ctrl-C stops the task that is running, and at a permission question leaves it waiting.";

async function chatSession(ducklm: DuckLM, options: { session?: string; yes?: boolean }): Promise<number> {
  const leftovers = await startAndResume(ducklm);
  let session = options.session ?? `chat-${randomUUID()}`;
  const { ask, askMessage, close } = lineReader();
  const print = createEventPrinter(false);
  console.log(coloured("bold", "DuckLM chat") + coloured("dim", ` — conversation ${session}. ${HELP}`));
  let last = 0;
  try {
    for (;;) {
      const line = await askMessage(coloured(["bold", "yellow"], "› "));
      if (line === null) {
        // Ctrl-D or Ctrl-C: the shell's prompt starts on a line of its own.
        if (process.stdout.isTTY) process.stdout.write("\n");
        break;
      }
      const text = line.trim();
      if (!text) continue;
      if (text === "/exit" || text === "/quit") break;
      if (text === "/help") {
        console.log(HELP);
        continue;
      }
      if (text === "/new") {
        session = `chat-${randomUUID()}`;
        console.log(coloured("dim", `new conversation ${session}`));
        continue;
      }
      // A mistyped command is not sent as a message; a path (`/etc/hosts?`) or a sentence is.
      if (/^\/[a-z]+$/i.test(text)) {
        console.log(`unknown command ${text}: ${HELP}`);
        continue;
      }
      // Each message is a task of the same session: earlier turns are its history.
      const handle = ducklm.submit({ text, session_id: session, auto_approve: options.yes ? ["unknown"] : [] }, { evenWhenLineIsFull: true });
      last = await followTask(ducklm, handle.taskId, handle.done, { ask, print });
      process.stdout.write("\n");
    }
  } finally {
    close();
  }
  await finishLeftovers(leftovers);
  return last === 130 ? 130 : 0;
}

/** `ducklm chat`: an interactive session at the terminal. */
export function registerChat(program: Command): void {
  program
    .command("chat")
    .description("talk with DuckLM at the terminal: answers stream, permissions are asked inline, the conversation is kept")
    .option("--session <id>", "continue this conversation")
    .option("--yes", "run commands that no rule covers without asking (no_always is still asked, hard_stop never runs)")
    .action(async (options: { session?: string; yes?: boolean }) => withDuckLM(program.opts<GlobalOptions>(), (ducklm) => chatSession(ducklm, options), TASK_RUNNER));
}
