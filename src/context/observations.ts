import type { IterationRecord } from "../state/task-projection.js";
import { fitItems, fitText, SUMMARY_SHARE, type TokenCounter } from "./fitting.js";
import { oneLine, quotedOutput, visibleControls } from "../utils/untrusted-text.js";

/** A model's summary of the earliest decisions, standing in for them when they no longer fit. */
export interface ObservationsSummary {
  /** The last decision it covers: it stands for decisions 1 to `through`. */
  through: number;
  text: string;
}

/** Longest arguments shown with a step; the output matters more. */
const SHOWN_ARGUMENTS_CHARS = 200;

function shownArguments(iteration: IterationRecord, stepId: string): string {
  const directive = iteration.directive;
  // The call as it ran (an earlier step's output in place of its reference), else as it was decided.
  const called = iteration.steps.find((step) => step.id === stepId)?.arguments;
  const args = directive.kind === "tool" ? (iteration.steps[0]?.id === stepId ? directive.arguments : undefined) : directive.kind === "plan" ? (directive.steps.find((step) => step.id === stepId && step.kind === "tool") as { arguments?: unknown } | undefined)?.arguments : undefined;
  const json = called ?? (args && typeof args === "object" ? JSON.stringify(args) : "{}");
  if (json === "{}") return "";
  const text = visibleControls(json);
  return ` ${text.length > SHOWN_ARGUMENTS_CHARS ? `${text.slice(0, SHOWN_ARGUMENTS_CHARS)}…` : text}`;
}

function whyOf(iteration: IterationRecord): string {
  const directive = iteration.directive;
  const why = directive.kind === "tool" ? directive.reason : directive.kind === "plan" ? directive.goal : "";
  return why ? ` (${oneLine(why.length > 200 ? `${why.slice(0, 200)}…` : why)})` : "";
}

/**
 * One decision and what its steps did: each step with the call it made, how it ended, and its output
 * (a failed step's error, and whatever it wrote besides) quoted line by line. A failed step shows no
 * critic's verdict: however the critic judged it, it failed.
 */
export function iterationText(iteration: IterationRecord, share: number, count: TokenCounter): { text: string; truncated: boolean } {
  let truncated = false;
  const lines = iteration.steps.map((step) => {
    const succeeded = step.status === "succeeded";
    // A verdict a later decision gave is not shown: shown, it would rewrite a prompt already sent.
    const judged = succeeded && step.verdict && !step.judged_by_next_decision ? `, critic: ${step.verdict}` : "";
    const outcome = succeeded ? `succeeded${judged}` : `${step.status}${step.error ? `: ${oneLine(step.error)}` : ""}`;
    const body = fitText(step.output, share, count);
    truncated ||= body.truncated;
    const head = `- ${oneLine(step.id)} ${step.tool ?? "step"}${shownArguments(iteration, step.id)}: ${outcome}`;
    return body.text ? `${head}\n${quotedOutput(body.text)}` : `${head}${succeeded ? " (no output)" : ""}`;
  });
  const head = `Decision ${iteration.iteration}: ${iteration.directive.kind}${whyOf(iteration)}`;
  return { text: [head, ...(lines.length > 0 ? lines : ["- (no steps)"])].join("\n"), truncated };
}

/**
 * The earlier decisions' results, the newest first in priority: each step's output gets a share of
 * the budget (cut, and said to be cut), and whole decisions that do not fit are left out, oldest
 * first — returned as `overflow` so that a model can summarise them. A summary of the earliest
 * decisions takes their place, within a quarter of the budget.
 */
export function observationsText(
  iterations: readonly IterationRecord[],
  budget: number,
  count: TokenCounter,
  options: { summary?: ObservationsSummary | null; summarising?: boolean } = {},
): { text: string; truncated: boolean; overflow: IterationRecord[] } {
  const summary = options.summary ?? null;
  const open = iterations.filter((iteration) => !summary || iteration.iteration > summary.through);
  const summaryText = summary ? fitText(`Decisions 1 to ${summary.through}, summarised: ${summary.text}`, Math.floor(budget * SUMMARY_SHARE), count) : null;
  const steps = open.reduce((sum, iteration) => sum + Math.max(1, iteration.steps.length), 0);
  let truncated = false;
  const fit = (itemsBudget: number) => {
    // With a model to summarise the oldest decisions, the newest decision's steps may use half the
    // room and the older ones what is left, until they overflow into the summary; without, every
    // step gets an equal share, however small, so that nothing is lost that a cut could keep.
    const newest = Math.max(1, open.at(-1)?.steps.length ?? 1);
    const share = options.summarising ? Math.max(64, Math.floor(itemsBudget / 2 / newest) - 16) : Math.max(64, Math.floor(itemsBudget / Math.max(1, steps)) - 16);
    truncated = false;
    const items = [...open].reverse().map((iteration) => {
      const rendered = iterationText(iteration, share, count);
      truncated ||= rendered.truncated;
      return rendered.text;
    });
    return fitItems(items, itemsBudget, count);
  };
  let fitted = fit(summaryText ? budget - count(summaryText.text) - 1 : budget);
  // What overflows will be summarised: leave room for that summary.
  if (!summaryText && options.summarising && fitted.truncated) fitted = fit(Math.floor(budget * (1 - SUMMARY_SHARE)));
  const overflow = open.slice(0, open.length - fitted.kept.length);
  const parts = [...(summaryText?.text ? [summaryText.text] : []), ...[...fitted.kept].reverse()];
  return { text: parts.join("\n"), truncated: truncated || fitted.truncated || Boolean(summaryText?.truncated), overflow };
}
