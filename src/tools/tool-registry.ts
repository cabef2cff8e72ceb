import { z } from "zod";
import type { ToolResult } from "../contracts/index.js";
import { describeError, DuckError, ErrorCode } from "../errors/duck-error.js";
import type { AnyToolDefinition, ToolContext, ToolDefinition } from "./tool-definition.js";

export interface ToolCatalogueEntry {
  name: string;
  description: string;
  effect: string;
  input_schema: unknown;
}

const REDACTED = "[redacted]";

/** The part of a base64 stream fixed by `secret` alone when it starts `offset` bytes into a 3-byte group. */
function base64Core(secret: Buffer, offset: number): string {
  const encoded = Buffer.concat([Buffer.alloc(offset), secret, Buffer.alloc(2)]).toString("base64");
  return encoded.slice(Math.ceil((8 * offset) / 6), Math.floor((8 * (offset + secret.length)) / 6));
}

/**
 * A secret as it may show up in output: as written, reversed, URL-encoded, in hex and in base64 at
 * each of the three alignments a stream can put it at (standard and URL-safe alphabets).
 */
export function secretSpellings(secret: string): string[] {
  const bytes = Buffer.from(secret, "utf8");
  const spellings = new Set([secret, [...secret].reverse().join(""), encodeURIComponent(secret), bytes.toString("hex"), bytes.toString("hex").toUpperCase()]);
  for (const offset of [0, 1, 2]) {
    const core = base64Core(bytes, offset);
    spellings.add(core);
    spellings.add(core.replace(/\+/g, "-").replace(/\//g, "_"));
  }
  // Very short derived forms would redact ordinary text; the secret itself is always redacted.
  return [...spellings].filter((spelling) => spelling === secret || spelling.length >= 4).sort((a, b) => b.length - a.length);
}

function redactText(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) for (const spelling of secretSpellings(secret)) out = out.split(spelling).join(REDACTED);
  return out;
}

/** Replaces every occurrence of a secret, anywhere in the result, by value. */
export function redactResult(result: ToolResult, secrets: readonly string[]): ToolResult {
  const active = secrets.filter((secret) => secret.length > 0);
  if (active.length === 0) return result;
  return JSON.parse(JSON.stringify(result), (_key, value: unknown) => (typeof value === "string" ? redactText(value, active) : value)) as ToolResult;
}

/** Every tool the runtime knows, by name. Validates input before a tool sees it. */
export class ToolRegistry {
  private readonly tools = new Map<string, ToolDefinition<unknown>>();
  /** Tools the runtime runs itself (a coder step's code_apply): never shown to the models or callable by name in a directive. */
  private readonly internal = new Set<string>();
  /** The catalogue as last built: JSON schemas are costly to derive, and tools change only on register. */
  private cachedCatalogue: ToolCatalogueEntry[] | null = null;

  register<Input>(tool: ToolDefinition<Input>, options: { internal?: boolean } = {}): this {
    if (this.tools.has(tool.name)) throw new DuckError(ErrorCode.InvalidInput, `tool ${tool.name} is registered twice`);
    this.tools.set(tool.name, tool as ToolDefinition<unknown>);
    if (options.internal) this.internal.add(tool.name);
    this.cachedCatalogue = null;
    return this;
  }

  get(name: string): ToolDefinition<unknown> | undefined {
    return this.tools.get(name);
  }

  require(name: string): ToolDefinition<unknown> {
    const tool = this.tools.get(name);
    if (!tool) {
      throw new DuckError(ErrorCode.ToolNotFound, `no tool named ${name}; known tools: ${[...this.tools.keys()].join(", ")}`, {
        details: { tool: name },
      });
    }
    return tool;
  }

  isInternal(name: string): boolean {
    return this.internal.has(name);
  }

  names(): string[] {
    return [...this.tools.keys()].filter((name) => !this.internal.has(name));
  }

  /** What the models are told about each tool. */
  catalogue(): ToolCatalogueEntry[] {
    this.cachedCatalogue ??= [...this.tools.values()].filter((tool) => !this.internal.has(tool.name)).map((tool) => ({
      name: tool.name,
      description: tool.description,
      effect: tool.effect,
      input_schema: tool.jsonSchema ?? z.toJSONSchema(tool.inputSchema, { io: "input", unrepresentable: "any" }),
    }));
    return this.cachedCatalogue;
  }

  /** Validates and runs one call; never throws: failures come back as a ToolResult with an error. */
  async run(name: string, args: Record<string, unknown>, context: ToolContext): Promise<ToolResult> {
    const started = performance.now();
    const finish = (partial: Omit<ToolResult, "tool" | "duration_ms" | "truncated"> & { truncated?: boolean }): ToolResult => ({
      tool: name,
      truncated: false,
      ...partial,
      duration_ms: Math.round((performance.now() - started) * 1000) / 1000,
    });
    const tool = this.tools.get(name);
    if (!tool) {
      return finish({ ok: false, output: "", error: { code: ErrorCode.ToolNotFound, message: `no tool named ${name}` } });
    }
    const parsed = tool.inputSchema.safeParse(args);
    if (!parsed.success) {
      const message = parsed.error.issues.map((issue) => `${issue.path.join(".") || "(input)"}: ${issue.message}`).join("; ");
      return finish({ ok: false, output: "", error: { code: ErrorCode.ToolInputInvalid, message: `${name}: ${message}` } });
    }
    try {
      const output = await tool.execute(parsed.data, context);
      return redactResult(finish({ ...output }), context.redact ?? []);
    } catch (error) {
      const described = context.signal.aborted && !DuckError.isInstance(error)
        ? { code: ErrorCode.ToolTimeout, message: `${name} was stopped: ${String(context.signal.reason ?? "aborted")}` }
        : describeError(error);
      return finish({ ok: false, output: "", error: described });
    }
  }
}

export type { AnyToolDefinition };
