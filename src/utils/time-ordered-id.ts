import { randomUUID } from "node:crypto";

/**
 * A UUID version 7 (RFC 9562): the first 48 bits are the time in milliseconds, the rest random, so
 * ids made later sort later. Task ids are the key of the events index, the task and checkpoint rows
 * and the leases; random (version 4) keys land on a random page of each of those B-trees, while
 * time-ordered ones append at their ends, which keeps a commit's pages few and the file compact.
 * Built on `randomUUID`, which draws its randomness from a pooled buffer (a fresh draw per id costs
 * a system call).
 */
export function timeOrderedId(now: number = Date.now()): string {
  const random = randomUUID();
  const time = now.toString(16).padStart(12, "0").slice(-12);
  // random: xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx; its variant bits are already RFC 9562's.
  return `${time.slice(0, 8)}-${time.slice(8)}-7${random.slice(15)}`;
}
