import type { ToolCatalogueEntry } from "../tools/tool-registry.js";
import { fitText, type TokenCounter } from "./fitting.js";
import { describeTool } from "./tool-signature.js";

/** Words too common to say anything about which tool a task needs. */
const COMMON = new Set(["the", "and", "for", "with", "that", "this", "from", "into", "what", "are", "you", "your", "its", "can", "all", "any", "one", "then", "tell", "show", "please", "file", "files"]);

function words(text: string): Set<string> {
  return new Set((text.toLowerCase().match(/[a-z0-9]{3,}/g) ?? []).filter((word) => !COMMON.has(word)));
}

/** How well a tool's name and description match the task's words (a word of its name counts double). */
function relevance(tool: ToolCatalogueEntry, task: Set<string>): number {
  const name = words(tool.name.replace(/[_.-]/g, " "));
  const described = words(tool.description);
  let score = 0;
  for (const word of task) {
    if (name.has(word)) score += 2;
    else if (described.has(word)) score += 1;
  }
  return score;
}

// A catalogue entry's line and its token count, kept per entry and counter: the registry hands out
// the same entries for every decision, and a model's tokenizer is not free.
const lines = new WeakMap<ToolCatalogueEntry, string>();
const costs = new WeakMap<TokenCounter, WeakMap<ToolCatalogueEntry, number>>();

function line(tool: ToolCatalogueEntry): string {
  let text = lines.get(tool);
  if (text === undefined) {
    text = describeTool(tool);
    lines.set(tool, text);
  }
  return text;
}

function cost(tool: ToolCatalogueEntry, count: TokenCounter): number {
  let known = costs.get(count);
  if (!known) costs.set(count, (known = new WeakMap()));
  let tokens = known.get(tool);
  if (tokens === undefined) {
    tokens = count(line(tool)) + 1;
    known.set(tool, tokens);
  }
  return tokens;
}

/**
 * The tool catalogue within its budget. When every tool fits, all are shown as registered. When
 * not, the tools most relevant to the task (by the words they share with it) are shown, in their
 * registered order, and a last line says how many were left out and names them, so the model knows
 * they exist; nothing is dropped silently.
 */
export function selectTools(tools: readonly ToolCatalogueEntry[], taskText: string, budget: number, count: TokenCounter): { text: string; truncated: boolean; leftOut: string[] } {
  if (tools.reduce((sum, tool) => sum + cost(tool, count), 0) <= budget) return { text: tools.map(line).join("\n"), truncated: false, leftOut: [] };
  const task = words(taskText);
  const ranked = tools.map((tool, index) => ({ tool, index, score: relevance(tool, task) })).sort((a, b) => b.score - a.score || a.index - b.index);
  // A fifth of the budget names what is left out; the rest shows the most relevant tools in full.
  const shownBudget = Math.floor(budget * 0.8);
  const chosen = new Set<number>();
  let used = 0;
  for (const entry of ranked) {
    const tokens = cost(entry.tool, count);
    if (used + tokens > shownBudget) continue;
    chosen.add(entry.index);
    used += tokens;
  }
  const shown = tools.filter((_, index) => chosen.has(index));
  const leftOut = tools.filter((_, index) => !chosen.has(index)).map((tool) => tool.name);
  const note = fitText(`(${leftOut.length} more tool${leftOut.length === 1 ? "" : "s"} not shown here, as less relevant to this task; they can still be called by name: ${leftOut.join(", ")})`, budget - used - 1, count);
  return { text: [...shown.map(line), note.text].filter(Boolean).join("\n"), truncated: true, leftOut };
}
