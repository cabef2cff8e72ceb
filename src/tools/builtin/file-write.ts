import { randomBytes } from "node:crypto";
import { lstat, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { z } from "zod";
import { DuckError, ErrorCode } from "../../errors/duck-error.js";
import { defineTool } from "../tool-definition.js";
import { resolveInWorkspace } from "../workspace-paths.js";

export const FileWriteInputSchema = z.object({
  path: z.string().min(1).describe("File path, relative to the workspace"),
  content: z.string().max(10_000_000).describe("Text to write"),
  mode: z.enum(["create", "overwrite", "append"]).default("overwrite").describe("create fails if the file exists"),
});

export const fileWriteTool = defineTool({
  name: "file_write",
  description: "Create, overwrite or append to a text file in the workspace (written atomically).",
  inputSchema: FileWriteInputSchema,
  effect: "side-effecting",
  async execute(input, context) {
    const path = resolveInWorkspace(context.workspace, input.path);
    const existing = await lstat(path).catch(() => null);
    if (existing?.isSymbolicLink()) throw new DuckError(ErrorCode.PathOutsideWorkspace, `${input.path} is a symbolic link; refusing to write through it`);
    if (existing && !existing.isFile()) throw new DuckError(ErrorCode.ToolFailed, `${input.path} exists and is not a regular file`);
    if (existing && input.mode === "create") throw new DuckError(ErrorCode.ToolFailed, `${input.path} already exists (mode create)`);
    const before = existing ? await readFile(path, "utf8") : null;
    const after = input.mode === "append" && before !== null ? before + input.content : input.content;
    await mkdir(dirname(path), { recursive: true });
    // Write beside the target and rename over it, so a reader never sees half a file.
    const temporary = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
    try {
      await writeFile(temporary, after, { flag: "wx" });
      await rename(temporary, path);
    } catch (error) {
      await rm(temporary, { force: true });
      throw error;
    }
    const verb = before === null ? "created" : input.mode === "append" ? "appended to" : "overwrote";
    return {
      ok: true,
      output: `${verb} ${input.path} (${Buffer.byteLength(after)} bytes)`,
      data: { path: input.path, mode: input.mode, created: before === null, bytes_before: before === null ? 0 : Buffer.byteLength(before), bytes_after: Buffer.byteLength(after) },
    };
  },
});
