import { z } from "zod";
import type { ExecutionDirective } from "../contracts/index.js";
import type { Prompts } from "../config/config-schemas.js";
import type { BuiltContext } from "../context/context-builder.js";
import { NO_MODEL_ANSWER, parseIntent } from "./intent-parser.js";

export interface RouterDecision {
  directive: ExecutionDirective;
  source: "model" | "intent-parser" | "no-model";
}

/** What a folded decision writes: the Thinker's thought, then the directive, in one JSON object. */
export function decisionSchemaFor(directive: z.ZodType<ExecutionDirective>): z.ZodType<{ thought: string; directive: ExecutionDirective }> {
  return z.object({ thought: z.string(), directive });
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

const THOUGHT_BOUND = "in at most three sentences";

/**
 * The Thinker's draft, where another model writes the directive: the decision in a few sentences,
 * bounded by `maxTokens`. Both the Thinker and the orchestrator may plan, so both are told how.
 */
export function draftRequest(context: BuiltContext, prompts: Prompts, decision: number, maxTokens: number): { role: "thinker" | "orchestrator"; system: string; prompt: string; maxTokens: number } {
  return {
    role: decision <= 1 ? "thinker" : "orchestrator",
    system: decideSystem(context, prompts, false),
    prompt: `${context.prompt}\n\n## Now\n${guideFor(prompts, decision)}\nWrite your decision ${THOUGHT_BOUND}.`,
    maxTokens,
  };
}

/**
 * One call that decides and writes the directive, where one model plays both parts: a short thought
 * first, then the directive, under one schema.
 */
export function foldedDecisionRequest(context: BuiltContext, prompts: Prompts, decision: number): { role: "json_compiler"; system: string; prompt: string } {
  return {
    role: "json_compiler",
    system: decideSystem(context, prompts, true),
    prompt: `${context.prompt}\n\n## Now\n${guideFor(prompts, decision)}\nAnswer with one JSON object: "thought", your decision ${THOUGHT_BOUND}, then "directive", the ExecutionDirective that carries it out.`,
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
    prompt: `${draft ? context.compilerPrompt : context.prompt}\n\n## Thinker's decision\n${draft || "(none)"}\n\nWrite the ExecutionDirective as JSON.`,
  };
}

/** With no model that could write a directive: the IntentParser reads explicit requests; the rest gets an honest answer. */
export function decideWithoutModel(taskText: string): RouterDecision {
  const directive = parseIntent(taskText);
  return directive ? { directive, source: "intent-parser" } : { directive: { kind: "respond", answer: NO_MODEL_ANSWER }, source: "no-model" };
}
