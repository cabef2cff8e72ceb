import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { lstat, mkdir, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { z } from "zod";
import { DuckError, ErrorCode } from "../../errors/duck-error.js";
import { defineTool } from "../tool-definition.js";
import { openInWorkspace, refuseReadOnly, resolveInWorkspace } from "../workspace-paths.js";

export const FileWriteInputSchema = z.object({
  path: z.string().min(1).describe("File path, relative to the workspace"),
  content: z.string().max(10_000_000).describe("Text to write"),
  mode: z.enum(["create", "overwrite", "append"]).default("overwrite").describe("create fails if the file exists"),
});

/** Longest diff kept in a result; the rest is cut and the cut is said. */
const DIFF_CAP = 20_000;

/**
 * Writes `content` to a path already resolved inside the workspace: into a new temporary file beside
 * it (opened without following links, and checked to really be in the workspace), then renamed over
 * it, so a reader never sees half a file and nothing lands outside even if a directory is swapped.
 */
export async function writeFileAtomically(workspace: string, path: string, content: string, protectedPaths: readonly string[] = []): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const temporary = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
  const handle = await openInWorkspace(workspace, temporary, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o644, protectedPaths);
  try {
    await handle.writeFile(content);
    await handle.sync();
  } catch (error) {
    await handle.close();
    await rm(temporary, { force: true });
    throw error;
  }
  await handle.close();
  try {
    // Re-check the target right before the rename: a link put there meanwhile is refused.
    resolveInWorkspace(workspace, path, protectedPaths);
    await rename(temporary, path);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}

/** The file's text as it is now, read without following a link someone may have put there since. */
async function readExisting(workspace: string, path: string, protectedPaths: readonly string[]): Promise<string> {
  const handle = await openInWorkspace(workspace, path, constants.O_RDONLY, 0, protectedPaths);
  try {
    if (!(await handle.stat()).isFile()) throw new DuckError(ErrorCode.ToolFailed, `${path} is not a regular file`);
    return await handle.readFile("utf8");
  } finally {
    await handle.close();
  }
}

export const fileWriteTool = defineTool({
  name: "file_write",
  description: "Create, overwrite or append to a text file in the workspace (written atomically); returns a diff.",
  inputSchema: FileWriteInputSchema,
  effect: "side-effecting",
  async execute(input, context) {
    const protectedPaths = context.protectedPaths ?? [];
    const path = resolveInWorkspace(context.workspace, input.path, protectedPaths);
    refuseReadOnly(input.path, path, context.readOnlyPaths ?? []);
    const existing = await lstat(path).catch(() => null);
    if (existing && !existing.isFile()) throw new DuckError(ErrorCode.ToolInputInvalid, `${input.path} exists and is not a regular file: give the path of a file`);
    if (existing && input.mode === "create") throw new DuckError(ErrorCode.ToolFailed, `${input.path} already exists (mode create)`);
    const before = existing ? await readExisting(context.workspace, path, protectedPaths) : null;
    const after = input.mode === "append" && before !== null ? before + input.content : input.content;
    await writeFileAtomically(context.workspace, path, after, protectedPaths);
    const verb = before === null ? "created" : input.mode === "append" ? "appended to" : "overwrote";
    const { createTwoFilesPatch } = await import("diff");
    let diff = createTwoFilesPatch(before === null ? "/dev/null" : `a/${input.path}`, `b/${input.path}`, before ?? "", after, undefined, undefined, { context: 3 });
    const diffTruncated = diff.length > DIFF_CAP;
    if (diffTruncated) diff = `${diff.slice(0, DIFF_CAP)}\n[file_write: diff cut at ${DIFF_CAP} characters]`;
    return {
      ok: true,
      output: `${verb} ${input.path} (${Buffer.byteLength(after)} bytes)\n${diff}`,
      truncated: diffTruncated,
      data: {
        path: input.path,
        mode: input.mode,
        created: before === null,
        bytes_before: before === null ? 0 : Buffer.byteLength(before),
        bytes_after: Buffer.byteLength(after),
        diff,
      },
    };
  },
});
