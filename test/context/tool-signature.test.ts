import { z } from "zod";
import { describe, expect, it } from "vitest";
import { ToolRegistry } from "../../src/tools/tool-registry.js";
import { fileListTool } from "../../src/tools/builtin/file-list.js";
import { fileReadTool } from "../../src/tools/builtin/file-read.js";
import { fileWriteTool } from "../../src/tools/builtin/file-write.js";
import { shellExecTool } from "../../src/tools/builtin/shell-exec.js";
import type { AnyToolDefinition } from "../../src/tools/tool-definition.js";
import { describeTool, typeOf } from "../../src/context/tool-signature.js";

describe("describeTool", () => {
  it("names every argument of every built-in tool, with what is required, and is much shorter than the JSON schema", () => {
    const registry = new ToolRegistry();
    for (const tool of [fileReadTool, fileWriteTool, fileListTool, shellExecTool] as AnyToolDefinition[]) registry.register(tool);
    for (const entry of registry.catalogue()) {
      const text = describeTool(entry);
      const schema = entry.input_schema as { properties: Record<string, unknown>; required?: string[] };
      for (const key of Object.keys(schema.properties)) {
        const required = schema.required?.includes(key) ?? false;
        expect(text, `${entry.name}.${key}`).toMatch(new RegExp(`^    ${key}${required ? "" : "\\?"}: `, "m"));
      }
      expect(text.length).toBeLessThan(JSON.stringify(entry.input_schema).length);
    }
    const read = describeTool(registry.catalogue().find((entry) => entry.name === "file_read")!);
    expect(read).toContain("    path: string — File path, relative to the workspace");
    expect(read).toContain("    start_line?: integer ≥1");
    // zod's MAX_SAFE_INTEGER bound for int() is noise to a model.
    expect(read).not.toContain("9007199254740991");
  });

  it("writes the shapes MCP servers use: enums, arrays, nested objects, unions, defaults", () => {
    const schema = z.toJSONSchema(
      z.object({
        edits: z.array(z.object({ oldText: z.string(), newText: z.string() })),
        mode: z.enum(["fast", "safe"]).default("safe"),
        target: z.union([z.string(), z.number()]),
        tags: z.array(z.string()).optional(),
        dryRun: z.boolean().optional(),
      }),
      { io: "input" },
    );
    const text = describeTool({ name: "edit_file", description: "Edit a file.", effect: "side-effecting", input_schema: schema });
    expect(text.split("\n")).toEqual([
      "- edit_file [side-effecting]: Edit a file.",
      "    edits: { oldText: string, newText: string }[]",
      '    mode?: "fast"|"safe" = "safe"',
      "    target: string | number",
      "    tags?: string[]",
      "    dryRun?: boolean",
    ]);
  });

  it("falls back to the schema itself when it is not an object of named arguments", () => {
    expect(describeTool({ name: "ping", description: "Ping.", effect: "read-only", input_schema: { type: "object" } })).toBe("- ping [read-only]: Ping. input: {\"type\":\"object\"}");
    expect(describeTool({ name: "noop", description: "Nothing.", effect: "read-only", input_schema: { type: "object", properties: {} } })).toBe("- noop [read-only]: Nothing. (no arguments)");
    expect(typeOf({ type: "array", items: { anyOf: [{ type: "string" }, { type: "integer" }] } })).toBe("(string | integer)[]");
    expect(typeOf({ type: "integer", minimum: 0, maximum: 10 })).toBe("integer 0..10");
  });
});
