import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Logger } from "pino";
import { z } from "zod";
import type { AnyToolDefinition } from "./tool-definition.js";

export interface PluginFailure {
  file: string;
  reason: string;
}

export interface LoadedPlugins {
  tools: AnyToolDefinition[];
  failures: PluginFailure[];
}

const TOOL_NAME = /^[a-z][a-z0-9_]{0,63}$/;

/** Why a module export is not a usable tool, or null when it is one. */
export function checkToolShape(value: unknown): string | null {
  if (!value || typeof value !== "object") return "the export is not an object";
  const tool = value as Record<string, unknown>;
  if (typeof tool.name !== "string" || !TOOL_NAME.test(tool.name)) return "name must be lower_snake_case, 1-64 characters";
  if (typeof tool.description !== "string" || tool.description.length === 0) return `${tool.name}: description is missing`;
  const schema = tool.inputSchema as { safeParse?: unknown } | undefined;
  if (!schema || typeof schema.safeParse !== "function") return `${tool.name}: inputSchema must be a zod schema`;
  if (tool.effect !== "read-only" && tool.effect !== "side-effecting") return `${tool.name}: effect must be "read-only" or "side-effecting"`;
  if (typeof tool.execute !== "function") return `${tool.name}: execute must be a function`;
  return null;
}

/** What a plugin's factory receives, so that a plugin needs no dependencies of its own. */
export interface PluginApi {
  z: typeof z;
}

/**
 * Loads tool plugins: every `.js` / `.mjs` file in the given folders whose default export is a tool,
 * an array of tools, or a function `({ z }) => tool | tool[]`. A plugin that fails to load or is
 * malformed is reported and skipped; start-up goes on.
 */
export async function loadPlugins(folders: readonly string[], logger: Logger, taken: ReadonlySet<string> = new Set()): Promise<LoadedPlugins> {
  const tools: AnyToolDefinition[] = [];
  const failures: PluginFailure[] = [];
  const names = new Set(taken);
  for (const folder of folders) {
    if (!existsSync(folder)) continue;
    const files = readdirSync(folder).filter((name) => name.endsWith(".js") || name.endsWith(".mjs")).sort();
    for (const name of files) {
      const file = join(folder, name);
      try {
        const module = (await import(pathToFileURL(file).href)) as { default?: unknown };
        const produced = typeof module.default === "function" ? await (module.default as (api: PluginApi) => unknown)({ z }) : module.default;
        const exported = Array.isArray(produced) ? produced : [produced];
        for (const candidate of exported) {
          const problem = checkToolShape(candidate);
          if (problem) throw new DuckError(ErrorCode.ConfigInvalid, problem);
          const tool = candidate as AnyToolDefinition;
          if (names.has(tool.name)) throw new DuckError(ErrorCode.ConfigInvalid, `a tool named ${tool.name} already exists`);
          // The models are shown the input as JSON schema: a schema that cannot become one is refused now.
          z.toJSONSchema(tool.inputSchema, { io: "input", unrepresentable: "any" });
          names.add(tool.name);
          tools.push(tool);
        }
        logger.info({ file, tools: exported.length }, "plugin loaded");
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        failures.push({ file, reason });
        logger.warn({ file, reason }, "plugin skipped");
      }
    }
  }
  return { tools, failures };
}
