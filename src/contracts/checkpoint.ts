import { z } from "zod";

/** A snapshot of a task's projection at one event. Resume loads it, then applies later events. */
export const CheckpointSchema = z.object({
  task_id: z.string(),
  seq: z.number().int().positive(),
  time: z.string(),
  snapshot: z.record(z.string(), z.unknown()),
});
export type Checkpoint = z.infer<typeof CheckpointSchema>;
