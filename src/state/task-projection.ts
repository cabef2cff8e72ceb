import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { estimateTokens } from "../contracts/tokens.js";
import { addModelWork, type ModelWork } from "../contracts/model-work.js";
import type {
  AgentLoopLimits,
  CoderProposal,
  PreApproval,
  CriticScore,
  DuckEvent,
  EventPayloads,
  EventTypeName,
  ExecutionDirective,
  MemoryHit,
  PlanStep,
  RecoveryAction,
  StepReview,
  TaskState,
  ToolResult,
} from "../contracts/index.js";

export type StepStatus = "pending" | "running" | "awaiting_permission" | "succeeded" | "failed" | "skipped";

export interface StepProjection {
  step: PlanStep;
  status: StepStatus;
  /** 1-based number of the latest attempt; 0 before the first. */
  attempt: number;
  /** The latest attempt recorded `tool-called`: its effect may have happened. */
  tool_called: boolean;
  /** The latest attempt was granted permission (so a resume need not ask again). */
  permission_granted: boolean;
  /** The user denied the latest attempt's request. */
  permission_denied: boolean;
  /** What the files the command runs held when the user allowed the latest attempt (see `content_digest`). */
  granted_digest?: string;
  /** The previous attempt timed out part-way through a side effect: ask before running it again. */
  ask_before_retry?: boolean;
  /** The open permission request of this step, as it was shown to the user. */
  permission_request: EventPayloads["permission-requested"] | null;
  /** The open request for a secret (a sudo password) for this step. */
  secret_request: EventPayloads["secret-requested"] | null;
  /** A coder step's files for the latest attempt, once the coder model proposed them. */
  proposal?: CoderProposal | null;
  /**
   * The arguments the latest attempt's tool was called with (references to earlier steps resolved),
   * as JSON cut to CALLED_WITH_CHARS: what the model is shown of the call, kept small in checkpoints.
   */
  called_with?: string;
  result: ToolResult | null;
  score: CriticScore | null;
  /** Who gave the score; `deferred`: the tool's word, the next decision reviews it. */
  score_source?: EventPayloads["critic-scored"]["source"];
  recovery: RecoveryAction | null;
  failure_reason: string | null;
}

/** A task's state as its events say it is. Checkpoints store this; resume rebuilds it. */
export interface TaskProjection {
  task_id: string;
  text: string;
  session_id: string | null;
  workspace: string;
  state: TaskState;
  seq: number;
  started: boolean;
  directive: ExecutionDirective | null;
  plan_order: string[] | null;
  steps: Record<string, StepProjection>;
  answer: string | null;
  error: { code: string; message: string } | null;
  memory_writes: number;
  /** Categories the user approved in advance for this task. */
  auto_approve: PreApproval[];
  /** How its commands run, as the process that drives it said when it started or resumed it. */
  confinement: "confined" | "none" | "off";
  /**
   * What first brought data of this machine into the task, for its outbound requests (null: nothing
   * yet): a tool's output, recalled memory, or the earlier turns of its conversation.
   */
  read_local: string | null;
  /** What a command no rule covers gets when confined: run (the sandbox is the boundary) or asked (tasks started before that). */
  confined_commands: "run" | "ask";
  /** Which decision the task is on: 1 for the first, one more at each `iteration-started`. */
  iteration: number;
  /** The agent loop's limits as `task-started` recorded them; one decision for tasks recorded before the loop. */
  loop: AgentLoopLimits;
  /** Prompt and generated tokens its model calls used (prompts as counted for each call, outputs as estimated). */
  tokens_used: number;
  /** What its model calls cost, summed from each call's reported usage; null until one reports it. */
  model_work: ModelWork | null;
  /** What each earlier decision did, oldest first: what the model is shown when it decides again. */
  iterations: IterationRecord[];
  /** The memory recalled for the task's first decision, shown again at every later one. */
  recalled: MemoryHit[];
  /** The models' summaries of what no longer fit the context (see `context-summarised`). */
  summaries: ContextSummaries;
  /**
   * How long it has been driven, across restarts: time between events while it ran, leaving out
   * time waiting in line or for a person and the gap before a `task-resumed`. What `timeouts.task_ms` limits.
   */
  running_ms: number;
  /** When its newest event was recorded (ms since the epoch); null in a snapshot from before it was kept. */
  last_event_ms: number | null;
}

