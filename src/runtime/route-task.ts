import { RecallDecisionSchema, type RecallDecision, type ExecutionDirective, type MemoryHit, type ModelRole, type StepReview } from "../contracts/index.js";
import { DuckError, ErrorCode, type ErrorCodeName } from "../errors/duck-error.js";
import { z } from "zod";
import { knownStepIds, MAX_ARGUMENT_DEPTH, nestingDepth, referencedSteps, withoutStepReferences, withReferenceDependencies } from "./step-references.js";
import { orderPlan } from "../decisions/plan-scheduler.js";
import { planFromDirective } from "./run-plan.js";
import { heuristicRecall, recallPrompt } from "../decisions/recall-policy.js";
import { parseIntent } from "../decisions/intent-parser.js";
import {
  DECIDE_LANE,
  decideWithoutModel,
  directiveOfToolCalls,
  directiveRequest,
  draftRequest,
  foldedDecisionRequest,
  reviewingDecisionSchemaFor,
  TOOL_DECISION_PURPOSE,
  ToolCallAnswerSchema,
  toolCallingDecisionRequest,
  type ReviewVerdict,
  type RouterDecision,
} from "../decisions/router.js";
import { estimateTokens, type CallableTool, type ModelProvider } from "../models/model-provider.js";
import type { TaskProjection } from "../state/task-projection.js";
import { inTurn, type ExecutorContext } from "./executor-context.js";
import { callModelJson, callModelText, decidesByToolCalls, foldsDecision, modelOrHeuristic, servesRole } from "./model-call.js";
import { contextWithSummaries } from "./summarise-context.js";

// One counter per model and role, so that what is counted once (the tool catalogue) stays counted.
const counters = new WeakMap<ModelProvider, Map<ModelRole, (text: string) => number>>();
function counterFor(models: ModelProvider, role: ModelRole): (text: string) => number {
  let byRole = counters.get(models);
  if (!byRole) counters.set(models, (byRole = new Map()));
  let counter = byRole.get(role);
  if (!counter) byRole.set(role, (counter = (text: string) => models.countTokens(role, text)));
  return counter;
}

/** Errors that end the task whatever it asked: a spent budget, a cancel, a shutdown. */
function endsTheTask(error: unknown): boolean {
  return DuckError.isInstance(error) && (error.code === ErrorCode.TokenBudget || error.code === ErrorCode.Shutdown || error.code === ErrorCode.Cancelled);
}

/** Earlier turns of a conversation read for a decision: as many as can be shown, or more when a model summarises the oldest. */
const HISTORY_TURNS_SHOWN = 10;
const HISTORY_TURNS_SUMMARISED = 40;

/**
 * Recall, context and the Router: everything up to `directive-decided`. It only reads and records,
 * so a crash part-way is repaired by simply running it again.
 */
