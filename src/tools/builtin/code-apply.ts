import { z } from "zod";
import { ErrorCode } from "../../errors/duck-error.js";
import { CODE_APPLY_TOOL } from "../../permissions/permission-policy.js";
import { defineTool, type ToolOutput } from "../tool-definition.js";
import { fileWriteTool } from "./file-write.js";
import { shellExecTool } from "./shell-exec.js";

export const CodeApplyInputSchema = z.object({
  files: z.array(z.object({ path: z.string().min(1).max(4096), content: z.string().max(100_000) })).min(1).max(20),
  test_command: z.string().min(1).max(4000).optional(),
});

/**
 * What a coder step runs: the proposed files, each written by file_write (inside the workspace,
 * atomically, with a diff), then the step's test command through shell_exec (confined like any
 * command). One tool run, so the step has one recorded result that a replay or a resume can use.
 * Internal: the models reach it only through a coder step, never by name.
 */
export const codeApplyTool = defineTool({
  name: CODE_APPLY_TOOL,
  description: "Write the coder's files and run the step's test command.",
  inputSchema: CodeApplyInputSchema,
  effect: "side-effecting",
  async execute(input, context): Promise<ToolOutput> {
    const written: Array<{ path: string; ok: boolean; error?: string }> = [];
    // The first refusal's own code (a path outside the workspace, say) decides whether a retry can help.
    let firstFailure: string | null = null;
    const sections: string[] = [];
    for (const file of input.files) {
      const result = await fileWriteTool.execute({ path: file.path, content: file.content, mode: "overwrite" }, context).catch((error: unknown) => ({
        ok: false,
        output: "",
        error: { code: (error as { code?: string }).code ?? ErrorCode.ToolFailed, message: (error as Error).message },
      }));
      written.push({ path: file.path, ok: result.ok, ...(result.error ? { error: `${result.error.code}: ${result.error.message}` } : {}) });
      // A system error (ENAMETOOLONG…) is the tool's failure; DuckLM's own refusals keep their code.
      if (!result.ok) firstFailure ??= result.error?.code?.startsWith("DUCK_ERR_") ? result.error.code : ErrorCode.ToolFailed;
      sections.push(result.ok ? result.output : `could not write ${file.path}: ${result.error?.code}: ${result.error?.message}`);
    }
    const allWritten = written.every((file) => file.ok);
    if (!allWritten || !input.test_command) {
      return {
        ok: allWritten,
        output: sections.join("\n"),
        data: { files: written, test: null },
        ...(allWritten ? {} : { error: { code: firstFailure ?? ErrorCode.ToolFailed, message: `could not write ${written.filter((file) => !file.ok).map((file) => `${file.path} (${file.error})`).join(", ")}` } }),
      };
    }
    const test = await shellExecTool.execute({ command: input.test_command }, context);
    sections.push(`$ ${input.test_command}\n${test.output}`);
    return {
      ok: test.ok,
      output: sections.join("\n"),
      data: { files: written, test: { command: input.test_command, exit_code: test.exit_code ?? null } },
      exit_code: test.exit_code ?? null,
      truncated: test.truncated ?? false,
      ...(test.ok ? {} : { error: test.error ?? { code: ErrorCode.ToolFailed, message: `the test command exited with ${test.exit_code}` } }),
    };
  },
});
