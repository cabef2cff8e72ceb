import type { CriticScore, ExecutionDirective, RecallDecision } from "../../src/contracts/index.js";
import type { JsonRequest, TextRequest } from "../../src/models/model-provider.js";
import { ScriptedModelProvider, type ScriptedReply } from "../../src/models/scripted-provider.js";

type Request = TextRequest | JsonRequest<unknown>;

/** What the critic is told about the step it judges. */
export interface JudgedStep {
  stepId: string;
  /** Whether the step's tool call succeeded (`ok`). */
  succeeded: boolean;
  /** People's ratings of similar earlier steps, as the prompt shows them (empty when there are none). */
  ratings: string;
}

/** What a directive request shows of the agent loop so far. */
export interface DecisionView {
  /** 1 for a task's first decision, 2 after its first steps ran, and so on. */
  decision: number;
  /** What the steps so far returned, as the prompt shows it (empty at the first decision). */
  observed: string;
}

export interface AgentScript {
  /**
   * The Router's directive: one for every decision, one per decision in turn (the last repeats), or
   * chosen per request from what the loop has seen.
   */
  directive: ExecutionDirective | ExecutionDirective[] | ((request: Request, view: DecisionView) => ExecutionDirective | string);
  /**
   * The Thinker's draft (the thought of a one-model decision); null for a setup with no Thinker model
   * (the JSON compiler decides alone).
   */
  draft?: string | ((request: Request) => string) | null;
  /** Whether to search memory first. Defaults to no. */
  recall?: RecallDecision;
  /** The critic's verdict on each step. Defaults to pass when the step succeeded, retry when not. */
  verdict?: (step: JudgedStep) => CriticScore["verdict"] | CriticScore;
  /** A summary of what no longer fits the context (history or earlier decisions). Defaults to a fixed line. */
  summary?: (request: Request) => string;
  /** The coder's proposals, in turn. */
  coder?: ScriptedReply[];
  /**
   * Every role runs on one model (the starter preset): a decision is one call (purpose `decision`)
   * that writes the thought and the directive. Defaults to false: the Thinker is a model of its own.
   */
  oneModel?: boolean;
  /** Options of the provider (chunk size and pace of streaming). */
  streaming?: { chunkSize?: number; chunkDelayMs?: number };
}

/** The one place that reads the directive prompt's account of earlier steps (see context-builder.ts). */
function decisionView(request: Request): DecisionView {
  const section = /## What the steps so far returned\n([\s\S]*?)(?:\n\n## Now\n|\n\nIf this answers the task|$)/.exec(request.prompt)?.[1] ?? "";
  // The newest decision shown, or the last one a summary covers, is the one before this.
  const shown = [...section.matchAll(/^Decision (\d+):|^Decisions 1 to (\d+), summarised/gm)].map((match) => Number(match[1] ?? match[2]));
  return { decision: Math.max(0, ...shown) + 1, observed: section };
}

/** The one place that reads the critic's prompt: whether the judged step succeeded. */
function judgedStep(request: Request): JudgedStep {
  const ratings = /How people rated similar steps before[^\n]*\n((?:- .*\n?)*)/.exec(request.prompt)?.[1] ?? "";
  return { stepId: (request.purpose ?? "").slice("critic:".length), succeeded: request.prompt.includes("Succeeded: true"), ratings };
}

function score(verdict: CriticScore["verdict"] | CriticScore): CriticScore {
  if (typeof verdict === "object") return verdict;
  const good = verdict === "pass" ? 1 : 0;
  return { correctness: good, usefulness: good, safety: 1, verdict, reason: "scripted" };
}

/**
 * A scripted model for runtime tests that answers each request by what it is for (its `purpose`:
 * recall, draft, directive, critic:<step>, a coder plan), the way the runtime asks, instead of by
 * the words of its prompt. Every role runs on this one script through the fallback table.
 */
export function scriptedAgent(script: AgentScript): ScriptedModelProvider {
  const directives = Array.isArray(script.directive) ? [...script.directive] : null;
  const nextDirective = (request: Request): ExecutionDirective | string => {
    if (typeof script.directive === "function") return script.directive(request, decisionView(request));
    if (!directives) return script.directive as ExecutionDirective;
    return directives.length > 1 ? directives.shift()! : directives[0]!;
  };
  const answer = (request: Request): string | object => {
    const purpose = request.purpose ?? "";
    if (purpose === "directive" || purpose.startsWith("directive:retry")) return nextDirective(request);
    // One model plays the Thinker and the JSON compiler: the thought and the directive in one answer.
    if (purpose === "decision" || purpose.startsWith("decision:retry")) {
      const directive = nextDirective(request);
      // A directive given as raw text is the whole answer (malformed output is what the test wants).
      if (typeof directive === "string") return directive;
      const thought = typeof script.draft === "function" ? script.draft(request) : (script.draft ?? "I will make a plan.");
      // Asked to judge the steps of the decision before (the critic folded in): each step's verdict.
      const reviewed = /"review", an object giving each of (.+?) a verdict as its output shows it/.exec(request.prompt)?.[1]?.split(", ");
      if (!reviewed) return { thought, directive };
      const review = Object.fromEntries(
        reviewed.map((stepId) => {
          const verdict = script.verdict ? script.verdict({ stepId, succeeded: true, ratings: "" }) : "pass";
          return [stepId, typeof verdict === "object" ? verdict.verdict : verdict];
        }),
      );
      return { thought, review, directive };
    }
    if (purpose === "recall") return script.recall ?? { recall: false, query: "" };
    if (purpose.startsWith("critic:")) {
      const step = judgedStep(request);
      return score(script.verdict ? script.verdict(step) : step.succeeded ? "pass" : "retry");
    }
    if (purpose.startsWith("summary:")) return script.summary ? script.summary(request) : `Scripted summary (${purpose}).`;
    if (purpose === "draft") return typeof script.draft === "function" ? script.draft(request) : (script.draft ?? "I will make a plan.");
    throw new Error(`the scripted agent has no answer for a ${request.role} request for ${purpose || "(no purpose)"}`);
  };
  const provider = new ScriptedModelProvider({ coder: script.coder ?? [] }, { ...script.streaming, oneModel: script.oneModel ?? false }).always("json_compiler", answer);
  return script.draft === null ? provider : provider.always("thinker", answer);
}
