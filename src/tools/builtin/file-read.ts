import { constants } from "node:fs";
import { z } from "zod";
import { DuckError, ErrorCode } from "../../errors/duck-error.js";
import { defineTool } from "../tool-definition.js";
import { openInWorkspace, resolveInWorkspace } from "../workspace-paths.js";

export const FileReadInputSchema = z.object({
  path: z.string().min(1).describe("File path, relative to the workspace"),
  start_line: z.number().int().positive().optional().describe("First line to return (1-based)"),
  end_line: z.number().int().positive().optional().describe("Last line to return (inclusive)"),
});

/** Bytes that almost never occur in text files: a NUL in the first block means binary. */
function looksBinary(buffer: Buffer): boolean {
  return buffer.subarray(0, 8192).includes(0);
}

export const fileReadTool = defineTool({
  name: "file_read",
  description: "Read a text file in the workspace, optionally a range of lines.",
  inputSchema: FileReadInputSchema,
  effect: "read-only",
  async execute(input, context) {
    const protectedPaths = context.protectedPaths ?? [];
    const path = resolveInWorkspace(context.workspace, input.path, protectedPaths);
    const handle = await openInWorkspace(context.workspace, path, constants.O_RDONLY, 0o644, protectedPaths).catch((error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") throw new DuckError(ErrorCode.FileNotFound, `${input.path}: no such file in the workspace`);
      if (DuckError.isInstance(error)) throw error;
      throw new DuckError(ErrorCode.ToolFailed, `cannot read ${input.path}: ${error.message}`);
    });
    let buffer: Buffer;
    let size: number;
    try {
      const info = await handle.stat();
      if (!info.isFile()) throw new DuckError(ErrorCode.ToolInputInvalid, `${input.path} is not a regular file: give the path of a file`);
      size = info.size;
      const length = Math.min(size, context.fileReadMaxBytes);
      buffer = Buffer.alloc(length);
      await handle.read(buffer, 0, length, 0);
    } finally {
      await handle.close();
    }
    if (looksBinary(buffer)) {
      return { ok: false, output: "", error: { code: ErrorCode.ToolFailed, message: `${input.path} is a binary file (${size} bytes)` } };
    }
    const truncated = size > context.fileReadMaxBytes;
    const lines = buffer.toString("utf8").split("\n");
    const start = input.start_line ?? 1;
    const end = Math.min(input.end_line ?? lines.length, lines.length);
    if (start > end && lines.length > 0) {
      throw new DuckError(ErrorCode.ToolInputInvalid, `line range ${start}-${input.end_line ?? ""} is empty (the file has ${lines.length} lines)`);
    }
    const text = lines.slice(start - 1, end).join("\n");
    const note = truncated ? `\n[file_read: cut at ${context.fileReadMaxBytes} of ${size} bytes]` : "";
    return {
      ok: true,
      output: text + note,
      truncated,
      data: { path: input.path, size, start_line: start, end_line: end, total_lines: lines.length },
    };
  },
});
