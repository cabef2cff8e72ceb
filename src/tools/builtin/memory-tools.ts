import { z } from "zod";
import { MemoryKindSchema } from "../../contracts/index.js";
import type { MemoryService } from "../../memory/memory-service.js";
import { defineTool, type AnyToolDefinition } from "../tool-definition.js";

/**
 * The memory tools. `memory` may be given late (a function), for a registry that needs the tools'
 * schemas before the memory service exists (a replay, which never runs them).
 */
export function createMemoryTools(given: MemoryService | (() => MemoryService)): AnyToolDefinition[] {
  const service = () => (typeof given === "function" ? given() : given);
  const memoryInsert = defineTool({
    name: "memory_insert",
    description: "Store a fact, procedure or note in long-term memory.",
    inputSchema: z.object({ text: z.string().min(1).max(20_000), kind: MemoryKindSchema.default("fact") }),
    // Writes DuckLM's own store only, but a repeat would store a copy: never re-run silently.
    effect: "side-effecting",
    async execute(input, context) {
      const { action, entry } = await service().remember(input.text, input.kind, context.taskId);
      const said = action === "insert" ? "remembered" : "already known, reinforced";
      return { ok: true, output: `${said} (#${entry.id}): ${entry.text}`, data: { entry, action } };
    },
  });
  const memorySearch = defineTool({
    name: "memory_search",
    description: "Search long-term memory for entries about a subject.",
    inputSchema: z.object({ query: z.string().min(1).max(500), limit: z.number().int().positive().max(50).default(5) }),
    effect: "read-only",
    async execute(input) {
      const hits = await service().recall(input.query, input.limit);
      const output = hits.length === 0 ? `nothing remembered about "${input.query}"` : hits.map((hit) => `- ${hit.entry.text}`).join("\n");
      return { ok: true, output, data: { hits } };
    },
  });
  const memoryList = defineTool({
    name: "memory_list",
    description: "List the most recent long-term memory entries.",
    inputSchema: z.object({ limit: z.number().int().positive().max(200).default(20) }),
    effect: "read-only",
    async execute(input) {
      const entries = service().store.list(input.limit);
      const output = entries.length === 0 ? "memory is empty" : entries.map((entry) => `#${entry.id} [${entry.kind}] ${entry.text}`).join("\n");
      return { ok: true, output, data: { entries } };
    },
  });
  return [memoryInsert, memorySearch, memoryList];
}
