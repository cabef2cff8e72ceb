import { createInterface } from "node:readline/promises";
import { styleText } from "node:util";
import type { DuckEvent, ModelWork } from "../contracts/index.js";
import type { StartOptions, StartReport } from "../runtime/create-runtime.js";
import type { DuckLM } from "../runtime/ducklm.js";
import type { PermissionAnswer } from "../runtime/runtime-loop.js";
import type { TaskOutcome } from "../runtime/task-outcome.js";
import { askedAbout, createEventFormatter } from "./format-event.js";
import { safeForTerminal } from "./terminal-text.js";
import { ErrorCode } from "../errors/duck-error.js";
import { ExitCode, whenOutputCloses } from "./with-ducklm.js";

/** Calls whose text is plumbing (JSON for DuckLM itself): shown with `--verbose`, always in `--json`. */
function isPlumbing(purpose: string): boolean {
  return /^(?:recall|decision|directive|critic:|summary:)/.test(purpose);
}

/** A task's model work in one line: "3 calls · 1.1k tokens evaluated, 4.2k cached · 96 generated · 6.2 s". */
export function modelWorkLine(work: ModelWork): string {
  const tokens = (count: number) => (count >= 1000 ? `${(count / 1000).toFixed(1)}k` : String(count));
  const cached = work.cached_tokens > 0 ? `, ${tokens(work.cached_tokens)} cached` : "";
  return `${work.calls} model call${work.calls === 1 ? "" : "s"} · ${tokens(work.evaluated_tokens)} tokens evaluated${cached} · ${tokens(work.generated_tokens)} generated · ${(work.duration_ms / 1000).toFixed(1)} s`;
}

/** A task's model work in a few words, for a listing: "4 calls · 1.1k tokens · 6.2 s" (tokens evaluated and generated). */
export function modelWorkBrief(work: ModelWork): string {
  const tokens = work.evaluated_tokens + work.generated_tokens;
  return `${work.calls} call${work.calls === 1 ? "" : "s"} · ${tokens >= 1000 ? `${(tokens / 1000).toFixed(1)}k` : tokens} tokens · ${(work.duration_ms / 1000).toFixed(1)} s`;
}

/**
 * Prints events as they happen: one JSON object a line, or a readable transcript — the answer, the
 * steps and the questions, with what the model calls cost at the end; the JSON the models write for
 * DuckLM itself (recall, directives, critic scores) only with `verbose`.
 */
export function createEventPrinter(json: boolean, write: (text: string) => void = (text) => process.stdout.write(text), options: { verbose?: boolean } = {}) {
  let streaming = false;
  const format = createEventFormatter();
  const hidden = (event: DuckEvent) => !options.verbose && event.type.startsWith("model-output-") && isPlumbing(String(event.payload.purpose ?? ""));
  return (event: DuckEvent) => {
    if (json) {
      write(`${JSON.stringify(event)}\n`);
      return;
    }
    if (hidden(event)) return;
    if (event.type === "model-output-delta") {
      write(safeForTerminal(String(event.payload.text)));
      streaming = true;
      return;
    }
    // Whatever ends a model's streamed text (its completion, a failure, a cancel) starts on a line of its own.
    if (streaming) {
      write("\n");
      streaming = false;
      if (event.type === "model-output-completed") return;
    } else if (event.type === "model-output-completed") {
      // An output that came whole (within one gathering interval) has no deltas: its completion holds it.
      const text = String(event.payload.text);
      if (text !== "") write(`${safeForTerminal(text)}\n`);
      return;
    }
    const line = format(event);
    if (line !== null) write(`${colourOf(safeForTerminal(line))}\n`);
    const work = event.payload.model_work as ModelWork | undefined;
    if (work && (event.type === "task-completed" || event.type === "task-failed" || event.type === "task-cancelled")) write(`  ${modelWorkLine(work)}\n`);
  };
}

/**
 * Whether output may be coloured: a terminal that takes colour as Node judges it (TERM, FORCE_COLOR, CI), not NO_COLOR.
 * styleText makes the same judgement, so asking it here keeps the two in step.
 */
export function colourAllowed(stream: NodeJS.WriteStream = process.stdout): boolean {
  return stream.isTTY === true && !process.env.NO_COLOR && process.env.TERM !== "dumb" && stream.hasColors?.() === true;
}

