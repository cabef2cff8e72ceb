/**
 * Whether a process with this PID runs on this machine. PID 0 and below name process groups, not a
 * process (signalling them succeeds for any caller), so they are never alive here.
 */
export function isProcessAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
