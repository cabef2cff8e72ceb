import type { RecallDecision } from "../contracts/index.js";

// Short requests that are commands or greetings gain nothing from memory.
const NO_RECALL = /^(?:hi|hello|hey|thanks|thank you|ok|okay|run\b|execute\b|exec\b|remember\b)/i;

/** Whether to search memory when no model decides: yes for anything with content words. */
export function heuristicRecall(text: string): RecallDecision {
  const trimmed = text.trim();
  if (NO_RECALL.test(trimmed)) return { recall: false, query: "" };
  const words = trimmed.match(/[\p{L}\p{N}_]{3,}/gu) ?? [];
  if (words.length === 0) return { recall: false, query: "" };
  return { recall: true, query: words.slice(0, 24).join(" ") };
}

/** What a model is asked when it decides about recall. */
export function recallPrompt(taskText: string): string {
  return `Should long-term memory be searched for this task, and with which query?\n\nTask: ${taskText}`;
}
