import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { RuntimeConfigSchema, type DuckConfig } from "../config/config-schemas.js";
import type { DuckEvent, EventPayloads, MemoryHit } from "../contracts/index.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import type { SessionHistory } from "../runtime/executor-context.js";
import { createRuntime, type Runtime } from "../runtime/create-runtime.js";
import type { TaskOutcome } from "../runtime/task-outcome.js";
import { unconfinedShell } from "../tools/shell-sandbox.js";
import { ReplayModelProvider } from "./replay-model-provider.js";
import { ReplayProgress } from "./replay-progress.js";
import { ReplayToolRegistry } from "./replay-tool-registry.js";
import { fileListTool } from "../tools/builtin/file-list.js";
import { fileReadTool } from "../tools/builtin/file-read.js";
import { fileWriteTool } from "../tools/builtin/file-write.js";
import { shellExecTool } from "../tools/builtin/shell-exec.js";
import { createMemoryTools } from "../tools/builtin/memory-tools.js";
import type { AnyToolDefinition } from "../tools/tool-definition.js";

/** An event as replay compares it: no time, ids renamed in order of appearance, token counts left out. */
/**
 * How tasks decided before a setting existed: a recording that does not name one ran as DuckLM did
 * then (the critic judged failed steps too, decisions took two calls).
 */
const SETTINGS_BEFORE_THEY_WERE_RECORDED = { judge_failed_steps: true, fold_decision: "never", fold_critic: "never" } as const;

export interface ComparableEvent {
  seq: number;
  type: string;
  payload: unknown;
}

export interface ReplayReport {
  task_id: string;
  matches: boolean;
  recorded: number;
  replayed: number;
  first_difference: { seq: number; expected: ComparableEvent | null; actual: ComparableEvent | null } | null;
}

// Values chosen at random or by the clock when the task ran; they are compared by their pattern of use.
// A digest of workspace files depends on what the workspace held; it too is compared by its pattern.
const RENAMED_KEYS = new Set(["request_id", "approval_id", "memory_id", "content_digest"]);

export function comparable(events: readonly DuckEvent[]): ComparableEvent[] {
  const names = new Map<string, string>();
  const rename = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(rename);
    if (!value || typeof value !== "object") return value;
    const out: Record<string, unknown> = {};
    for (const [key, inner] of Object.entries(value)) {
      if (RENAMED_KEYS.has(key) && (typeof inner === "string" || typeof inner === "number")) {
        const id = `${key}:${String(inner)}`;
        if (!names.has(id)) names.set(id, `${key}#${names.size + 1}`);
        out[key] = names.get(id);
      } else if (key === "expires_at" || key === "created_at" || key === "last_used_at") {
        out[key] = inner === null ? null : "(time)";
      } else {
        out[key] = rename(inner);
      }
    }
    return out;
  };
  return events.map((event) => ({
    seq: event.seq,
    type: event.type,
    // Token counts depend on the tokenizer of the model that ran; a replay has none.
    // Where a task stood in line depends on the other tasks of the process that ran it; a replay runs it alone.
    payload:
      event.type === "context-built" ? { sections: Object.keys((event.payload as { sections: object }).sections) } : event.type === "task-queued" ? {} : rename(event.payload),
  }));
}

const EXTERNAL = new Set(["task-dequeued", "permission-resolved", "secret-provided", "task-cancelled", "task-resumed", "feedback-received", "approval-revoked", "task-failed", "workspace-restored"]);

/**
 * Re-drives the RuntimeLoop from a task's recorded events: model outputs and tool results come from
 * the recording (no model is loaded, no tool runs), and what a person did (permission answers,
 * passwords, cancels) and restarts are replayed at the same points. Reports whether the replayed
 * event sequence matches the recorded one, and where it first differs.
 */