export interface ContextSummaries {
  history?: { covers: string[]; text: string };
  observations?: { through: number; text: string };
}

/** One finished decision of the agent loop: the directive and what its steps came to. */
export interface IterationRecord {
  iteration: number;
  directive: ExecutionDirective;
  steps: Array<{
    id: string;
    description: string;
    tool: string | null;
    /** What the tool was called with, as StepProjection's `called_with`; absent for a step that called none. */
    arguments?: string;
    status: StepStatus;
    output: string;
    error: string | null;
    verdict: string | null;
    /**
     * It passed on its tool's word and the next decision gives the critic's verdict (see
     * `agent.fold_critic`): the decisions after it are not shown that verdict, so that their prompts
     * extend each other unchanged.
     */
    judged_by_next_decision?: boolean;
  }>;
}

/** Longest account of a step's call kept (see `called_with`). */
const CALLED_WITH_CHARS = 400;

/** Longest output of one step kept for the model to see again; the context builder fits them to its budget. */
const OBSERVED_OUTPUT_CHARS = 4000;

/** A finished decision with the verdicts a later decision gave its steps. */
function withReview(record: IterationRecord, review: readonly StepReview[]): IterationRecord {
  const mine = review.filter((entry) => entry.iteration === record.iteration);
  if (mine.length === 0) return record;
  return {
    ...record,
    steps: record.steps.map((step) => {
      const given = mine.find((entry) => entry.step_id === step.id);
      return given ? { ...step, verdict: given.verdict } : step;
    }),
  };
}

function recordIteration(p: TaskProjection): IterationRecord | null {
  if (!p.directive) return null;
  const order = p.plan_order ?? [];
  return {
    iteration: p.iteration,
    directive: p.directive,
    steps: order.map((id) => {
      const step = p.steps[id]!;
      const output = step.result?.output ?? "";
      return {
        id,
        description: step.step.description,
        tool: step.step.kind === "tool" ? (step.step.tool ?? null) : step.step.kind,
        ...(step.called_with ? { arguments: step.called_with } : {}),
        status: step.status,
        output: output.length > OBSERVED_OUTPUT_CHARS ? `${output.slice(0, OBSERVED_OUTPUT_CHARS)}\n[… ${output.length - OBSERVED_OUTPUT_CHARS} more characters]` : output,
        error: step.result?.error?.message ?? step.failure_reason ?? null,
        verdict: step.score?.verdict ?? null,
        ...(step.score_source === "deferred" && step.status === "succeeded" ? { judged_by_next_decision: true } : {}),
      };
    }),
  };
}

export function emptyStep(step: PlanStep): StepProjection {
  return {
    step,
    status: "pending",
    attempt: 0,
    tool_called: false,
    permission_granted: false,
    permission_denied: false,
    permission_request: null,
    secret_request: null,
    result: null,
    score: null,
    recovery: null,
    failure_reason: null,
  };
}

/** A task waiting for the user runs again once no step waits any more. */
function runIfNothingWaits(p: TaskProjection): void {
  const stillWaiting = Object.values(p.steps).some((s) => s.status === "awaiting_permission");
  if (!stillWaiting && p.state === "awaiting_permission") p.state = "running";
}

type Reducer<T extends EventTypeName> = (p: TaskProjection, payload: EventPayloads[T]) => void;

/** Copy-on-write: the step and the steps map are copied, so earlier projections stay as they were. */
function updateStep(p: TaskProjection, stepId: string, change: (s: StepProjection) => void): void {
  const step = p.steps[stepId];
  if (!step) return;
  const copy = { ...step };
  change(copy);
  p.steps = { ...p.steps, [stepId]: copy };
}

// Reducers change a shallow copy made by applyEvent and replace (never mutate) anything nested, which
// keeps each one short, the whole pure, and avoids a deep copy per event.