export async function routeTask(context: ExecutorContext, projection: TaskProjection, signal: AbortSignal): Promise<TaskProjection> {
  const { store, config, models } = context;
  const taskId = projection.task_id;
  // Memory is recalled for the first decision; later ones in the loop see the same.
  const hits = projection.iteration > 1 ? projection.recalled : await recall(context, projection, signal);

  const countRole: ModelRole = servesRole(context, "thinker") ? "thinker" : "json_compiler";
  // Budgets are counted with the model's own tokenizer, which needs the model loaded.
  if (servesRole(context, countRole)) await models!.ensureLoaded?.(countRole);
  const count = servesRole(context, countRole) ? counterFor(models!, countRole) : estimateTokens;
  // With a model to summarise them, older turns are read too; without, only what can be shown.
  const turns = servesRole(context, "sys_util") ? HISTORY_TURNS_SUMMARISED : HISTORY_TURNS_SHOWN;
  const history = projection.session_id ? context.sessionHistory(projection.session_id, taskId, turns) : [];
  const summarised = await contextWithSummaries(
    context,
    projection,
    {
      systemPrompt: config.prompts.system,
      taskText: projection.text,
      memory: hits,
      tools: context.tools.catalogue(),
      history,
      observations: projection.iterations,
      loop: { decision: projection.iteration, maxDecisions: projection.loop.max_iterations, tokensLeft: Math.max(0, projection.loop.token_budget - projection.tokens_used) },
    },
    count,
    signal,
  );
  projection = summarised.projection;
  const built = summarised.built;
  store.append(taskId, "context-built", {
    sections: built.sections,
    total_tokens: built.total_tokens,
    tools: context.tools.names(),
    ...(built.toolsLeftOut.length > 0 ? { tools_left_out: built.toolsLeftOut.length } : {}),
    prompts_counted: true,
  });
  signal.throwIfAborted();

  let routed: RouterDecision;
  if (!servesRole(context, "json_compiler")) {
    routed = decideWithoutModel(projection.text);
  } else {
    try {
      const role = projection.iteration <= 1 ? "thinker" : "orchestrator";
      if (foldsDecision(context, role) && decidesByToolCalls(context)) {
        const request = toolCallingDecisionRequest(built, config.prompts, projection.iteration);
        const tools = context.tools.catalogue().map((entry) => ({ name: entry.name, description: entry.description, parameters: entry.input_schema as Record<string, unknown> }));
        const decided = await compileDirective(context, projection, { ...request, purpose: TOOL_DECISION_PURPOSE, lane: DECIDE_LANE, schema: ToolCallAnswerSchema, tools, directiveOf: (answer) => checkedDirective(context, answer) }, signal);
        routed = { directive: decided.directive, source: "model" };
      } else if (foldsDecision(context, role)) {
        // Steps that passed on their tool's word are judged here, in the call made anyway.
        const due = reviewDue(projection);
        const request = foldedDecisionRequest(built, config.prompts, projection.iteration, due.map((step) => step.id));
        const schema = due.length > 0 ? reviewingDecisionSchemaFor(context.directiveSchema, due.map((step) => step.id)) : context.decisionSchema;
        const decided = await compileDirective(context, projection, { ...request, purpose: "decision", lane: DECIDE_LANE, schema, directiveOf: (value) => value.directive }, signal);
        const reviewed = "review" in decided.value ? (decided.value.review as Record<string, ReviewVerdict>) : {};
        const review = due.length > 0 ? reviewOf(reviewed, due, projection.iteration - 1) : [];
        routed = { directive: decided.directive, source: "model", ...(review.length > 0 ? { review } : {}) };
      } else {
        const request = draftRequest(built, config.prompts, projection.iteration, config.runtime.agent.thought_max_tokens);
        const draft = servesRole(context, request.role) ? await callModelText(context, taskId, { purpose: "draft", lane: DECIDE_LANE, ...request }, signal) : "";
        const compile = directiveRequest(built, draft, config.prompts);
        const { directive } = await compileDirective(context, projection, { ...compile, role: "json_compiler", purpose: "directive", lane: "compile", schema: context.directiveSchema, directiveOf: (decided) => decided }, signal);
        routed = { directive, source: "model" };
      }
    } catch (error) {
      // An explicit request ("run `ls`", "read file x") does not need a model: one that is broken,
      // unreachable or talking nonsense does not stop it. Anything else still fails the task.
      signal.throwIfAborted();
      const explicit = projection.iteration === 1 && !endsTheTask(error) ? parseIntent(projection.text) : null;
      if (!explicit) throw error;
      context.logger.warn({ err: error, task_id: taskId }, "the model could not decide; the explicit request is read without it");
      routed = { directive: explicit, source: "intent-parser" };
    }
  }
  // Without a model nothing else waits here; a replay holds the decision to where it was recorded (a cancel may come first).
  await inTurn(context, taskId, { type: "directive-decided" }, signal);
  return store.append(taskId, "directive-decided", { directive: routed.directive, source: routed.source, ...(routed.review ? { review: routed.review } : {}) });
}

/** The directive the model's tool calls make, or why they make none a task can run. */
function checkedDirective(context: ExecutorContext, answer: z.infer<typeof ToolCallAnswerSchema>): ExecutionDirective {
  if (answer.tool_calls.length === 0 && answer.thought.trim() === "") throw new DuckError(ErrorCode.ModelOutputInvalid, "the model answered with neither text nor a tool call");
  const offered = new Set(context.tools.names());
  const unknown = answer.tool_calls.map((call) => call.name).filter((name) => !offered.has(name));
  if (unknown.length > 0) throw new DuckError(ErrorCode.ModelOutputInvalid, `the model called ${unknown.map((name) => JSON.stringify(name.slice(0, 100))).join(", ")}, which is not a tool here; the tools are ${[...offered].join(", ")}`);
  const parsed = context.directiveSchema.safeParse(directiveOfToolCalls(answer));
  if (parsed.success) return parsed.data;
  const problem = parsed.error.issues.map((issue) => `${issue.path.join(".") || "(answer)"}: ${issue.message}`).join("; ");
  throw new DuckError(ErrorCode.ModelOutputInvalid, `the model's tool calls do not make a directive: ${problem.slice(0, 1000)}`);
}

