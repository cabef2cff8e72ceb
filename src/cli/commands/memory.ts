import type { Command } from "commander";
import { MemoryKindSchema } from "../../contracts/index.js";
import { DuckError, ErrorCode } from "../../errors/duck-error.js";
import type { DuckLM } from "../../runtime/ducklm.js";
import { withDuckLM, type GlobalOptions } from "../with-ducklm.js";
import { wholeNumberOption } from "../cli-numbers.js";
import { oneLine } from "../terminal-text.js";

function entryId(text: string): number {
  const id = Number(text);
  if (!Number.isInteger(id) || id <= 0) throw new DuckError(ErrorCode.InvalidInput, `"${text}" is not a memory id (see \`ducklm memory list\`)`);
  return id;
}

async function memoryAction(ducklm: DuckLM, action: string, args: string[], options: { json?: boolean; kind?: string; limit?: string }): Promise<number> {
  const memory = ducklm.memory;
  const limit = wholeNumberOption(options.limit, 10, "--limit");
  const print = (value: unknown, human: () => void) => (options.json ? console.log(JSON.stringify(value)) : human());
  switch (action) {
    case "search": {
      const query = args.join(" ").trim();
      if (!query) throw new DuckError(ErrorCode.InvalidInput, "what to search for: ducklm memory search <words>");
      const hits = await memory.recall(query, limit);
      print(hits, () => {
        if (hits.length === 0) console.log("nothing found");
        for (const hit of hits) console.log(`#${hit.entry.id}  ${hit.score.toFixed(4)}  (${hit.matched_by.join("+")})  [${hit.entry.kind}] ${oneLine(hit.entry.text)}`);
      });
      return 0;
    }
    case "list": {
      const entries = memory.list(limit);
      print(entries, () => {
        if (entries.length === 0) console.log("memory is empty");
        for (const entry of entries) console.log(`#${entry.id}  w=${entry.weight.toFixed(2)}${entry.pinned ? "  pinned" : ""}  [${entry.kind}] ${oneLine(entry.text)}`);
      });
      return 0;
    }
    case "add": {
      const text = args.join(" ").trim();
      if (!text) throw new DuckError(ErrorCode.InvalidInput, "what to remember: ducklm memory add <text>");
      const kind = MemoryKindSchema.safeParse(options.kind ?? "fact");
      if (!kind.success) throw new DuckError(ErrorCode.InvalidInput, `--kind must be one of ${MemoryKindSchema.options.join(", ")}`);
      const result = await memory.remember(text, kind.data, "cli");
      print(result, () => console.log(result.action === "insert" ? `remembered #${result.entry.id}` : `already known as #${result.entry.id}; its weight is now ${Number(result.entry.weight.toFixed(2))}`));
      return 0;
    }
    case "rm": {
      const result = await memory.forget(entryId(args[0] ?? ""), "cli");
      print({ deleted: result.entry.id, task_id: result.taskId }, () => console.log(`forgot #${result.entry.id}`));
      return 0;
    }
    case "pin":
    case "unpin": {
      const result = await memory.pin(entryId(args[0] ?? ""), action === "pin", "cli");
      print({ id: result.entry.id, pinned: action === "pin", task_id: result.taskId }, () => console.log(`${action === "pin" ? "pinned" : "unpinned"} #${result.entry.id}`));
      return 0;
    }
    case "cleanup": {
      const result = memory.cleanup();
      print(result, () => console.log(`removed ${result.removed.length} entr${result.removed.length === 1 ? "y" : "ies"}; decayed ${result.decayed}`));
      return 0;
    }
    case "reindex": {
      const count = await memory.reindex();
      const stats = memory.stats();
      print({ reindexed: count }, () => console.log(stats.vector_index ? `embedded ${count} entries again and rebuilt the vector index` : "no embedding model: keyword search only, nothing to index"));
      return 0;
    }
    case "stats": {
      const stats = memory.stats();
      print(stats, () => {
        console.log(`${stats.entries} entries (${stats.pinned} pinned), ${stats.bytes} bytes of text, ${stats.with_embedding} with vectors`);
        console.log(`by kind: ${Object.entries(stats.by_kind).map(([kind, count]) => `${kind} ${count}`).join(", ") || "-"}`);
        console.log(stats.vector_index ? `vector index: ${stats.vector_index.entries} entries, ${stats.vector_index.space}, model ${stats.vector_index.model}` : "vector index: none (no embedding model; keyword search only)");
      });
      return 0;
    }
    default:
      throw new DuckError(ErrorCode.InvalidInput, `unknown memory action "${action}"; use search, list, add, rm, pin, unpin, cleanup, reindex or stats`);
  }
}

/** `ducklm memory search|list|add|rm|pin|unpin|cleanup|reindex|stats`. */
export function registerMemory(program: Command): void {
  program
    .command("memory")
    .description("long-term memory: search <words> | list | add <text> | rm <id> | pin <id> | unpin <id> | cleanup | reindex | stats")
    .argument("<action>", "search, list, add, rm, pin, unpin, cleanup, reindex or stats")
    .argument("[words...]", "the query, the text, or the entry id")
    .option("--kind <kind>", "for add: fact, procedure, outcome or note", "fact")
    .option("--limit <n>", "for search and list", "10")
    .option("--json", "print JSON")
    .action(async (action: string, words: string[], options: { json?: boolean; kind?: string; limit?: string }) =>
      withDuckLM(program.opts<GlobalOptions>(), (ducklm) => memoryAction(ducklm, action, words, options), { models: true }),
    );
}
