import type { ExecutionDirective } from "../contracts/index.js";
import type { Prompts } from "../config/config-schemas.js";
import type { BuiltContext } from "../context/context-builder.js";
import { NO_MODEL_ANSWER, parseIntent } from "./intent-parser.js";

export interface RouterDecision {
  directive: ExecutionDirective;
  source: "model" | "intent-parser" | "no-model";
}

/**
 * The Router decides in two steps: the Thinker drafts the decision in prose, and the JSON compiler
 * (the Thinker's own model when there is no other) writes it as an ExecutionDirective under the
 * directive's schema. This module builds those requests; the runtime makes the calls.
 */
export function draftRequest(context: BuiltContext, prompts: Prompts, decision: number): { role: "thinker" | "orchestrator"; system: string; prompt: string } {
  // The first decision is the Thinker's; deciding again from what the steps returned — answer, more
  // steps or give up — is the orchestrator's (the Thinker's own model when none is configured).
  // Both may plan, so both are told how.
  if (decision <= 1) return { role: "thinker", system: `${context.system}\n\n${prompts.thinker}\n\n${prompts.planning}`, prompt: context.prompt };
  return { role: "orchestrator", system: `${context.system}\n\n${prompts.orchestrator}\n\n${prompts.planning}`, prompt: context.prompt };
}

/**
 * The JSON compiler's request: the Thinker's decision with what it needs to write it down (tools,
 * memory, task, results so far). With no Thinker it decides alone, from everything.
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
