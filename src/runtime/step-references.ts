import type { PlanStep } from "../contracts/index.js";
import type { TaskProjection } from "../state/task-projection.js";

// `{{s1}}`, `{{s1.output}}` or `{{steps.s1.output}}` inside a string argument; `{"from_step": "s1"}` as a whole value.
const TEMPLATE = /\{\{\s*(steps\.)?([A-Za-z0-9_-]+)(\.output)?\s*\}\}/g;

/**
 * The step a template names, or null when it is text of its own: a bare `{{name}}` refers to a step
 * only when one of the task's steps has that id (a Jinja or Handlebars file's `{{ name }}` is written
 * as it is), while the spelled-out forms always refer to one.
 */
function templateStep(match: RegExpMatchArray | string[], known: ReadonlySet<string>): string | null {
  const [, prefix, id, suffix] = match;
  return prefix || suffix || known.has(id!) ? id! : null;
}

function isReference(value: unknown): value is { from_step: string } {
  return typeof value === "object" && value !== null && !Array.isArray(value) && typeof (value as { from_step?: unknown }).from_step === "string" && Object.keys(value).length === 1;
}

function mapValues(value: unknown, onString: (text: string) => string, onReference: (id: string) => unknown): unknown {
  if (typeof value === "string") return onString(value);
  if (isReference(value)) return onReference(value.from_step);
  if (Array.isArray(value)) return value.map((item) => mapValues(item, onString, onReference));
  if (typeof value === "object" && value !== null) return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, mapValues(item, onString, onReference)]));
  return value;
}

/** The ids of the steps a task has had: this decision's plan and every earlier decision's. */
export function knownStepIds(projection: Pick<TaskProjection, "steps" | "iterations">, plan: readonly { id: string }[] = []): Set<string> {
  return new Set([...Object.keys(projection.steps), ...(projection.iterations ?? []).flatMap((record) => record.steps.map((step) => step.id)), ...plan.map((step) => step.id)]);
}

/** Deepest nesting of arrays and objects a step's arguments may have: no tool takes more, and the readers here recurse. */
export const MAX_ARGUMENT_DEPTH = 32;

/** How deeply a value nests arrays and objects, counted without recursion, up to one past `limit`. */
export function nestingDepth(value: unknown, limit = MAX_ARGUMENT_DEPTH): number {
  let deepest = 0;
  const open: Array<[unknown, number]> = [[value, 0]];
  while (open.length > 0) {
    const [item, depth] = open.pop()!;
    if (typeof item !== "object" || item === null) continue;
    deepest = Math.max(deepest, depth + 1);
    if (deepest > limit) return deepest;
    for (const inner of Array.isArray(item) ? item : Object.values(item)) open.push([inner, depth + 1]);
  }
  return deepest;
}

/** The steps a step's arguments take output from (`known`: the task's step ids, see `templateStep`). */
export function referencedSteps(args: Record<string, unknown>, known: ReadonlySet<string>): string[] {
  const found = new Set<string>();
  mapValues(
    args,
    (text) => {
      for (const match of text.matchAll(TEMPLATE)) {
        const id = templateStep(match, known);
        if (id !== null) found.add(id);
      }
      return text;
    },
    (id) => found.add(id),
  );
  return [...found];
}

/** Arguments with every reference standing in as placeholder text: their shape, for validation before any step ran. */
export function withoutStepReferences(args: Record<string, unknown>, known: ReadonlySet<string>): Record<string, unknown> {
  return mapValues(args, (text) => text.replace(TEMPLATE, (...match: string[]) => (templateStep(match, known) === null ? match[0]! : "output")), () => "output") as Record<string, unknown>;
}

/** A plan in which each step that takes an earlier step's output of the plan also waits for it. */
export function withReferenceDependencies(steps: readonly PlanStep[]): PlanStep[] {
  const planned = new Set(steps.map((step) => step.id));
  return steps.map((step) => {
    if (step.kind !== "tool") return step;
    const extra = referencedSteps(step.arguments, planned).filter((id) => planned.has(id) && id !== step.id && !step.depends_on.includes(id));
    return extra.length > 0 ? { ...step, depends_on: [...step.depends_on, ...extra] } : step;
  });
}

/** The most characters of earlier outputs one step's arguments may take in (a file's whole content, say). */
export const MAX_FILLED_IN_CHARS = 1_048_576;

/**
 * A step's arguments with the outputs of the steps it names filled in (trailing newlines trimmed),
 * or why they cannot be: a named step that is not in the plan or did not succeed.
 */
export function resolveStepReferences(args: Record<string, unknown>, projection: TaskProjection): { args: Record<string, unknown> } | { problem: string } {
  let problem: string | null = null;
  // What is filled in is counted as it goes, so that a reference repeated a hundred times to a large
  // output is refused before it is built, not after (it would exhaust memory).
  let filledIn = 0;
  const outputOf = (id: string): string => {
    const step = projection.steps[id];
    if (!step) problem ??= `the arguments use the output of step ${id}, which is not in the plan`;
    else if (step.status !== "succeeded") problem ??= `the arguments use the output of step ${id}, which did not succeed`;
    const output = (step?.result?.output ?? "").replace(/\n+$/, "");
    filledIn += output.length;
    if (filledIn > MAX_FILLED_IN_CHARS) {
      problem ??= `the arguments would take more than ${MAX_FILLED_IN_CHARS} characters of earlier steps' output; refer to less of it`;
      return "";
    }
    return output;
  };
  const known = knownStepIds(projection);
  const resolved = mapValues(args, (text) => text.replace(TEMPLATE, (...match: string[]) => {
    const id = templateStep(match, known);
    return id === null ? match[0]! : outputOf(id);
  }), outputOf) as Record<string, unknown>;
  return problem ? { problem } : { args: resolved };
}