export async function replayTask(recorded: readonly DuckEvent[], config: DuckConfig, options: { stallMs?: number } = {}): Promise<ReplayReport> {
  const first = recorded[0];
  if (!first || first.type !== "task-received") throw new DuckError(ErrorCode.InvalidInput, "a recording starts with task-received");
  const taskId = first.task_id;
  const progress = new ReplayProgress();
  const home = mkdtempSync(join(tmpdir(), "ducklm-replay-"));
  let runtime: Runtime | undefined;
  try {
    const cancelBeforeResult = (resultSeq: number) => {
      const next = recorded[resultSeq];
      if (next?.type === "task-cancelled") runtime!.loop.cancel(taskId, (next.payload as EventPayloads["task-cancelled"]).reason);
      if (next?.type === "task-failed" && (next.payload as EventPayloads["task-failed"]).code === ErrorCode.TaskTimeout) runtime!.loop.expire(taskId);
    };
    const registry = new ReplayToolRegistry(recorded, progress, cancelBeforeResult);
    // The tools the task was offered: built-ins with their schemas (never run here), so that their
    // arguments are checked as they were, and the rest by name.
    const memoryTools = createMemoryTools(() => runtime!.memory);
    const builtins = [fileReadTool, fileWriteTool, fileListTool, shellExecTool, ...memoryTools] as AnyToolDefinition[];
    const offered = (recorded.find((event) => event.type === "context-built")?.payload as EventPayloads["context-built"] | undefined)?.tools;
    // A task recorded before the offered tools were is replayed by the tools it called, as it was then.
    for (const tool of builtins) if (offered?.includes(tool.name)) registry.register(tool);
    registry.offer(offered ?? []);
    const models = new ReplayModelProvider(recorded, progress);
    const anyModel = recorded.some((event) => event.type === "model-output-started");
    const recalls = recorded.filter((event) => event.type === "memory-recalled").map((event) => (event.payload as EventPayloads["memory-recalled"]).hits);
    // The loop limits the task ran under are in its task-started; a task recorded without them ran one decision.
    const started = recorded.find((event) => event.type === "task-started")?.payload as EventPayloads["task-started"] | undefined;
    const agent = { ...config.runtime.agent, ...SETTINGS_BEFORE_THEY_WERE_RECORDED, max_iterations: started?.loop?.max_iterations ?? 1, token_budget: started?.loop?.token_budget ?? config.runtime.agent.token_budget };
    // A task that recorded the settings its decisions followed is replayed under those, whatever runtime.json says now.
    const recordedAgent = started?.settings?.agent as Record<string, unknown> | undefined;
    const settings = started?.settings ? RuntimeConfigSchema.parse({ ...config.runtime, ...started.settings, agent: { ...SETTINGS_BEFORE_THEY_WERE_RECORDED, ...recordedAgent } }) : { ...config.runtime, agent };
    runtime = createRuntime({
      home,
      recordSettings: started?.settings !== undefined,
      ...(started?.settings ? { settingsAsRecorded: started.settings } : {}),
      // A task recorded before confined commands ran unasked was decided by asking.
      config: { ...config, permissions: { ...config.permissions, confined: started?.confined_commands ?? "ask" }, runtime: { ...settings, resume: "never" } },
      databaseFile: ":memory:",
      logger: pino({ level: "silent" }),
      models: anyModel ? models : null,
      registry,
      memorySearch: (): MemoryHit[] => recalls.shift() ?? [],
      // The model was asked about recall where the recording asked it.
      recallCandidates: () => models.recorded("recall"),
      sessionHistory: recordedHistory(recorded, config.runtime.context_budgets.history),
      sleep: async () => undefined,
      // What steps running side by side write comes in the order the recording has it.
      recordedTurn: async (id, next, signal) => {
        if (id !== taskId) return;
        // After what this replay has written so far (published or still in its batch).
        const ahead = recorded.slice(runtime!.store.projection(taskId).seq);
        const due = next.retryOf
          ? // The step's next event; else the first event after the plan's steps (its end).
            (ahead.find((event) => (event.payload as { step_id?: string }).step_id === next.retryOf) ??
            ahead.find((event) => (event.payload as { step_id?: string }).step_id === undefined && !event.type.startsWith("model-output-")))
          : ahead.find((event) => {
              const payload = event.payload as { step_id?: string; purpose?: string };
              return event.type === next.type && (next.step_id === undefined || payload.step_id === next.step_id) && (next.purpose === undefined || payload.purpose === next.purpose);
            });
        if (due) return progress.until(due.seq - 1, signal);
        if (next.mayBeAbsent) return;
        // Never written in the recording: the task was stopped before it (a cancel, a restart), and is here too.
        return progress.forever(signal);
      },
      // The task waits in line where the recording says it did, and is let in where it was (`task-dequeued`).
      admission: (id) => (recorded[runtime!.store.projection(id).seq]?.type === "task-queued" ? "queue" : "run"),
      // No command runs in a replay; decisions follow the confinement the recording says it had.
      sandbox: { ...unconfinedShell, confinement: (recorded.find((event) => event.type === "task-started")?.payload as EventPayloads["task-started"] | undefined)?.confinement ?? "confined" },
    });
    await runtime.ready();
    const received = first.payload as EventPayloads["task-received"];
    // Approvals the task found already there; one it was granted itself is granted again where it was.
    const grantedHere = new Set(recorded.filter((event) => event.type === "approval-granted").map((event) => (event.payload as EventPayloads["approval-granted"]).command));
    for (const event of recorded) {
      if (event.type !== "approval-used") continue;
      const used = event.payload as EventPayloads["approval-used"];
      if (grantedHere.has(used.command)) continue;
      if (!runtime.approvals.findActive(used.command, received.workspace)) {
        // Used, it let the command run: with the network, had the command needed it.
        runtime.approvals.grant({ command: used.command, cwd: received.workspace, category: "unknown", grantedByTask: null, network: true });
      }
    }
    // Those were given for the files as they were when the task ran, which this workspace need not hold.
    const approvals = runtime.approvals;
    const findActive = approvals.findActive.bind(approvals);
    approvals.findActive = (command, cwd, contentDigest = null) => findActive(command, cwd, contentDigest) ?? (grantedHere.has(command) ? null : findActive(command, cwd, null));
    // A recorded reinforcement found its entry already in memory: put one there for the replay to find.
    for (const event of recorded) {
      if (event.type !== "memory-written") continue;
      const written = event.payload as EventPayloads["memory-written"];
      if (written.action === "reinforce" && !runtime.memory.store.findExact(written.text)) runtime.memory.store.insert({ text: written.text, kind: written.kind as "fact" });
    }
    const { store, loop } = runtime;
    // Where the recorded process died, the replay dies too: nothing but task-resumed may take that place.
    const restarts = new Set(recorded.filter((event) => event.type === "task-resumed").map((event) => event.seq));
    store.appendGuard = (event) => {
      if (event.task_id === taskId && restarts.has(event.seq) && event.type !== "task-resumed") {
        throw new DuckError(ErrorCode.Shutdown, "the recorded process stopped here");
      }
    };
    runtime.bus.subscribe(taskId, (event) => progress.advance(event.seq));
    store.createTask({ id: taskId, text: received.text, session_id: received.session_id ?? undefined, workspace: received.workspace, ...(received.auto_approve ? { auto_approve: received.auto_approve } : {}) });
    let drive: Promise<TaskOutcome> | null = loop.drive(taskId);
    let settled = false;
    const track = (promise: Promise<TaskOutcome>) => {
      settled = false;
      drive = promise;
      promise.finally(() => {
        if (drive === promise) settled = true;
      }).catch(() => undefined);
    };
    track(drive);
    const stallMs = options.stallMs ?? 40;
    let lastTicks = -1;
    let stalledFor = 0;
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, 5));
      store.flush();
      if (progress.ticks !== lastTicks) {
        lastTicks = progress.ticks;
        stalledFor = 0;
        continue;
      }
      stalledFor += 5;
      if (!settled && stalledFor < stallMs) continue;
      const next = recorded[progress.seq];
      if (!next || !EXTERNAL.has(next.type)) {
        if (settled || stalledFor > 2_000) break;
        continue;
      }
      const action = await performExternal(Object.assign(runtime, { recorded }), taskId, next, () => settled);
      stalledFor = 0;
      if (action === "stuck") break;
      if (action) track(action.drive);
    }
    await loop.close();
    const replayed = store.listEvents(taskId);
    return compare(taskId, recorded, replayed);
  } finally {
    await runtime?.close();
    rmSync(home, { recursive: true, force: true });
  }
}

