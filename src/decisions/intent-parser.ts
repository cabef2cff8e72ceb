import type { ExecutionDirective } from "../contracts/index.js";

function unquote(text: string): string {
  const trimmed = text.trim();
  const match = /^(["'`])([\s\S]*)\1$/.exec(trimmed);
  return (match ? match[2]! : trimmed).trim();
}

interface IntentPattern {
  pattern: RegExp;
  build: (match: RegExpExecArray) => ExecutionDirective | null;
}

const tool = (name: string, args: Record<string, unknown>, reason: string): ExecutionDirective => ({
  kind: "tool",
  tool: name,
  arguments: args,
  reason,
});

// Ordered: the first pattern that matches wins. Each reads an explicit request, nothing more.
const PATTERNS: IntentPattern[] = [
  {
    pattern: /^(?:please\s+)?(?:fetch|get|download|open)(?:\s+the\s+page)?\s+<?(https?:\/\/[^\s>]+)>?\s*$/i,
    build: (m) => tool("web_fetch", { url: m[1]! }, "explicit URL to fetch"),
  },
  {
    pattern: /^(?:please\s+)?(?:search\s+the\s+web\s+for|web\s+search(?:\s+for)?|look\s+up\s+online)\s*:?\s+([\s\S]+?)\s*$/i,
    build: (m) => tool("web_search", { query: unquote(m[1]!) }, "explicit web search"),
  },
  {
    pattern: /^(?:please\s+)?(?:run|execute|exec)(?:\s+the\s+command)?\s*:?\s+`([^`]+)`\s*$/i,
    build: (m) => tool("shell_exec", { command: m[1]!.trim() }, "explicit command in backticks"),
  },
  {
    pattern: /^(?:please\s+)?(?:run|execute|exec)(?:\s+the\s+command)?\s*:?\s+([\s\S]+)$/i,
    build: (m) => tool("shell_exec", { command: unquote(m[1]!) }, "explicit command"),
  },
  {
    pattern: /^(?:please\s+)?(?:read|show|open|cat|print)(?:\s+(?:me\s+)?the)?\s+file\s+(.+?)\s*$/i,
    build: (m) => tool("file_read", { path: unquote(m[1]!) }, "explicit file read"),
  },
  {
    pattern: /^(?:please\s+)?write\s+file\s+(\S+)\s*(?::|with|containing)\s*([\s\S]*)$/i,
    build: (m) => tool("file_write", { path: unquote(m[1]!), content: unquote(m[2]!), mode: "overwrite" }, "explicit file write"),
  },
  {
    pattern: /^(?:please\s+)?write\s+([\s\S]+?)\s+(?:to|into)\s+(?:the\s+)?file\s+(\S+)\s*$/i,
    build: (m) => tool("file_write", { path: unquote(m[2]!), content: unquote(m[1]!), mode: "overwrite" }, "explicit file write"),
  },
  {
    pattern: /^(?:what\s+do\s+you\s+(?:remember|know)\s+about|recall|search\s+memory\s+for)\s+([\s\S]+?)\??\s*$/i,
    build: (m) => tool("memory_search", { query: unquote(m[1]!) }, "explicit memory search"),
  },
  {
    pattern: /^(?:please\s+)?remember(?:\s+that)?\s*:?\s+([\s\S]+)$/i,
    build: (m) => tool("memory_insert", { text: unquote(m[1]!), kind: "fact" }, "explicit request to remember"),
  },
  {
    pattern: /^(?:list|show)\s+(?:your\s+|the\s+)?memor(?:y|ies)\s*$/i,
    build: () => tool("memory_list", {}, "explicit memory listing"),
  },
];

/**
 * Reads explicit requests ("run `ls`", "read file X", "remember that …") without any model.
 * Returns null when the text is not one of them.
 */
export function parseIntent(text: string): ExecutionDirective | null {
  const trimmed = text.trim();
  for (const { pattern, build } of PATTERNS) {
    const match = pattern.exec(trimmed);
    if (match) {
      const directive = build(match);
      if (directive) return directive;
    }
  }
  return null;
}

export const NO_MODEL_ANSWER = [
  "No language model is configured, so DuckLM can only act on explicit requests right now:",
  "  run `ls -la`            read file README.md       write file notes.txt: hello",
  "  remember that …         what do you remember about …",
  "  fetch https://…          search the web for …      (web_search needs web.search in integrations.json)",
  "To answer anything else, get a model: `ducklm setup` downloads a small one for every role",
  "(see README, \"Getting models\").",
].join("\n");
