import { CriticScoreSchema, type CriticScore } from "../contracts/index.js";
import { criticPrompt, heuristicScore } from "../decisions/critic-policy.js";
import { ErrorCode } from "../errors/duck-error.js";
import type { StepProjection, TaskProjection } from "../state/task-projection.js";
import type { ExecutorContext } from "./executor-context.js";
import { decidesByToolCalls, foldsCritic, modelOrHeuristic, servesRole } from "./model-call.js";

/**
 * The critic's judgement of a step's result: the critic model under its schema when one serves the
 * role, the heuristic otherwise. A refused call needs no model to judge.
 */
export async function scoreStep(context: ExecutorContext, projection: TaskProjection, step: StepProjection, signal: AbortSignal): Promise<{ score: CriticScore; source: "model" | "heuristic" | "deferred" }> {
  const result = step.result!;
  if (result.error?.code === ErrorCode.PermissionDenied || result.error?.code === ErrorCode.HardStop) return { score: heuristicScore(result), source: "heuristic" };
  // A failed tool call needs no model to be judged failed: retry or not is the recovery policy's.
  if (!result.ok && !context.config.runtime.agent.judge_failed_steps) return { score: heuristicScore(result), source: "heuristic" };
  // A step that ran after the decision spent the budget still gets its outcome; the task ends at the
  // next decision, which says so.
  const { tokens_used, loop } = context.store.projection(projection.task_id);
  if (servesRole(context, "critic") && tokens_used >= loop.token_budget) {
    const score = heuristicScore(result);
    return { score: { ...score, reason: `${score.reason} (judged without the critic: the task has used its agent.token_budget of ${loop.token_budget})` }, source: "heuristic" };
  }
  // Where the model that decides also judges, the next decision judges a step that succeeded, in the
  // call it makes anyway: the step passes on its tool's word meanwhile.
  const { iteration, loop: limits } = context.store.projection(projection.task_id);
  if (result.ok && foldsCritic(context, iteration, limits.max_iterations)) {
    const reason = decidesByToolCalls(context) ? "the tool reported success; the next decision acts on its result" : "the tool reported success; the next decision reviews it";
    return { score: { ...heuristicScore(result), reason }, source: "deferred" };
  }
  // Feedback is read back: people's ratings of steps that called the same tool shape the verdict.
  const ratings = step.step.kind === "tool" && servesRole(context, "critic") ? context.store.stepRatings(step.step.tool, 50) : [];
  const judged = await modelOrHeuristic(
    context,
    projection.task_id,
    { role: "critic", purpose: `critic:${step.step.id}`, system: context.config.prompts.critic, prompt: criticPrompt(projection.text, step.step, result, ratings), schema: CriticScoreSchema },
    signal,
    () => heuristicScore(result),
  );
  return { score: judged.value, source: judged.source };
}
