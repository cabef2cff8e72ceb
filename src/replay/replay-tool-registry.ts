import { z } from "zod";
import type { DuckEvent, EventPayloads, ToolEffect, ToolResult } from "../contracts/index.js";
import type { ToolContext, ToolDefinition } from "../tools/tool-definition.js";
import { ToolRegistry, type ToolCatalogueEntry } from "../tools/tool-registry.js";
import type { ReplayProgress } from "./replay-progress.js";

/**
 * A registry whose tools run nothing: each call returns the result the recording holds for its step
 * and attempt, at the recorded position. A call whose result was never recorded (the process died
 * while it ran) waits until it is stopped.
 */
export class ReplayToolRegistry extends ToolRegistry {
  private readonly effects = new Map<string, ToolEffect>();
  private readonly offered = new Set<string>();
  private readonly results = new Map<string, Array<{ seq: number; result: ToolResult }>>();

  constructor(events: readonly DuckEvent[], private readonly progress: ReplayProgress, private readonly beforeResult: (seq: number) => void) {
    super();
    // The newest event about each step: a result is a tool's only when it follows the step's
    // `tool-called`. One the runtime wrote itself (a denial, a refusal, a rerun the user declined
    // after a crash) comes after other events about the step, and no tool run may take it: a later
    // decision's step of the same id and attempt would otherwise get the denial as its output.
    const lastAboutStep = new Map<string, { type: string; attempt: unknown }>();
    for (const event of events) {
      const payload = event.payload as { step_id?: unknown; attempt?: unknown };
      if (event.type === "tool-called") {
        const called = event.payload as EventPayloads["tool-called"];
        this.effects.set(called.call.tool, called.effect);
      } else if (event.type === "tool-result") {
        const result = event.payload as EventPayloads["tool-result"];
        const last = lastAboutStep.get(result.step_id);
        if (last?.type === "tool-called" && last.attempt === result.attempt) {
          const key = `${result.step_id}|${result.attempt}`;
          const list = this.results.get(key) ?? [];
          list.push({ seq: event.seq, result: result.result });
          this.results.set(key, list);
        }
      } else if (event.type === "directive-decided") {
        const directive = (event.payload as EventPayloads["directive-decided"]).directive;
        const names = directive.kind === "tool" ? [directive.tool] : directive.kind === "plan" ? directive.steps.flatMap((step) => (step.kind === "tool" ? [step.tool] : [])) : [];
        for (const name of names) if (!this.effects.has(name)) this.effects.set(name, "side-effecting");
      }
      // A person's rating of a step says nothing about how it ran, whenever it arrives.
      if (typeof payload.step_id === "string" && event.type !== "feedback-received") lastAboutStep.set(payload.step_id, { type: event.type, attempt: payload.attempt });
    }
  }

  override get(name: string): ToolDefinition<unknown> | undefined {
    // A built-in registered for its schema is judged (and its arguments checked) as it was.
    const registered = super.get(name);
    if (registered) return registered;
    const effect = this.effects.get(name) ?? (this.offered.has(name) ? "side-effecting" : undefined);
    if (!effect) return undefined;
    return { name, description: "recorded", effect, inputSchema: z.unknown(), execute: async () => ({ ok: false, output: "" }) };
  }

  /** Names the recorded task was offered besides the tools it called (they fix the directive's schema). */
  offer(names: readonly string[]): void {
    for (const name of names) if (!this.effects.has(name) && !super.get(name)) this.offered.add(name);
  }

  override names(): string[] {
    return [...new Set([...super.names(), ...this.effects.keys(), ...this.offered])];
  }

  override catalogue(): ToolCatalogueEntry[] {
    return this.names().map((name) => ({ name, description: "recorded", effect: this.get(name)!.effect, input_schema: {} }));
  }

  override async run(_name: string, _args: Record<string, unknown>, context: ToolContext): Promise<ToolResult> {
    const list = this.results.get(`${context.stepId}|${context.attempt}`);
    const recorded = list?.[0];
    if (!list || !recorded) return this.progress.forever(context.signal);
    // Taken only once its position is reached: a call stopped before then (the recorded process died
    // while it ran) leaves the result to the run after the restart.
    await this.progress.until(recorded.seq - 1, context.signal);
    list.shift();
    this.beforeResult(recorded.seq);
    return recorded.result;
  }
}
