import { z } from "zod";
import type { ExecutionDirective, StepReview } from "../contracts/index.js";
import type { Prompts } from "../config/config-schemas.js";
import type { BuiltContext } from "../context/context-builder.js";
import { NO_MODEL_ANSWER, parseIntent } from "./intent-parser.js";

export interface RouterDecision {
  directive: ExecutionDirective;
  source: "model" | "intent-parser" | "no-model";
  /** The critic's verdicts on the previous decision's steps, where this decision gave them. */
  review?: StepReview[];
}

/** A verdict as a folded decision writes it, under the step's id. */
export type ReviewVerdict = "pass" | "retry" | "fail";

/** What a folded decision writes: the Thinker's thought, then the directive, in one JSON object. */
export function decisionSchemaFor(directive: z.ZodType<ExecutionDirective>): z.ZodType<{ thought: string; directive: ExecutionDirective }> {
  return z.object({ thought: z.string(), directive });
}

/**
 * A folded decision that also judges the steps of the decision before (`agent.fold_critic`): the
 * thought, a verdict for each of those steps, then the directive.
 */
export function reviewingDecisionSchemaFor(
  directive: z.ZodType<ExecutionDirective>,
  stepIds: readonly string[],
): z.ZodType<{ thought: string; review: Record<string, ReviewVerdict>; directive: ExecutionDirective }> {
  // Keyed by the steps' ids, in their order: a grammar writes the keys, the model only the verdicts.
  const verdicts = Object.fromEntries(stepIds.map((id) => [id, z.enum(["pass", "retry", "fail"])]));
  return z.object({ thought: z.string(), review: z.object(verdicts) as z.ZodType<Record<string, ReviewVerdict>>, directive });
}

/** The purpose of a decision made by native tool calls (`structured_output: "tools"`). */
export const TOOL_DECISION_PURPOSE = "decision:tools";

/** What a decision by native tool calls comes back as (see ToolCallAnswer). */
export const ToolCallAnswerSchema = z.object({
  thought: z.string(),
  tool_calls: z.array(z.object({ name: z.string(), arguments: z.record(z.string(), z.unknown()) })),
});

/**
 * A decision by native tool calls: the tools go as tool definitions, so the prompt leaves out their
 * catalogue, and the answer is tool calls or text for the user.
 */
export function toolCallingDecisionRequest(context: BuiltContext, prompts: Prompts, decision: number): { role: "json_compiler"; system: string; prompt: string } {
  return {
    role: "json_compiler",
    system: context.system,
    prompt: `${context.promptWithoutTools}\n\n## Now\n${nowText(context, prompts, decision)}\nCall the tools the task needs next (several at once when none needs another's result), or, when nothing is missing, answer the user in text.`,
  };
}

/**
 * The directive a model's tool calls make: none is the answer in its text, one a tool step, several
 * steps side by side. Checked against the directive schema afterwards like any other.
 */
export function directiveOfToolCalls(answer: z.infer<typeof ToolCallAnswerSchema>): unknown {
  const thought = answer.thought.trim();
  const calls = answer.tool_calls;
  if (calls.length === 0) return { kind: "respond", answer: thought };
  if (calls.length === 1) return { kind: "tool", tool: calls[0]!.name, arguments: calls[0]!.arguments, reason: thought.slice(0, 2000) };
  return {
    kind: "plan",
    goal: thought.slice(0, 2000),
    steps: calls.map((call, index) => ({ id: `s${index + 1}`, kind: "tool", description: "", depends_on: [], tool: call.name, arguments: call.arguments })),
  };
}

/** The task's lane for deciding: every decision's calls continue one kept model state. */
export const DECIDE_LANE = "decide";

/**
 * The fixed text every decision of a task starts with. What differs between decisions (the first, or
 * one after steps ran) comes at the end of the prompt, so that consecutive prompts extend each other
 * and a model that kept the last one evaluates only what is new.
 */
function decideSystem(context: BuiltContext, prompts: Prompts, folded: boolean): string {
  return folded ? `${context.system}\n\n${prompts.planning}\n\n${prompts.json_compiler}` : `${context.system}\n\n${prompts.planning}`;
}

/** The first decision is the Thinker's; deciding again from what the steps returned is the orchestrator's. */
function guideFor(prompts: Prompts, decision: number): string {
  return decision <= 1 ? prompts.thinker : prompts.orchestrator;
}

/** What a decision is asked now: where the loop stands, then the guide for this decision. */
function nowText(context: BuiltContext, prompts: Prompts, decision: number): string {
  return context.standing ? `${context.standing}\n${guideFor(prompts, decision)}` : guideFor(prompts, decision);
}

const THOUGHT_BOUND = "in at most three sentences";

/**
 * The Thinker's draft, where another model writes the directive: the decision in a few sentences,
 * bounded by `maxTokens`. Both the Thinker and the orchestrator may plan, so both are told how.
 */
export function draftRequest(context: BuiltContext, prompts: Prompts, decision: number, maxTokens: number): { role: "thinker" | "orchestrator"; system: string; prompt: string; maxTokens: number } {
  return {
    role: decision <= 1 ? "thinker" : "orchestrator",
    system: decideSystem(context, prompts, false),
    prompt: `${context.prompt}\n\n## Now\n${nowText(context, prompts, decision)}\nWrite your decision ${THOUGHT_BOUND}.`,
    maxTokens,
  };
}

/**
 * One call that decides and writes the directive, where one model plays both parts: a short thought
 * first, then the directive, under one schema.
 */
export function foldedDecisionRequest(context: BuiltContext, prompts: Prompts, decision: number, toReview: readonly string[] = []): { role: "json_compiler"; system: string; prompt: string } {
  const review =
    toReview.length > 0
      ? `, then "review", an object giving each of ${toReview.join(", ")} a verdict as its output shows it (pass: it did what it should; retry: another attempt may fix it; fail: it cannot)`
      : "";
  return {
    role: "json_compiler",
    system: decideSystem(context, prompts, true),
    prompt: `${context.prompt}\n\n## Now\n${nowText(context, prompts, decision)}\nAnswer with one JSON object: "thought", your decision ${THOUGHT_BOUND}${review}, then "directive", the ExecutionDirective that carries it out.`,
  };
}

/**
 * The JSON compiler's request when it is a model of its own: the Thinker's decision with what it
 * needs to write it down (tools, memory, task, results so far), not the conversation the Thinker has
 * already weighed. With no Thinker it decides alone, from everything.
 */
export function directiveRequest(context: BuiltContext, draft: string, prompts: Prompts): { system: string; prompt: string } {
  return {
    system: prompts.json_compiler,
    prompt: `${draft ? context.compilerPrompt : context.prompt}${context.standing ? `\n\n${context.standing}` : ""}\n\n## Thinker's decision\n${draft || "(none)"}\n\nWrite the ExecutionDirective as JSON.`,
  };
}

/** With no model that could write a directive: the IntentParser reads explicit requests; the rest gets an honest answer. */
export function decideWithoutModel(taskText: string): RouterDecision {
  const directive = parseIntent(taskText);
  return directive ? { directive, source: "intent-parser" } : { directive: { kind: "respond", answer: NO_MODEL_ANSWER }, source: "no-model" };
}
