import { buildContext, type BuiltContext, type ContextInput, type TokenCounter } from "../context/context-builder.js";
import { SUMMARY_SHARE } from "../context/fitting.js";
import { historySummaryPrompt, observationsSummaryPrompt } from "../context/summary-requests.js";
import type { TaskProjection } from "../state/task-projection.js";
import type { ExecutorContext } from "./executor-context.js";
import { callModelText, servesRole } from "./model-call.js";

/**
 * The context for a decision, with what does not fit summarised by a model instead of dropped: the
 * oldest turns of the conversation (at the task's first decision) and the loop's earliest decisions.
 * Each summary is a `context-summarised` event, so a later decision, a resume and a replay use the
 * same text; a summary folds in the one before it. Without a model, the oldest is dropped as before.
 */
export async function contextWithSummaries(
  context: ExecutorContext,
  projection: TaskProjection,
  input: Omit<ContextInput, "summarising" | "historySummary" | "observationsSummary">,
  count: TokenCounter,
  signal: AbortSignal,
): Promise<{ built: BuiltContext; projection: TaskProjection }> {
  const budgets = context.config.runtime.context_budgets;
  const summarising = servesRole(context, "sys_util");
  const build = (current: TaskProjection) =>
    buildContext({ ...input, summarising, historySummary: current.summaries.history ?? null, observationsSummary: current.summaries.observations ?? null }, budgets, count);
  let current = projection;
  let built = build(current);
  if (!summarising) return { built, projection: current };
  const taskId = projection.task_id;
  const system = context.config.prompts.sys_util;

  const turns = built.overflow.history.filter((turn) => turn.task_id);
  if (turns.length > 0 && current.iteration === 1) {
    const previous = current.summaries.history ?? null;
    const tokens = Math.floor(budgets.history * SUMMARY_SHARE);
    const prompt = historySummaryPrompt(previous?.text ?? null, turns, tokens, count);
    const summary = await callModelText(context, taskId, { role: "sys_util", purpose: "summary:history", system, prompt, maxTokens: tokens }, signal);
    current = context.store.append(taskId, "context-summarised", { section: "history", covers: [...(previous?.covers ?? []), ...turns.map((turn) => turn.task_id!)], summary: summary.trim() });
  }
  const decisions = built.overflow.observations;
  if (decisions.length > 0) {
    const previous = current.summaries.observations ?? null;
    const tokens = Math.floor(budgets.observations * SUMMARY_SHARE);
    const prompt = observationsSummaryPrompt(projection.text, previous, decisions, tokens, count);
    const summary = await callModelText(context, taskId, { role: "sys_util", purpose: "summary:observations", system, prompt, maxTokens: tokens }, signal);
    current = context.store.append(taskId, "context-summarised", { section: "observations", through: decisions.at(-1)!.iteration, summary: summary.trim() });
  }
  if (current !== projection) built = build(current);
  return { built, projection: current };
}
