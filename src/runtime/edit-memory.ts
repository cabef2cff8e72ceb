import type { MemoryEntry, MemoryKind } from "../contracts/index.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import type { ExecutorContext } from "./executor-context.js";

/** A change to long-term memory asked for outside a task. */
export type MemoryEdit =
  | { action: "add"; text: string; kind: MemoryKind }
  | { action: "forget"; id: number }
  | { action: "pin"; id: number; pinned: boolean };

export interface MemoryEditResult {
  /** The task that records the edit. */
  taskId: string;
  action: "insert" | "reinforce" | "forget" | "pin" | "unpin";
  entry: MemoryEntry;
}

function describe(edit: MemoryEdit, entry: MemoryEntry | null): string {
  if (edit.action === "add") return `Remember: ${edit.text}`;
  const text = entry ? `“${entry.text.length > 80 ? `${entry.text.slice(0, 77)}…` : entry.text}”` : "";
  return `${edit.action === "forget" ? "Forget" : edit.pinned ? "Pin" : "Unpin"} memory #${edit.id} ${text}`.trim();
}

/**
 * A memory change made through the API, the CLI or the SDK is a command that leaves events: a small
 * task of its own (`kind: memory-edit`) with the `memory-written` event and its reason, committed
 * with the change in one transaction. It is recorded, never driven.
 */
export async function editMemory(context: ExecutorContext, workspace: string, edit: MemoryEdit, by: string): Promise<MemoryEditResult> {
  const { store, memory } = context;
  const reason = `${edit.action === "add" ? "added" : edit.action === "forget" ? "forgotten" : edit.pinned ? "pinned" : "unpinned"} by ${by}`;
  if (edit.action === "add") {
    const plan = await memory.prepare(edit.text, edit.kind);
    const result = store.transaction((): MemoryEditResult => {
      const task = store.createTask({ text: describe(edit, null), workspace, kind: "memory-edit" });
      const entry = memory.applyWrite(plan, task.task_id);
      const note = plan.action === "reinforce" ? `${reason}; repeats entry #${entry.id}, so its weight was raised` : reason;
      store.append(task.task_id, "memory-written", { action: plan.action, memory_id: entry.id, kind: entry.kind, text: entry.text, reason: note });
      store.append(task.task_id, "task-completed", { answer: plan.action === "insert" ? `remembered as #${entry.id}` : `already remembered as #${entry.id}` });
      return { taskId: task.task_id, action: plan.action, entry };
    });
    memory.indexWrite(result.entry, plan);
    return result;
  }
  const entry = memory.store.get(edit.id);
  if (!entry) throw new DuckError(ErrorCode.MemoryNotFound, `no memory entry ${edit.id}`, { details: { memory_id: edit.id } });
  const action = edit.action === "forget" ? "forget" : edit.pinned ? "pin" : "unpin";
  const taskId = store.transaction(() => {
    const task = store.createTask({ text: describe(edit, entry), workspace, kind: "memory-edit" });
    if (edit.action === "forget") memory.forget(edit.id);
    else memory.pin(edit.id, edit.pinned);
    store.append(task.task_id, "memory-written", { action, memory_id: entry.id, kind: entry.kind, text: entry.text, reason });
    store.append(task.task_id, "task-completed", { answer: `${action === "forget" ? "forgot" : action === "pin" ? "pinned" : "unpinned"} #${entry.id}` });
    return task.task_id;
  });
  return { taskId, action, entry: memory.store.get(edit.id) ?? entry };
}
