import type { MemoryEntry } from "../contracts/index.js";
import { decideMemoryWrites } from "../decisions/memory-write-policy.js";
import type { PreparedMemoryWrite } from "../memory/memory-service.js";
import type { TaskProjection } from "../state/task-projection.js";
import type { ExecutorContext } from "./executor-context.js";

/** The answer a finished plan gives: a single step's output, or a line per step and the last output. */
export function composeAnswer(projection: TaskProjection): string {
  const order = projection.plan_order ?? [];
  const steps = order.map((id) => projection.steps[id]!);
  if (steps.length === 1) {
    const only = steps[0]!;
    if (only.status === "succeeded") return only.result?.output ?? "";
    return `${only.step.id} did not succeed: ${only.failure_reason ?? only.result?.error?.message ?? "unknown reason"}`;
  }
  const lines = steps.map((step) => {
    const mark = step.status === "succeeded" ? "✓" : step.status === "skipped" ? "–" : "✗";
    const detail = step.status === "succeeded" ? (step.result?.output ?? "").split("\n")[0] : step.failure_reason ?? "";
    return `${mark} ${step.step.id}: ${detail}`;
  });
  const last = [...steps].reverse().find((step) => step.status === "succeeded");
  return last ? `${lines.join("\n")}\n\n${last.result?.output ?? ""}`.trimEnd() : lines.join("\n");
}

/**
 * The final answer, the memory writes the policy decides on and `task-completed`, in one
 * transaction. Embeddings and the near-duplicate check happen before it; the vector index is updated
 * after it commits.
 */
export async function finishTask(context: ExecutorContext, taskId: string, answer: string): Promise<void> {
  const { store, memory } = context;
  const projection = store.projection(taskId);
  const decided = decideMemoryWrites({ ...projection, answer, state: "completed" });
  const prepared = await Promise.all(decided.map(async (write) => ({ write, plan: await memory.prepare(write.text, write.kind) })));
  const applied: Array<{ entry: MemoryEntry; plan: PreparedMemoryWrite }> = [];
  store.transaction(() => {
    store.append(taskId, "answer-completed", { answer });
    for (const { write, plan } of prepared) {
      const entry = memory.applyWrite(plan, taskId);
      applied.push({ entry, plan });
      const reason = plan.action === "reinforce" ? `${write.reason}; repeats entry #${entry.id} (similarity ${plan.similarity.toFixed(2)}), so its weight was raised` : write.reason;
      store.append(taskId, "memory-written", { action: plan.action, memory_id: entry.id, kind: write.kind, text: write.text, reason });
    }
    store.append(taskId, "task-completed", { answer });
  });
  for (const { entry, plan } of applied) memory.indexWrite(entry, plan);
}
