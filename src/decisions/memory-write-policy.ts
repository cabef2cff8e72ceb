import type { MemoryKind } from "../contracts/index.js";
import type { TaskProjection } from "../state/task-projection.js";

export interface MemoryWrite {
  kind: MemoryKind;
  text: string;
  reason: string;
}

// Statements about the user or their setup that are worth keeping across tasks.
const USER_FACT = /\b(?:my name is|i am|i'm|i prefer|i like|i use|my \w+ (?:is|are))\b/i;
const SECRET_LIKE = /(password|passwd|secret|token|api[_-]?key|private key|-----BEGIN)/i;

/**
 * Deterministic rules on what a finished task leaves in long-term memory: facts the user stated,
 * and the procedure of a multi-step plan that worked. Secrets are never kept.
 */
export function decideMemoryWrites(task: TaskProjection): MemoryWrite[] {
  if (task.state === "failed" || task.state === "cancelled") return [];
  const writes: MemoryWrite[] = [];
  const text = task.text.trim();
  const explicitRemember = task.directive?.kind === "tool" && task.directive.tool === "memory_insert";
  if (!explicitRemember && USER_FACT.test(text) && !SECRET_LIKE.test(text) && text.length <= 500) {
    writes.push({ kind: "fact", text, reason: "the user stated a fact about themselves or their setup" });
  }
  const steps = task.plan_order?.map((id) => task.steps[id]!).filter(Boolean) ?? [];
  if (task.directive?.kind === "plan" && steps.length >= 2 && steps.every((step) => step.status === "succeeded")) {
    const procedure = steps
      .map((s, i) => `${i + 1}. ${s.step.kind === "tool" ? `${s.step.tool} ${JSON.stringify(s.step.arguments)}` : `coder: ${s.step.coder.specification.slice(0, 200)}`}`)
      .join("\n");
    const record = `Procedure that worked for "${text.slice(0, 200)}":\n${procedure}`;
    if (!SECRET_LIKE.test(record)) writes.push({ kind: "procedure", text: record, reason: "a multi-step plan succeeded" });
  }
  return writes;
}
