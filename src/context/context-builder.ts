import type { MemoryHit } from "../contracts/index.js";
import type { IterationRecord } from "../state/task-projection.js";
import type { RuntimeConfig } from "../config/config-schemas.js";
import type { ToolCatalogueEntry } from "../tools/tool-registry.js";

export type TokenCounter = (text: string) => number;

export interface ContextInput {
  systemPrompt: string;
  taskText: string;
  memory: readonly MemoryHit[];
  tools: readonly ToolCatalogueEntry[];
  history: ReadonlyArray<{ text: string; answer: string | null }>;
  /** What the task's earlier decisions did (the agent loop), oldest first. */
  observations?: readonly IterationRecord[];
}

export interface SectionUsage {
  tokens: number;
  budget: number;
  truncated: boolean;
}

export interface BuiltContext {
  system: string;
  prompt: string;
  /** `observations` is there only from the second decision on. */
  sections: Record<"system" | "memory" | "tools" | "history" | "task", SectionUsage> & { observations?: SectionUsage };
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

/**
 * The earlier decisions' results, newest first in priority: each step's output gets an equal share
 * of the budget (cut, and said to be cut), and whole steps that do not fit are left out, oldest first.
 */
function observationsText(iterations: readonly IterationRecord[], budget: number, count: TokenCounter): { text: string; truncated: boolean } {
  const items: string[] = [];
  const steps = iterations.reduce((sum, iteration) => sum + Math.max(1, iteration.steps.length), 0);
  const share = Math.max(64, Math.floor(budget / Math.max(1, steps)) - 16);
  let truncated = false;
  for (const iteration of [...iterations].reverse()) {
    const lines = iteration.steps.map((step) => {
      const judged = step.verdict ? `, critic: ${step.verdict}` : "";
      const body = fitText(step.status === "succeeded" ? step.output : (step.error ?? step.output), share, count);
      truncated ||= body.truncated;
      return `- ${step.id} (${step.tool ?? "step"}) ${step.status}${judged}: ${body.text || "(no output)"}`;
    });
    const head = `Decision ${iteration.iteration}: ${iteration.directive.kind}`;
    items.push([head, ...(lines.length > 0 ? lines : ["- (no steps)"])].join("\n"));
  }
  const fitted = fitItems(items, budget, count);
  return { text: [...fitted.kept].reverse().join("\n"), truncated: truncated || fitted.truncated };
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
  const observed = observationsText(input.observations ?? [], budgets.observations, count);

  const parts: string[] = [];
  if (memory.text) parts.push(`## Relevant memory\n${memory.text}`);
  if (tools.text) parts.push(`## Tools\n${tools.text}`);
  if (historyText) parts.push(`## Conversation so far\n${historyText}`);
  parts.push(`## Task\n${task.text}`);
  if (observed.text) parts.push(`## What the steps so far returned\n${observed.text}\n\nIf this answers the task, respond with an answer written from these results, naming the steps you used; otherwise decide what to do next.`);
  const prompt = parts.join("\n\n");
  const usage = (text: string, budget: number, truncated: boolean): SectionUsage => ({ tokens: text ? count(text) : 0, budget, truncated });
  const sections = {
    system: usage(system.text, budgets.system, system.truncated),
    memory: usage(memory.text, budgets.memory, memory.truncated),
    tools: usage(tools.text, budgets.tools, tools.truncated),
    history: usage(historyText, budgets.history, historyFit.truncated),
    task: usage(task.text, budgets.task, task.truncated),
    ...(observed.text ? { observations: usage(observed.text, budgets.observations, observed.truncated) } : {}),
  };
  const total = Object.values(sections).reduce((sum, section) => sum + section.tokens, 0);
  return { system: system.text, prompt, sections, total_tokens: total };
}
