import { z } from "zod";

const Score = z.number().min(0).max(1);

/** The critic's judgement of one step's result. */
export const CriticScoreSchema = z.object({
  correctness: Score,
  usefulness: Score,
  safety: Score,
  verdict: z.enum(["pass", "retry", "fail"]),
  reason: z.string().max(2000).default(""),
});
export type CriticScore = z.infer<typeof CriticScoreSchema>;

/** What the recovery policy chose after a step's score. */
export const RecoveryActionSchema = z.enum(["continue", "retry", "respond", "fail"]);
export type RecoveryAction = z.infer<typeof RecoveryActionSchema>;
