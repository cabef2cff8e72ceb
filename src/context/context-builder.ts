import type { MemoryHit } from "../contracts/index.js";
import type { RuntimeConfig } from "../config/config-schemas.js";
import type { ToolCatalogueEntry } from "../tools/tool-registry.js";

export type TokenCounter = (text: string) => number;

export interface ContextInput {
  systemPrompt: string;
  taskText: string;
  memory: readonly MemoryHit[];
  tools: readonly ToolCatalogueEntry[];
  history: ReadonlyArray<{ text: string; answer: string | null }>;
}

export interface SectionUsage {
  tokens: number;
  budget: number;
  truncated: boolean;
}

export interface BuiltContext {
  system: string;
  prompt: string;
  sections: Record<"system" | "memory" | "tools" | "history" | "task", SectionUsage>;
  total_tokens: number;
}

/** Cuts text to at most `budget` tokens, keeping the start. */
export function fitText(text: string, budget: number, count: TokenCounter): { text: string; truncated: boolean } {
  if (count(text) <= budget) return { text, truncated: false };
  let length = Math.floor(text.length * (budget / Math.max(1, count(text))));
  while (length > 0 && count(text.slice(0, length) + "…") > budget) length = Math.floor(length * 0.9);
  return { text: length > 0 ? `${text.slice(0, length)}…` : "", truncated: true };
}

/** Keeps whole items, in the order given, while they fit in the budget. */
function fitItems(items: readonly string[], budget: number, count: TokenCounter): { kept: string[]; truncated: boolean } {
  const kept: string[] = [];
  let used = 0;
  for (const item of items) {
    const cost = count(item) + 1;
    if (used + cost > budget) return { kept, truncated: true };
    kept.push(item);
    used += cost;
  }
  return { kept, truncated: false };
}

/** Assembles what the models see, each section within its token budget from runtime.json. */
export function buildContext(input: ContextInput, budgets: RuntimeConfig["context_budgets"], count: TokenCounter): BuiltContext {
  const system = fitText(input.systemPrompt, budgets.system, count);
  const memoryFit = fitItems(input.memory.map((hit) => `- (${hit.entry.kind}) ${hit.entry.text}`), budgets.memory, count);
  const memory = { text: memoryFit.kept.join("\n"), truncated: memoryFit.truncated };
  const toolsFit = fitItems(
    input.tools.map((tool) => `- ${tool.name} [${tool.effect}]: ${tool.description} input: ${JSON.stringify(tool.input_schema)}`),
    budgets.tools,
    count,
  );
  const tools = { text: toolsFit.kept.join("\n"), truncated: toolsFit.truncated };
  // Most recent history matters most: fit from the newest, then restore chronological order.
  const historyItems = [...input.history].reverse().map((turn) => `User: ${turn.text}\nDuckLM: ${turn.answer ?? "(no answer)"}`);
  const historyFit = fitItems(historyItems, budgets.history, count);
  const historyText = [...historyFit.kept].reverse().join("\n");
  const task = fitText(input.taskText, budgets.task, count);

  const parts: string[] = [];
  if (memory.text) parts.push(`## Relevant memory\n${memory.text}`);
  if (tools.text) parts.push(`## Tools\n${tools.text}`);
  if (historyText) parts.push(`## Conversation so far\n${historyText}`);
  parts.push(`## Task\n${task.text}`);
  const prompt = parts.join("\n\n");
  const usage = (text: string, budget: number, truncated: boolean): SectionUsage => ({ tokens: text ? count(text) : 0, budget, truncated });
  const sections = {
    system: usage(system.text, budgets.system, system.truncated),
    memory: usage(memory.text, budgets.memory, memory.truncated),
    tools: usage(tools.text, budgets.tools, tools.truncated),
    history: usage(historyText, budgets.history, historyFit.truncated),
    task: usage(task.text, budgets.task, task.truncated),
  };
  const total = Object.values(sections).reduce((sum, section) => sum + section.tokens, 0);
  return { system: system.text, prompt, sections, total_tokens: total };
}
