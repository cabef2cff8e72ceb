import { z } from "zod";

export const MemoryKindSchema = z.enum(["fact", "procedure", "outcome", "note"]);
export type MemoryKind = z.infer<typeof MemoryKindSchema>;

/** One long-term memory row. SQLite is its source of truth. */
export const MemoryEntrySchema = z.object({
  id: z.number().int().positive(),
  text: z.string().min(1).max(20_000),
  kind: MemoryKindSchema,
  source_task: z.string().nullable(),
  weight: z.number(),
  pinned: z.boolean(),
  created_at: z.string(),
  last_used_at: z.string().nullable(),
  embedding_model: z.string().nullable(),
});
export type MemoryEntry = z.infer<typeof MemoryEntrySchema>;

export const MemoryHitSchema = z.object({
  entry: MemoryEntrySchema,
  score: z.number(),
  /** Why it matched, for people reading the events: "keyword", "vector", or both. */
  matched_by: z.array(z.string()),
});
export type MemoryHit = z.infer<typeof MemoryHitSchema>;

/** The recall decider's answer: whether to search memory, and with which query. */
export const RecallDecisionSchema = z.object({
  recall: z.boolean(),
  query: z.string().max(500).default(""),
});
export type RecallDecision = z.infer<typeof RecallDecisionSchema>;