/** Does what a person (or a restart) did at this point of the recording. */
async function performExternal(runtime: Runtime & { recorded?: readonly DuckEvent[] }, taskId: string, next: DuckEvent, settled: () => boolean): Promise<{ drive: Promise<TaskOutcome> } | null | "stuck"> {
  const { loop, store } = runtime;
  const projection = store.projection(taskId);
  switch (next.type) {
    case "permission-resolved": {
      const payload = next.payload as EventPayloads["permission-resolved"];
      const request = projection.steps[payload.step_id]?.permission_request;
      if (!request) return "stuck";
      const granted = runtime.recorded?.[next.seq];
      const expiresAt = granted?.type === "approval-granted" ? (granted.payload as EventPayloads["approval-granted"]).expires_at : null;
      return {
        drive: loop.resolvePermission(taskId, request.request_id, payload.decision === "ask" ? "deny" : payload.decision, payload.by, expiresAt ? { expiresAt: new Date(expiresAt) } : {}).done,
      };
    }
    case "secret-provided": {
      const payload = next.payload as EventPayloads["secret-provided"];
      const request = projection.steps[payload.step_id]?.secret_request;
      if (!request) return "stuck";
      return { drive: loop.provideSecret(taskId, request.request_id, "replayed secret", payload.by).done };
    }
    case "task-cancelled":
      loop.cancel(taskId, (next.payload as EventPayloads["task-cancelled"]).reason);
      return null;
    case "task-dequeued":
      return loop.admit(taskId) ? null : "stuck";
    case "task-failed":
      if ((next.payload as EventPayloads["task-failed"]).code !== ErrorCode.TaskTimeout) return "stuck";
      loop.expire(taskId);
      return null;
    case "task-resumed": {
      // The recorded process died here: stop driving without recording anything, then resume.
      await loop.close();
      if (!settled()) await new Promise((resolve) => setTimeout(resolve, 5));
      return { drive: loop.resume(taskId, (next.payload as EventPayloads["task-resumed"]).reason) };
    }
    case "feedback-received": {
      const payload = next.payload as EventPayloads["feedback-received"];
      loop.recordFeedback(taskId, { target: payload.target, step_id: payload.step_id, iteration: payload.iteration ?? null, rating: payload.rating, comment: payload.comment }, payload.by, {
        asRecorded: payload.target === "step" && payload.iteration === undefined,
      });
      return null;
    }
    case "approval-revoked": {
      const payload = next.payload as EventPayloads["approval-revoked"];
      const approval = runtime.approvals.list().find((candidate) => candidate.command === payload.command && !candidate.revoked_at);
      if (!approval) return "stuck";
      loop.revokeApproval(approval.id, payload.by);
      return null;
    }
    default:
      return "stuck";
  }
}

