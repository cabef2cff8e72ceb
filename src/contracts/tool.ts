import { z } from "zod";

/** A request to run one tool with arguments that its input schema validates. */
export const ToolCallSchema = z.object({
  tool: z.string().min(1).max(200),
  arguments: z.record(z.string(), z.unknown()).default({}),
});
export type ToolCall = z.infer<typeof ToolCallSchema>;

export const ToolErrorSchema = z.object({
  code: z.string(),
  message: z.string(),
});

/** What a tool run produced. `output` is text meant for people and models; `data` is structured. */
export const ToolResultSchema = z.object({
  tool: z.string(),
  ok: z.boolean(),
  output: z.string(),
  data: z.unknown().optional(),
  error: ToolErrorSchema.optional(),
  /** Shell commands only. */
  exit_code: z.number().int().nullable().optional(),
  /** True when the output was cut at the configured cap. */
  truncated: z.boolean().default(false),
  duration_ms: z.number().nonnegative(),
});
export type ToolResult = z.infer<typeof ToolResultSchema>;

/** Whether running a tool can change anything outside DuckLM. Decides what resume may re-run. */
export const ToolEffectSchema = z.enum(["read-only", "side-effecting"]);
export type ToolEffect = z.infer<typeof ToolEffectSchema>;