// How a task ended, and what waits for the person, stand out; the rest stays plain.
const LINE_COLOURS: Array<[RegExp, Parameters<typeof styleText>[0]]> = [
  [/^✔ /, "green"],
  [/^✘ /, "red"],
  [/^⊘ /, "yellow"],
  [/^ {2}\? /, "yellow"],
  [/^↻ /, "cyan"],
  [/^ {4}← (?!ok)/, "red"],
];

function colourOf(line: string): string {
  if (!colourAllowed()) return line;
  const [first, ...rest] = line.split("\n");
  const colour = LINE_COLOURS.find(([pattern]) => pattern.test(first!))?.[1];
  return colour ? [styleText(colour, first!), ...rest].join("\n") : line;
}

/** Asks a question at the terminal and returns the line typed (null when input ended). */
export type AskLine = (question: string) => Promise<string | null>;

/** One question on a readline of its own (`ducklm run`); `ducklm chat` asks on its session's. */
const askOnce: AskLine = async (question) => {
  const prompt = createInterface({ input: process.stdin, output: process.stdout });
  try {
    return await prompt.question(question);
  } catch {
    // Ctrl-C at the question: no answer.
    return null;
  } finally {
    prompt.close();
  }
};

/** The answers typed, or null when the person left the question (Ctrl-C, end of input). */
/** What a person typed at a permission question, or null when it is none of the answers offered. */
function permissionAnswerOf(typed: string, alwaysOffered: boolean): PermissionAnswer | null {
  const reply = typed.trim().toLowerCase();
  if (reply === "" || reply === "n" || reply === "no") return "deny";
  if (reply === "y" || reply === "yes") return "allow";
  if (alwaysOffered && (reply === "a" || reply === "always")) return "allow_always";
  return null;
}

async function askPermission(outcome: TaskOutcome, ask: AskLine): Promise<Array<{ requestId: string; answer: PermissionAnswer }> | null> {
  const answers: Array<{ requestId: string; answer: PermissionAnswer }> = [];
  for (const request of outcome.pending_permissions) {
    const what = safeForTerminal(askedAbout(request));
    const always = request.category === "no_always" ? "" : ", allow [a]lways";
    const network = request.network ? " (needs the network)" : "";
    let question = `Allow ${what} [${request.category}]${network}? [y]es once${always}, [N]o: `;
    let answer: PermissionAnswer | null = null;
    // A typo is asked about again, not taken for an answer: Enter alone is the no the prompt offers.
    while (answer === null) {
      const typed = await ask(question);
      if (typed === null) return null;
      answer = permissionAnswerOf(typed, always !== "");
      question = always ? "Please answer y (yes, once), a (always) or n (no; Enter alone is no): " : "Please answer y (yes, once) or n (no; Enter alone is no); always is not offered for this command: ";
    }
    answers.push({ requestId: request.request_id, answer });
  }
  return answers;
}

/** Reads a line from the terminal without echoing it. */
async function readHidden(question: string): Promise<string> {
  process.stdout.write(question);
  const stdin = process.stdin;
  stdin.setRawMode?.(true);
  stdin.resume();
  return new Promise((resolve) => {
    let value = "";
    const onData = (chunk: Buffer) => {
      for (const char of chunk.toString("utf8")) {
        if (char === "\r" || char === "\n" || char === "\u0004") {
          stdin.removeListener("data", onData);
          stdin.setRawMode?.(false);
          stdin.pause();
          process.stdout.write("\n");
          resolve(value);
          return;
        }
        if (char === "\u0003") {
          stdin.setRawMode?.(false);
          process.kill(process.pid, "SIGINT");
          return;
        }
        value = char === "\u007f" ? value.slice(0, -1) : value + char;
      }
    };
    stdin.on("data", onData);
  });
}

export function exitCodeFor(outcome: TaskOutcome): number {
  switch (outcome.state) {
    case "completed":
      return ExitCode.Ok;
    case "awaiting_permission":
      return ExitCode.AwaitingPermission;
    case "cancelled":
      return ExitCode.Cancelled;
    case "failed":
      return outcome.error?.code === ErrorCode.PermissionDenied ? ExitCode.Denied : ExitCode.TaskFailed;
    default:
      return ExitCode.TaskFailed;
  }
}

/**
 * Prints a task's events from `fromSeq` while DuckLM drives it, answers permission and password
 * requests at the terminal, and returns the exit code for how it ended.
 */
