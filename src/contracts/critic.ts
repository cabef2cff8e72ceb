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

/**
 * The verdict a decision gives a step of the decision before, where one model decides and judges
 * (`agent.fold_critic`): the step passed on its tool's word, and this is the critic's word on it.
 */
export interface StepReview {
  step_id: string;
  /** The decision whose step it was (a step id can recur from one decision to the next). */
  iteration: number;
  verdict: CriticScore["verdict"];
}

/** What the recovery policy chose after a step's score. */
export const RecoveryActionSchema = z.enum(["continue", "retry", "respond", "fail"]);
export type RecoveryAction = z.infer<typeof RecoveryActionSchema>;
