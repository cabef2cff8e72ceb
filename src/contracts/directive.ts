import { z } from "zod";

// Bounds keep a model's output (even a noisy one decoded under a grammar) small enough to store
// and show. Lengths are checked by zod, not by the grammar: see docs/decisions/0002.
const Text = z.string().max(20_000);
const StepId = z.string().min(1).max(64);

export const CoderSpecSchema = z.object({
  specification: Text,
  files: z.array(z.string().max(4096)).max(50).default([]),
  test_command: z.string().max(4000).optional(),
});
export type CoderSpec = z.infer<typeof CoderSpecSchema>;

/** What the coder model proposes for a coder step: whole files, written through file_write. */
export const CoderProposalSchema = z.object({
  files: z
    .array(z.object({ path: z.string().min(1).max(4096), content: z.string().max(100_000) }))
    .min(1)
    .max(20),
  notes: z.string().max(2000).default(""),
});
export type CoderProposal = z.infer<typeof CoderProposalSchema>;

/**
 * The most steps any plan may have. runtime.json `scheduler.max_plan_steps` (50 by default) sets the
 * limit a task works under; this is the most it may be set to.
 */
export const PLAN_STEPS_CEILING = 1000;

/** A tool name: any string, or, when the tools are known, exactly one of them (a grammar then enforces it). */
function toolNameSchema(toolNames?: readonly string[]) {
  return toolNames && toolNames.length > 0 ? z.enum(toolNames as [string, ...string[]]) : z.string().min(1).max(200);
}

/**
 * Marks a field a local model's grammar leaves out (it takes its default): prose that repeats what the
 * decision's thought already says, and would cost a local model a token for every character. Servers
 * and people may still give it.
 */
export const LEFT_OUT_OF_GRAMMAR = { "x-grammar": "omit" } as const;

function createSchemas(toolNames?: readonly string[]) {
  const toolName = toolNameSchema(toolNames);
  const toolStep = z.object({
    id: StepId,
    kind: z.literal("tool"),
    description: z.string().max(2000).default("").meta(LEFT_OUT_OF_GRAMMAR),
    depends_on: z.array(StepId).max(50).default([]),
    tool: toolName,
    arguments: z.record(z.string(), z.unknown()).default({}),
  });
  const coderStep = z.object({
    id: StepId,
    kind: z.literal("coder"),
    description: z.string().max(2000).default(""),
    depends_on: z.array(StepId).max(50).default([]),
    coder: CoderSpecSchema,
  });
  const planStep = z.discriminatedUnion("kind", [toolStep, coderStep]);
  const directive = z.discriminatedUnion("kind", [
    z.object({ kind: z.literal("respond"), answer: Text }),
    z.object({ kind: z.literal("tool"), tool: toolName, arguments: z.record(z.string(), z.unknown()).default({}), reason: z.string().max(2000).default("").meta(LEFT_OUT_OF_GRAMMAR) }),
    z.object({ kind: z.literal("plan"), goal: z.string().max(2000).default("").meta(LEFT_OUT_OF_GRAMMAR), steps: z.array(planStep).min(1).max(PLAN_STEPS_CEILING) }),
    z.object({ kind: z.literal("coder"), coder: CoderSpecSchema }),
    z.object({ kind: z.literal("fail"), reason: Text }),
  ]);
  return { toolStep, coderStep, planStep, directive };
}

const base = createSchemas();

export const ToolPlanStepSchema = base.toolStep;
export const CoderPlanStepSchema = base.coderStep;
/** One step of a plan: a tool call or a job for the coder model, after the steps it depends on. */
export const PlanStepSchema = base.planStep;
export type PlanStep = z.infer<typeof PlanStepSchema>;
export type ToolPlanStep = z.infer<typeof ToolPlanStepSchema>;
export type CoderPlanStep = z.infer<typeof CoderPlanStepSchema>;

/** What the Router decided. The RuntimeLoop executes it; nothing else does. */
export const ExecutionDirectiveSchema = base.directive;
export type ExecutionDirective = z.infer<typeof ExecutionDirectiveSchema>;
export type DirectiveKind = ExecutionDirective["kind"];

/**
 * The directive schema with tool names limited to `toolNames`. Given to the JSON compiler, its grammar
 * makes a call to a tool that does not exist impossible to decode.
 */
export function createExecutionDirectiveSchema(toolNames: readonly string[]): z.ZodType<ExecutionDirective> {
  return createSchemas(toolNames).directive as unknown as z.ZodType<ExecutionDirective>;
}
