import type { IterationRecord } from "../state/task-projection.js";
import type { HistoryTurn } from "./context-builder.js";
import { iterationText } from "./observations.js";
import { fitText, type TokenCounter } from "./fitting.js";

/** The most of the material to summarise put in one request, in tokens. */
const MATERIAL_TOKENS = 6000;

function limitWords(tokens: number): number {
  return Math.max(20, Math.floor(tokens * 0.6));
}

/** The request for a summary of the conversation's oldest turns, folding in an earlier summary of older ones. */
export function historySummaryPrompt(previous: string | null, turns: readonly HistoryTurn[], summaryTokens: number, count: TokenCounter): string {
  const share = Math.floor(MATERIAL_TOKENS / Math.max(1, turns.length));
  const material = turns.map((turn) => fitText(`User: ${turn.text}\nDuckLM: ${turn.answer ?? "(no answer)"}`, share, count).text);
  return [
    `Summarise these earlier turns of a conversation in at most ${limitWords(summaryTokens)} words.`,
    previous ? `## Summary of the turns before them\n${previous}` : "",
    `## Turns\n${material.join("\n\n")}`,
  ].filter(Boolean).join("\n\n");
}

/** The request for a summary of the agent loop's earliest decisions and what their steps returned. */
export function observationsSummaryPrompt(taskText: string, previous: { through: number; text: string } | null, iterations: readonly IterationRecord[], summaryTokens: number, count: TokenCounter): string {
  const share = Math.floor(MATERIAL_TOKENS / Math.max(1, iterations.reduce((sum, iteration) => sum + Math.max(1, iteration.steps.length), 0)));
  return [
    `The task: ${taskText}`,
    `Summarise what these earlier decisions did and found, for the one that decides next, in at most ${limitWords(summaryTokens)} words.`,
    previous ? `## Summary of decisions 1 to ${previous.through}\n${previous.text}` : "",
    `## Decisions\n${iterations.map((iteration) => iterationText(iteration, share, count).text).join("\n")}`,
  ].filter(Boolean).join("\n\n");
}