/** The previous decision's steps that passed on their tool's word, for this decision to judge. */
function reviewDue(projection: TaskProjection): Array<{ id: string }> {
  const previous = projection.iterations.at(-1);
  if (!previous || previous.iteration !== projection.iteration - 1) return [];
  return previous.steps.filter((step) => step.judged_by_next_decision);
}

/** The model's verdicts on the steps it was asked about, in the steps' order. */
function reviewOf(given: Readonly<Record<string, ReviewVerdict>>, due: ReadonlyArray<{ id: string }>, iteration: number): StepReview[] {
  return due.flatMap((step) => {
    const verdict = Object.hasOwn(given, step.id) ? given[step.id] : undefined;
    return verdict ? [{ step_id: step.id, iteration, verdict }] : [];
  });
}

/**
 * Memory for the task's first decision. A model decides whether to recall and with which query only
 * when memory holds candidates for the task; without a model the heuristic decides.
 */
async function recall(context: ExecutorContext, projection: TaskProjection, signal: AbortSignal): Promise<MemoryHit[]> {
  const { config, memory, store } = context;
  const taskId = projection.task_id;
  const probe = heuristicRecall(projection.text);
  let decision: RecallDecision;
  if (servesRole(context, "sys_util") && !(await context.recallCandidates(probe.recall ? probe.query : "", taskId))) {
    decision = { recall: false, query: "" };
  } else {
    const decided = await modelOrHeuristic(
      context,
      taskId,
      { role: "sys_util", purpose: "recall", system: config.prompts.sys_util, prompt: recallPrompt(projection.text), schema: RecallDecisionSchema },
      signal,
      () => probe,
    );
    decision = decided.value;
  }
  const hits: MemoryHit[] = decision.recall && decision.query ? await context.memorySearch(decision.query, config.runtime.retrieval_top_k, taskId) : [];
  if (hits.length > 0) memory.store.markUsed(hits.map((hit) => hit.entry.id));
  await inTurn(context, taskId, { type: "memory-recalled" }, signal);
  store.append(taskId, "memory-recalled", { decision, hits });
  return hits;
}

/**
 * The JSON compiler's directive, asked again with the error when it is cut off, does not validate,
 * names a tool that does not exist or gives a tool arguments it does not take — up to
 * `agent.directive_retries` times (small local models get it right on a second look more often than
 * not); then the last error fails the task.
 */
async function compileDirective<T>(
  context: ExecutorContext,
  projection: TaskProjection,
  request: { role: ModelRole; purpose: string; lane: string; system: string; prompt: string; schema: z.ZodType<T>; tools?: readonly CallableTool[]; directiveOf: (value: T) => ExecutionDirective },
  signal: AbortSignal,
): Promise<{ directive: ExecutionDirective; value: T }> {
  const taskId = projection.task_id;
  const retries = context.config.runtime.agent.directive_retries;
  let prompt = request.prompt;
  for (let attempt = 0; ; attempt += 1) {
    // Retries are told apart in the event log, so that a replay serves each its own recorded output.
    const purpose = attempt === 0 ? request.purpose : `${request.purpose}:retry-${attempt}`;
    let problem: string;
    try {
      const compiled = await callModelJson(context, taskId, { role: request.role, purpose, lane: request.lane, system: request.system, prompt, schema: request.schema, ...(request.tools ? { tools: request.tools } : {}) }, signal);
      const directive = request.directiveOf(compiled.value);
      const invalid = invalidToolArguments(context, directive, projection);
      if (!invalid) return { directive, value: compiled.value };
      if (attempt >= retries) throw new DuckError(invalid.code, invalid.message);
      problem = invalid.message;
    } catch (error) {
      signal.throwIfAborted();
      if (!(DuckError.isInstance(error) && error.code === ErrorCode.ModelOutputInvalid) || attempt >= retries) throw error;
      problem = error.message;
    }
    context.store.append(taskId, "directive-retried", { attempt: attempt + 1, error: problem.slice(0, 2000) });
    // The refusal is appended, so that the retry extends the prompt the model has just read.
    prompt = `${prompt}\n\n## Your previous answer was refused\n${problem.slice(0, 1000)}\nWrite the answer as JSON again, complete and valid.`;
  }
}