/** Tools whose output came from the internet already: it brings nothing of this machine into a task. */
const FROM_THE_INTERNET: ReadonlySet<string> = new Set(["web_fetch", "web_search"]);
const reducers: { [T in EventTypeName]?: Reducer<T> } = {
  "task-started": (p, e) => {
    p.started = true;
    p.state = "running";
    p.confinement = e.confinement ?? "confined";
    p.confined_commands = e.confined_commands ?? "ask";
    if (e.loop) p.loop = e.loop;
  },
  "memory-recalled": (p, e) => {
    p.recalled = e.hits;
    if (e.hits.length > 0) p.read_local ??= "recalled memory";
  },
  "context-built": (p, e) => {
    if ((e.sections.history?.tokens ?? 0) > 0) p.read_local ??= "the conversation's earlier turns";
    // Logs recorded before each call's prompt was counted count the context once per decision.
    if (!e.prompts_counted) p.tokens_used += e.total_tokens;
  },
  "model-output-started": (p, e) => {
    p.tokens_used += e.prompt_tokens ?? 0;
  },
  "model-output-completed": (p, e) => {
    p.tokens_used += estimateTokens(e.text);
    if (e.usage) p.model_work = addModelWork(p.model_work, e.usage);
  },
  "context-summarised": (p, e) => {
    p.summaries = e.section === "history" ? { ...p.summaries, history: { covers: e.covers, text: e.summary } } : { ...p.summaries, observations: { through: e.through, text: e.summary } };
  },
  "iteration-started": (p, e) => {
    const record = recordIteration(p);
    if (record) p.iterations = [...p.iterations, record];
    p.iteration = e.iteration;
    p.directive = null;
    p.plan_order = null;
    p.steps = {};
  },
  "task-queued": (p) => {
    p.state = "queued";
  },
  "task-dequeued": (p) => {
    p.state = p.started ? "running" : "received";
  },
  "task-resumed": (p, e) => {
    if (p.state !== "awaiting_permission") p.state = "running";
    p.confinement = e.confinement ?? "confined";
  },
  "directive-decided": (p, e) => {
    p.directive = e.directive;
    if (e.review?.length) p.iterations = p.iterations.map((record) => withReview(record, e.review!));
  },
  "plan-accepted": (p, e) => {
    p.plan_order = e.order;
    p.steps = Object.fromEntries(e.steps.map((step) => [step.id, emptyStep(step)]));
  },
  "step-started": (p, e) =>
    updateStep(p, e.step_id, (s) => {
      s.status = "running";
      s.attempt = e.attempt;
      s.tool_called = false;
      s.permission_granted = false;
      s.permission_denied = false;
      delete s.granted_digest;
      s.permission_request = null;
      s.secret_request = null;
      s.result = null;
      s.score = null;
      s.proposal = null;
    }),
  "coder-proposed": (p, e) => updateStep(p, e.step_id, (s) => (s.proposal = e.proposal)),
  "permission-requested": (p, e) =>
    updateStep(p, e.step_id, (s) => {
      s.status = "awaiting_permission";
      s.permission_request = e;
    }),
  "task-awaiting-permission": (p) => {
    p.state = "awaiting_permission";
  },
  "permission-resolved": (p, e) => {
    updateStep(p, e.step_id, (s) => {
      const digest = s.permission_request?.content_digest;
      s.permission_request = null;
      s.permission_granted = e.decision === "allow" || e.decision === "allow_always";
      if (s.permission_granted && digest) s.granted_digest = digest;
      else delete s.granted_digest;
      s.permission_denied = e.decision === "deny";
      s.ask_before_retry = false;
      s.status = "running";
    });
    runIfNothingWaits(p);
  },
  "secret-requested": (p, e) =>
    updateStep(p, e.step_id, (s) => {
      s.status = "awaiting_permission";
      s.secret_request = e;
    }),
  "secret-provided": (p, e) => {
    updateStep(p, e.step_id, (s) => {
      s.secret_request = null;
      s.status = "running";
    });
    runIfNothingWaits(p);
  },
  "tool-called": (p, e) =>
    updateStep(p, e.step_id, (s) => {
      s.tool_called = true;
      const called = JSON.stringify(e.call.arguments ?? {});
      s.called_with = called.length > CALLED_WITH_CHARS ? `${called.slice(0, CALLED_WITH_CHARS)}…` : called;
      // A grant covers one run: if this one's outcome is lost in a crash, the user is asked again.
      s.permission_granted = false;
    }),
  "tool-result": (p, e) => {
    if (!FROM_THE_INTERNET.has(e.result.tool)) p.read_local ??= `the output of step ${e.step_id} (${e.result.tool})`;
    updateStep(p, e.step_id, (s) => (s.result = e.result));
  },
  "critic-scored": (p, e) =>
    updateStep(p, e.step_id, (s) => {
      s.score = e.score;
      s.score_source = e.source;
    }),
  "step-retrying": (p, e) =>
    updateStep(p, e.step_id, (s) => {
      s.status = "pending";
      s.failure_reason = e.reason;
      s.ask_before_retry = e.ask_first === true;
    }),
  "step-completed": (p, e) => updateStep(p, e.step_id, (s) => (s.status = "succeeded")),
  "step-failed": (p, e) =>
    updateStep(p, e.step_id, (s) => {
      s.status = "failed";
      s.recovery = e.recovery;
      s.failure_reason = e.reason;
    }),
  "step-skipped": (p, e) =>
    updateStep(p, e.step_id, (s) => {
      s.status = "skipped";
      s.failure_reason = e.reason;
    }),
  "memory-written": (p) => {
    p.memory_writes += 1;
  },
  "answer-completed": (p, e) => {
    p.answer = e.answer;
  },
  "task-completed": (p, e) => {
    p.state = "completed";
    p.answer = e.answer;
  },
  "task-failed": (p, e) => {
    p.state = "failed";
    p.error = { code: e.code, message: e.message };
  },
  "task-cancelled": (p, e) => {
    p.state = "cancelled";
    p.error = { code: ErrorCode.Cancelled, message: e.reason };
  },
};