export async function followTask(
  ducklm: DuckLM,
  taskId: string,
  done: Promise<TaskOutcome>,
  options: { json?: boolean; verbose?: boolean; fromSeq?: number; ask?: AskLine; print?: (event: DuckEvent) => void },
): Promise<number> {
  const unsubscribe = ducklm.subscribe(taskId, options.print ?? createEventPrinter(options.json === true, undefined, { verbose: options.verbose === true }), { fromSeq: options.fromSeq ?? 1 });
  const onInterrupt = () => ducklm.cancel(taskId, "interrupted at the terminal");
  process.once("SIGINT", onInterrupt);
  // `ducklm run … | head -1`: once the reader has stopped, nobody follows the task; it is stopped, not left running.
  let outputClosed = false;
  const stopListening = whenOutputCloses(() => {
    if (outputClosed) return;
    outputClosed = true;
    process.exitCode = ExitCode.Cancelled;
    ducklm.cancel(taskId, "its output was closed: the program reading it stopped");
  });
  try {
    let outcome = await done;
    while (outcome.state === "awaiting_permission" && process.stdin.isTTY && !options.json) {
      let next: Promise<TaskOutcome> = Promise.resolve(outcome);
      for (const request of outcome.pending_secrets) {
        const secret = await readHidden(`${safeForTerminal(request.prompt)}\nPassword (not shown, not stored): `);
        next = ducklm.provideSecret(taskId, request.request_id, secret, "cli").done;
      }
      const answers = await askPermission(outcome, options.ask ?? askOnce);
      if (answers === null) {
        console.error(`\nLeft unanswered: task ${taskId} still waits for permission; answer it later with \`ducklm tasks resume ${taskId}\`, in the web chat or over the API.`);
        return ExitCode.Cancelled;
      }
      for (const { requestId, answer } of answers) next = ducklm.answerPermission(taskId, requestId, answer, { by: "cli" }).done;
      outcome = await next;
    }
    // An outcome that could not be recorded (the store refused its events) has no event to show it: say it here.
    if (outcome.error && (outcome.state === "received" || outcome.state === "queued" || outcome.state === "running")) {
      console.error(`error ${outcome.error.code}: ${safeForTerminal(outcome.error.message)}`);
    }
    if (outcome.state === "awaiting_permission" && !options.json) {
      console.error(
        `\nTask ${taskId} is waiting for permission. Answer it in the web chat or with the API ` +
          `(POST /permissions/resolve), or with \`ducklm tasks resume ${taskId}\` in a terminal.`,
      );
    }
    return outputClosed ? ExitCode.Cancelled : exitCodeFor(outcome);
  } finally {
    stopListening();
    process.removeListener("SIGINT", onInterrupt);
    unsubscribe();
  }
}

/**
 * Waits for the tasks `startAndResume` took up, saying so on stderr when any is still going, so that
 * a command whose own task has ended does not sit silent.
 */
export async function finishLeftovers(leftovers: Array<Promise<TaskOutcome>>): Promise<void> {
  let going = leftovers.length;
  for (const leftover of leftovers) void leftover.finally(() => (going -= 1)).catch(() => undefined);
  // Outcomes already in are counted before anything is said.
  await new Promise((resolve) => setImmediate(resolve));
  if (going > 0) console.error(`waiting for ${going} task(s) resumed from an earlier run to finish (Ctrl-C stops waiting; they resume at the next start)`);
  await Promise.allSettled(leftovers);
}

/**
 * Does the start-up work of a command that drives tasks and says on stderr what an earlier process
 * left unfinished (runtime.json `resume`); returns the resumed tasks' outcomes to wait for.
 */
export async function startAndResume(ducklm: DuckLM, options: StartOptions = {}): Promise<Array<Promise<TaskOutcome>>> {
  const report: StartReport = await ducklm.start(options);
  const { mode, tasks } = report.resume;
  if (tasks.length === 0) return [];
  if (mode !== "auto") {
    console.error(`${tasks.length} unfinished task(s) from an earlier run (resume: ${mode}); resume one with \`ducklm tasks resume ID\`: ${tasks.map((task) => task.taskId).join(", ")}`);
    return [];
  }
  console.error(`resuming ${tasks.length} unfinished task(s) from an earlier run: ${tasks.map((task) => task.taskId).join(", ")}`);
  return tasks.map((task) =>
    task.done!.then((outcome) => {
      console.error(`resumed task ${task.taskId}: ${outcome.state}${outcome.error ? ` (${outcome.error.code})` : ""}`);
      return outcome;
    }),
  );
}
