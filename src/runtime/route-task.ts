import { RecallDecisionSchema, type MemoryHit, type ModelRole } from "../contracts/index.js";
import { buildContext } from "../context/context-builder.js";
import { heuristicRecall, recallPrompt } from "../decisions/recall-policy.js";
import { decideWithoutModel, directiveRequest, draftRequest, type RouterDecision } from "../decisions/router.js";
import { estimateTokens } from "../models/model-provider.js";
import type { TaskProjection } from "../state/task-projection.js";
import type { ExecutorContext } from "./executor-context.js";
import { callModelJson, callModelText, modelOrHeuristic, servesRole } from "./model-call.js";

/**
 * Recall, context and the Router: everything up to `directive-decided`. It only reads and records,
 * so a crash part-way is repaired by simply running it again.
 */
export async function routeTask(context: ExecutorContext, projection: TaskProjection, signal: AbortSignal): Promise<TaskProjection> {
  const { store, config, models, memory } = context;
  const taskId = projection.task_id;
  const { value: decision } = await modelOrHeuristic(
    context,
    taskId,
    { role: "sys_util", purpose: "recall", system: config.prompts.sys_util, prompt: recallPrompt(projection.text), schema: RecallDecisionSchema },
    signal,
    () => heuristicRecall(projection.text),
  );
  const hits: MemoryHit[] = decision.recall && decision.query ? await context.memorySearch(decision.query, config.runtime.retrieval_top_k, taskId) : [];
  if (hits.length > 0) memory.store.markUsed(hits.map((hit) => hit.entry.id));
  store.append(taskId, "memory-recalled", { decision, hits });

  const history = projection.session_id ? store.sessionHistory(projection.session_id, taskId, 10) : [];
  const countRole: ModelRole = servesRole(context, "thinker") ? "thinker" : "json_compiler";
  // Budgets are counted with the model's own tokenizer, which needs the model loaded.
  if (servesRole(context, countRole)) await models!.ensureLoaded?.(countRole);
  const count = servesRole(context, countRole) ? (text: string) => models!.countTokens(countRole, text) : estimateTokens;
  const built = buildContext(
    {
      systemPrompt: config.prompts.system,
      taskText: projection.text,
      memory: hits,
      tools: context.tools.catalogue(),
      history: history.map((task) => ({ text: task.text, answer: task.answer })),
    },
    config.runtime.context_budgets,
    count,
  );
  store.append(taskId, "context-built", { sections: built.sections, total_tokens: built.total_tokens });
  signal.throwIfAborted();

  let routed: RouterDecision;
  if (!servesRole(context, "json_compiler")) {
    routed = decideWithoutModel(projection.text);
  } else {
    const draft = servesRole(context, "thinker") ? await callModelText(context, taskId, { role: "thinker", purpose: "draft", ...draftRequest(built, config.prompts) }, signal) : "";
    const compiled = await callModelJson(context, taskId, { role: "json_compiler", purpose: "directive", ...directiveRequest(built, draft, config.prompts), schema: context.directiveSchema }, signal);
    routed = { directive: compiled.value, source: "model" };
  }
  return store.append(taskId, "directive-decided", { directive: routed.directive, source: routed.source });
}