export function initialProjection(event: DuckEvent): TaskProjection {
  const payload = event.payload as EventPayloads["task-received"];
  return {
    task_id: event.task_id,
    text: payload.text,
    session_id: payload.session_id,
    workspace: payload.workspace,
    state: "received",
    seq: event.seq,
    started: false,
    directive: null,
    plan_order: null,
    steps: {},
    answer: null,
    error: null,
    memory_writes: 0,
    auto_approve: payload.auto_approve ?? [],
    confinement: "confined",
    confined_commands: "ask",
    read_local: null,
    iteration: 1,
    loop: { max_iterations: 1, token_budget: Number.MAX_SAFE_INTEGER },
    tokens_used: 0,
    model_work: null,
    iterations: [],
    recalled: [],
    summaries: {},
    running_ms: 0,
    last_event_ms: Date.parse(event.time),
  };
}

/**
 * A projection stored by an earlier version (a checkpoint written before the agent loop), with what
 * it lacks filled in as that version behaved: one decision, nothing counted.
 */
export function upgradedProjection(stored: TaskProjection): TaskProjection {
  const before: Partial<TaskProjection> = stored;
  return {
    ...stored,
    iteration: before.iteration ?? 1,
    loop: before.loop ?? { max_iterations: 1, token_budget: Number.MAX_SAFE_INTEGER },
    tokens_used: before.tokens_used ?? 0,
    model_work: before.model_work ?? null,
    iterations: before.iterations ?? [],
    recalled: before.recalled ?? [],
    summaries: before.summaries ?? {},
    running_ms: before.running_ms ?? 0,
    last_event_ms: before.last_event_ms ?? null,
  };
}

/**
 * Pure: the projection after one more event. The input is left untouched. `at` is the event's time in
 * ms, when the caller has it (parsing `event.time` again costs about as much as the rest).
 */
export function applyEvent(projection: TaskProjection, event: DuckEvent, at = Date.parse(event.time)): TaskProjection {
  const reducer = reducers[event.type] as Reducer<EventTypeName> | undefined;
  const next: TaskProjection = { ...projection };
  // The gap before a resume is time the task was not driven (the process had stopped).
  if (projection.state === "running" && projection.last_event_ms !== null && event.type !== "task-resumed") next.running_ms += Math.max(0, at - projection.last_event_ms);
  next.last_event_ms = at;
  reducer?.(next, event.payload as never);
  next.seq = event.seq;
  return next;
}

/** Rebuilds a projection from a task's events (the first must be `task-received`). */
export function projectEvents(events: readonly DuckEvent[], from?: TaskProjection): TaskProjection {
  let projection = from;
  for (const event of events) {
    if (!projection) {
      projection = initialProjection(event);
      continue;
    }
    projection = applyEvent(projection, event);
  }
  if (!projection) throw new DuckError(ErrorCode.Internal, "no events to project");
  return projection;
}
