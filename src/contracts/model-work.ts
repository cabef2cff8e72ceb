import { z } from "zod";

/** What one model call cost, as the provider measured it (a field it cannot know is left out). */
export interface ModelCallUsage {
  /** Tokens of the whole prompt as the model read it (its chat template included). */
  prompt_tokens?: number;
  /** Prompt tokens served from the cache (a kept sequence, a server's prefix cache) instead of evaluated. */
  cached_tokens?: number;
  /** Prompt tokens the model evaluated for this call. */
  evaluated_tokens?: number;
  generated_tokens?: number;
  /** From the start of the call to its first generated text. */
  ttft_ms?: number;
  duration_ms?: number;
}

/** What a task's model calls cost together, as its end event and its row carry it. */
export const ModelWorkSchema = z.object({
  /** Calls that reported what they cost. */
  calls: z.number().int(),
  prompt_tokens: z.number().int(),
  cached_tokens: z.number().int(),
  evaluated_tokens: z.number().int(),
  generated_tokens: z.number().int(),
  duration_ms: z.number(),
});
export type ModelWork = z.infer<typeof ModelWorkSchema>;

/** The totals with one more call's cost added. */
export function addModelWork(work: ModelWork | null, usage: ModelCallUsage): ModelWork {
  const base = work ?? { calls: 0, prompt_tokens: 0, cached_tokens: 0, evaluated_tokens: 0, generated_tokens: 0, duration_ms: 0 };
  return {
    calls: base.calls + 1,
    prompt_tokens: base.prompt_tokens + (usage.prompt_tokens ?? 0),
    cached_tokens: base.cached_tokens + (usage.cached_tokens ?? 0),
    evaluated_tokens: base.evaluated_tokens + (usage.evaluated_tokens ?? usage.prompt_tokens ?? 0),
    generated_tokens: base.generated_tokens + (usage.generated_tokens ?? 0),
    duration_ms: base.duration_ms + (usage.duration_ms ?? 0),
  };
}
