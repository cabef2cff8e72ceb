import type { DuckEvent, EventPayloads } from "../contracts/index.js";
import { oneLine } from "../utils/untrusted-text.js";

/**
 * What a permission question is about, as the person should read it: the exact command that would
 * run (never the parsed pieces, which lose quotes and order), with the commands found in it when it
 * holds more than that one; or the tool call with its arguments.
 */
export function askedAbout(request: Pick<EventPayloads["permission-requested"], "call" | "commands" | "ran_files">): string {
  const args = request.call.arguments;
  const exact = typeof args.command === "string" ? args.command : typeof args.test_command === "string" ? args.test_command : null;
  if (exact === null) return `${request.call.tool} ${JSON.stringify(args)}`;
  const inside = request.commands.length > 1 || (request.commands.length === 1 && request.commands[0] !== exact.trim());
  // An answer covers these files as they are now: changed, the command is asked about again.
  const files = request.ran_files?.length ? `  [with ${request.ran_files.join(", ")} as ${request.ran_files.length === 1 ? "it is" : "they are"} now]` : "";
  return `${inside ? `${exact}  (it runs: ${request.commands.join(" · ")})` : exact}${files}`;
}

const OUTPUT_PREVIEW_LINES = 20;

function preview(text: string, indent: string): string {
  const lines = text.replace(/\s+$/, "").split("\n");
  const shown = lines.slice(0, OUTPUT_PREVIEW_LINES).map((line) => `${indent}${line}`);
  if (lines.length > OUTPUT_PREVIEW_LINES) shown.push(`${indent}… ${lines.length - OUTPUT_PREVIEW_LINES} more lines`);
  return shown.join("\n");
}

function payloadOf<T extends keyof EventPayloads>(event: DuckEvent, _type: T): EventPayloads[T] {
  return event.payload as unknown as EventPayloads[T];
}

/** An error as a step's result shows it, and as the critic and the step's failure repeat it. */
const errorText = (code: string, message: string) => `${code}: ${message}`;

/**
 * Formats a task's events as a person reads them, in order. It remembers what it has shown, so that
 * an error is printed once — not again by the critic that judged it, the step it failed and the
 * task it ended — and a refused permission ends as "denied", naming what was refused.
 */
export function createEventFormatter(): (event: DuckEvent) => string | null {
  const shownErrors = new Set<string>();
  const asked = new Map<string, string>();
  /** Per task, the steps that failed on the way, so a completed task does not read as if all went well. */
  const failedSteps = new Map<string, string[]>();
  const repeats = (text: string) => [...shownErrors].some((error) => text.includes(error));
  return (event) => {
    switch (event.type) {
      case "tool-result": {
        const error = payloadOf(event, "tool-result").result.error;
        if (error) shownErrors.add(errorText(error.code, error.message));
        // The refusal was the person's own answer, printed just above; the task's end says what it meant.
        if (error?.code === "DUCK_ERR_PERMISSION_DENIED" && error.message === "the user denied permission") return null;
        break;
      }
      case "permission-requested": {
        const p = payloadOf(event, "permission-requested");
        asked.set(`${event.task_id}/${p.step_id}`, askedAbout(p));
        break;
      }
      case "critic-scored": {
        const p = payloadOf(event, "critic-scored");
        if (p.score.verdict !== "pass" && repeats(p.score.reason)) return null;
        break;
      }
      case "step-failed": {
        const p = payloadOf(event, "step-failed");
        failedSteps.set(event.task_id, [...(failedSteps.get(event.task_id) ?? []), p.step_id]);
        if (repeats(p.reason)) return `  ✗ ${p.step_id} failed`;
        break;
      }
      case "task-cancelled":
        failedSteps.delete(event.task_id);
        break;
      case "task-completed": {
        // The answer is the model's account; that some steps failed on the way is DuckLM's to say.
        const failed = failedSteps.get(event.task_id) ?? [];
        failedSteps.delete(event.task_id);
        if (failed.length > 0) return `✔ completed, though ${failed.length === 1 ? "a step" : `${failed.length} steps`} failed on the way (${failed.join(", ")})\n\n${payloadOf(event, "task-completed").answer}`;
        break;
      }
      case "task-failed": {
        const p = payloadOf(event, "task-failed");
        failedSteps.delete(event.task_id);
        if (p.code === "DUCK_ERR_PERMISSION_DENIED") {
          const step = /^step (\S+) failed/.exec(p.message)?.[1];
          const what = step ? asked.get(`${event.task_id}/${step}`) : undefined;
          return what ? `⊘ denied: you did not allow ${what}, so the task stopped` : step ? `⊘ denied: you did not allow step ${step}, so the task stopped` : `⊘ denied: ${p.message}`;
        }
        if (repeats(p.message)) return `✘ failed ${p.code}`;
        break;
      }
    }
    return formatEvent(event);
  };
}

/**
 * One event as a person reads it, or null for events shown another way (token deltas stream inline).
 */
