import { realpathSync } from "node:fs";
import { readdir, stat } from "node:fs/promises";
import { join, relative } from "node:path";
import { z } from "zod";
import { DuckError, ErrorCode } from "../../errors/duck-error.js";
import { defineTool } from "../tool-definition.js";
import { protectedReason, resolveInWorkspace } from "../workspace-paths.js";

const SKIPPED = new Set([".git", "node_modules", ".venv", "__pycache__", "dist", ".cache"]);

export const FileListInputSchema = z.object({
  path: z.string().min(1).default(".").describe("Directory, relative to the workspace"),
  depth: z.number().int().min(1).max(6).default(1).describe("How many levels down to list"),
  limit: z.number().int().positive().max(5000).default(500).describe("Most entries to return"),
});

export const fileListTool = defineTool({
  name: "file_list",
  description: "List files and directories in the workspace (skips .git, node_modules and build folders below the top).",
  inputSchema: FileListInputSchema,
  effect: "read-only",
  async execute(input, context) {
    const protectedPaths = context.protectedPaths ?? [];
    const root = resolveInWorkspace(context.workspace, input.path, protectedPaths);
    const workspaceRoot = realpathSync(context.workspace);
    const top = await stat(root).catch(() => null);
    if (!top) throw new DuckError(ErrorCode.FileNotFound, `${input.path}: no such directory in the workspace`);
    if (!top.isDirectory()) throw new DuckError(ErrorCode.ToolInputInvalid, `${input.path} is not a directory`);
    const entries: Array<{ path: string; type: "file" | "dir" | "link" | "other"; size: number | null }> = [];
    let truncated = false;
    const walk = async (dir: string, level: number): Promise<void> => {
      const children = (await readdir(dir, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name));
      for (const child of children) {
        if (entries.length >= input.limit) {
          truncated = true;
          return;
        }
        context.signal.throwIfAborted();
        const full = join(dir, child.name);
        // DuckLM's own state is not shown at all; `.git` is listed but never entered.
        if (protectedPaths.length > 0 && protectedReason(workspaceRoot, full, protectedPaths) && child.name !== ".git") continue;
        const type = child.isSymbolicLink() ? "link" : child.isDirectory() ? "dir" : child.isFile() ? "file" : "other";
        const size = type === "file" ? (await stat(full).catch(() => null))?.size ?? null : null;
        entries.push({ path: relative(root, full) || ".", type, size });
        // Links are listed, never followed.
        if (type === "dir" && level < input.depth && !SKIPPED.has(child.name)) await walk(full, level + 1);
      }
    };
    await walk(root, 1);
    const lines = entries.map((entry) => `${entry.type === "dir" ? `${entry.path}/` : entry.path}${entry.type === "link" ? " -> (link)" : ""}${entry.size !== null ? `  ${entry.size}` : ""}`);
    if (truncated) lines.push(`[file_list: stopped at ${input.limit} entries]`);
    return { ok: true, output: lines.join("\n"), truncated, data: { path: input.path, entries } };
  },
});