function compare(taskId: string, recorded: readonly DuckEvent[], replayed: readonly DuckEvent[]): ReplayReport {
  const expected = comparable(recorded);
  const actual = comparable(replayed);
  const length = Math.max(expected.length, actual.length);
  for (let index = 0; index < length; index += 1) {
    const a = expected[index] ?? null;
    const b = actual[index] ?? null;
    if (!a || !b || a.type !== b.type || JSON.stringify(a.payload) !== JSON.stringify(b.payload)) {
      return { task_id: taskId, matches: false, recorded: recorded.length, replayed: replayed.length, first_difference: { seq: index + 1, expected: a, actual: b } };
    }
  }
  return { task_id: taskId, matches: true, recorded: recorded.length, replayed: replayed.length, first_difference: null };
}

/**
 * The conversation a replay shows its task. The earlier turns are not in the task's log, but the
 * ones its model summarised are named there: they stand in as turns too long to fit, so the replay
 * summarises the same turns and is served the recorded summary. The turns shown in full only
 * affected the prompt, which a replay does not need.
 */
function recordedHistory(recorded: readonly DuckEvent[], historyBudget: number): SessionHistory {
  const summarised = recorded.find((event) => event.type === "context-summarised" && (event.payload as EventPayloads["context-summarised"]).section === "history");
  const covers = summarised ? (summarised.payload as Extract<EventPayloads["context-summarised"], { section: "history" }>).covers : [];
  const tooLong = "·".repeat(historyBudget * 8);
  return () => covers.map((taskId) => ({ task_id: taskId, text: tooLong, answer: null }));
}