/**
 * Why a directive's steps would be refused, or null when each would run: more steps than
 * `scheduler.max_plan_steps`, a tool that does not exist, arguments it does not take (unknown ones
 * included: they would be dropped silently), or a step it depends on or takes output from that is
 * not in the plan (a step of an earlier decision).
 */
function invalidToolArguments(context: ExecutorContext, directive: ExecutionDirective, projection: TaskProjection): { code: ErrorCodeName; message: string } | null {
  const calls = directive.kind === "tool" ? [{ id: "tool", tool: directive.tool, args: directive.arguments, depends_on: [] as string[] }] : directive.kind === "plan" ? directive.steps.flatMap((step) => (step.kind === "tool" ? [{ id: step.id, tool: step.tool, args: step.arguments, depends_on: step.depends_on }] : [])) : [];
  const planned = new Set(directive.kind === "plan" ? directive.steps.map((step) => step.id) : []);
  // An earlier decision's step counts as a step here, to be told it cannot be used, not taken for text.
  const known = knownStepIds({ steps: {}, iterations: projection.iterations }, [...planned].map((id) => ({ id })));
  const maxSteps = context.config.runtime.scheduler.max_plan_steps;
  if (directive.kind === "plan" && directive.steps.length > maxSteps) {
    return {
      code: ErrorCode.PlanTooLong,
      message: `the plan has ${directive.steps.length} steps, more than the ${maxSteps} runtime.json's scheduler.max_plan_steps allows; plan the first steps only, and decide the rest once you have seen their results`,
    };
  }
  for (const call of calls) {
    const tool = context.tools.get(call.tool);
    if (!tool) return { code: ErrorCode.ToolInputInvalid, message: `step ${call.id}: there is no tool named ${call.tool}; the tools are ${context.tools.names().join(", ")}` };
    // The arguments object itself is the first level.
    if (nestingDepth(call.args) > MAX_ARGUMENT_DEPTH) return { code: ErrorCode.ToolInputInvalid, message: `step ${call.id}: its arguments nest arrays and objects more than ${MAX_ARGUMENT_DEPTH} levels deep; give ${call.tool} flat values` };
    if (referencedSteps(call.args, known).includes(call.id) || call.depends_on.includes(call.id)) {
      return { code: ErrorCode.PlanCycle, message: `step "${call.id}" uses its own output; a step can use only the output of steps that run before it` };
    }
    const missing = [...new Set([...call.depends_on, ...referencedSteps(call.args, known)])].filter((id) => !planned.has(id));
    if (missing.length > 0) {
      return {
        code: ErrorCode.PlanMissingDependency,
        message: `step "${call.id}" depends on "${missing.join('", "')}", which is not in the plan; a step of an earlier decision cannot be referred to — write what you need from its output (shown above) into the arguments`,
      };
    }
    const shape = tool.inputSchema instanceof z.ZodObject ? Object.keys(tool.inputSchema.shape) : null;
    const unknown = shape ? Object.keys(call.args).filter((key) => !shape.includes(key)) : [];
    if (unknown.length > 0) return { code: ErrorCode.ToolInputInvalid, message: `step ${call.id}: ${call.tool} has no argument ${unknown.join(", ")}; it takes ${shape!.join(", ") || "none"}` };
    const checked = tool.inputSchema.safeParse(withoutStepReferences(call.args, known));
    if (!checked.success) return { code: ErrorCode.ToolInputInvalid, message: `step ${call.id}: ${call.tool} does not take these arguments: ${checked.error.issues.map((issue) => `${issue.path.join(".") || "(arguments)"}: ${issue.message}`).join("; ")}` };
  }
  // A plan that cannot be put in order (two steps of one id, a cycle through their dependencies or
  // references) is the compiler's to mend, like a wrong argument: it would otherwise end the task.
  // A step using its own output is caught above: the reference dependencies leave that one out.
  if (directive.kind === "plan") {
    try {
      orderPlan(withReferenceDependencies(planFromDirective(directive)));
    } catch (error) {
      if (!DuckError.isInstance(error)) throw error;
      if (error.code === ErrorCode.PlanCycle) return { code: ErrorCode.PlanCycle, message: `${error.message}; a step can use only the output of steps that run before it, never its own` };
      if (error.code === ErrorCode.PlanDuplicateStep) return { code: ErrorCode.PlanDuplicateStep, message: `${error.message}; give every step its own id` };
      throw error;
    }
  }
  return null;
}
