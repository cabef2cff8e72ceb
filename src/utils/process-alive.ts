import { readFileSync } from "node:fs";

/**
 * Whether a process with this PID runs on this machine. PID 0 and below name process groups, not a
 * process (signalling them succeeds for any caller), so they are never alive here. A process that
 * has exited but was not yet reaped by its parent (a zombie, common in containers whose PID 1 does not
 * reap) still answers signals, and is not alive either.
 */
export function isProcessAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  return !hasExited(pid);
}

/** True for a zombie (or dead) process on Linux, from /proc; elsewhere nothing can be told, so false. */
function hasExited(pid: number): boolean {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return false;
  }
  // "pid (command) state …": the command may itself hold spaces and parentheses.
  const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
  return state === "Z" || state === "X";
}