export function formatEvent(event: DuckEvent): string | null {
  switch (event.type) {
    case "task-received": {
      const p = payloadOf(event, "task-received");
      return `▸ task ${event.task_id} received: ${p.text}`;
    }
    case "task-started":
      return "  started";
    case "task-queued": {
      const p = payloadOf(event, "task-queued");
      return `  waiting to run: number ${p.position} in line (${p.running} of ${p.limit} tasks running)`;
    }
    case "task-dequeued":
      return "  a place came free: running";
    case "task-resumed":
      return `  resumed from event ${payloadOf(event, "task-resumed").from_seq}`;
    case "memory-recalled": {
      const p = payloadOf(event, "memory-recalled");
      return p.decision.recall ? `  memory: ${p.hits.length} hit(s) for "${p.decision.query}"` : null;
    }
    case "context-built":
      return null;
    case "model-output-started": {
      const p = payloadOf(event, "model-output-started");
      return `  ${p.role} (${p.purpose}):`;
    }
    case "model-output-delta":
    case "model-output-completed":
      return null;
    case "directive-decided": {
      const p = payloadOf(event, "directive-decided");
      const d = p.directive;
      const summary =
        d.kind === "tool" ? `${d.tool} ${JSON.stringify(d.arguments)}` : d.kind === "plan" ? `${d.steps.length} steps` : d.kind;
      return `  decided: ${d.kind === "tool" ? "tool " : ""}${summary} (${p.source})`;
    }
    case "directive-retried": {
      const p = payloadOf(event, "directive-retried");
      return `  the directive was refused (${p.attempt}); asking again: ${oneLine(p.error.slice(0, 200))}`;
    }
    case "context-summarised": {
      const p = payloadOf(event, "context-summarised");
      return p.section === "history" ? `  summarised ${p.covers.length} earlier turn(s) of the conversation` : `  summarised decisions 1 to ${p.through}`;
    }
    case "iteration-started": {
      const p = payloadOf(event, "iteration-started");
      return `↻ decision ${p.iteration}: ${oneLine(p.reason)}`;
    }
    case "plan-accepted": {
      const p = payloadOf(event, "plan-accepted");
      return p.steps.length > 1 ? `  plan: ${p.order.join(" → ")}` : null;
    }
    case "step-started": {
      const p = payloadOf(event, "step-started");
      return `  ▶ ${p.step_id}${p.attempt > 1 ? ` (attempt ${p.attempt})` : ""}`;
    }
    case "tool-called": {
      const p = payloadOf(event, "tool-called");
      const args = p.call.tool === "shell_exec" ? `$ ${String(p.call.arguments.command)}` : JSON.stringify(p.call.arguments);
      return `    ${p.call.tool} ${args}`;
    }
    case "tool-result": {
      const p = payloadOf(event, "tool-result");
      const r = p.result;
      const head = r.ok ? `    ← ok` : `    ← ${r.error?.code ?? "failed"}: ${r.error?.message ?? ""}`;
      // A failure's message may already name the exit code ("command exited with 1"): not said twice.
      const exit = r.exit_code !== undefined && r.exit_code !== null && !(r.error?.message ?? "").endsWith(`exited with ${r.exit_code}`) ? ` exit ${r.exit_code}` : "";
      const body = r.output ? `\n${preview(r.output, "      ")}` : "";
      return `${head}${exit} (${Math.round(r.duration_ms)} ms)${body}`;
    }
    case "critic-scored": {
      const p = payloadOf(event, "critic-scored");
      return p.score.verdict === "pass" ? null : `    critic: ${p.score.verdict} — ${oneLine(p.score.reason)}`;
    }
    case "step-retrying": {
      const p = payloadOf(event, "step-retrying");
      return `  ↻ ${oneLine(p.step_id)} retry in ${p.delay_ms} ms: ${oneLine(p.reason)}`;
    }
    case "step-completed":
      return `  ✓ ${payloadOf(event, "step-completed").step_id}`;
    case "step-failed": {
      const p = payloadOf(event, "step-failed");
      return `  ✗ ${oneLine(p.step_id)} (${p.recovery}): ${oneLine(p.reason)}`;
    }
    case "step-skipped": {
      const p = payloadOf(event, "step-skipped");
      return `  – ${oneLine(p.step_id)} skipped: ${oneLine(p.reason)}`;
    }
    case "permission-requested": {
      const p = payloadOf(event, "permission-requested");
      return `  ? permission needed for ${p.call.tool}: ${askedAbout(p)} [${p.category}]: ${oneLine(p.reason)}`;
    }
    case "permission-resolved": {
      const p = payloadOf(event, "permission-resolved");
      return `  permission ${p.decision} (${p.by})`;
    }
    case "task-awaiting-permission":
      return "  waiting for permission";
    case "memory-written": {
      const p = payloadOf(event, "memory-written");
      return `  remembered (${p.kind}): ${p.text.split("\n")[0]}`;
    }
    case "answer-completed":
      return null;
    case "task-completed":
      return `✔ completed\n\n${payloadOf(event, "task-completed").answer}`;
    case "task-failed": {
      const p = payloadOf(event, "task-failed");
      return `✘ failed ${p.code}: ${oneLine(p.message)}`;
    }
    case "task-cancelled":
      return `✘ cancelled: ${payloadOf(event, "task-cancelled").reason}`;
    default:
      return null;
  }
}
