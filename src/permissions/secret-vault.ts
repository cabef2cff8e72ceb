/**
 * Secrets a user handed over for one step, held in this process's memory only and forgotten after
 * one use or after `ttlMs`. Nothing here is ever written anywhere.
 */
export class SecretVault {
  private readonly entries = new Map<string, { value: string; timer: NodeJS.Timeout }>();

  constructor(private readonly ttlMs = 5 * 60_000) {}

  set(taskId: string, stepId: string, value: string): void {
    this.forget(taskId, stepId);
    const key = `${taskId}\u0000${stepId}`;
    const timer = setTimeout(() => this.entries.delete(key), this.ttlMs);
    timer.unref();
    this.entries.set(key, { value, timer });
  }

  get(taskId: string, stepId: string): string | null {
    return this.entries.get(`${taskId}\u0000${stepId}`)?.value ?? null;
  }

  forget(taskId: string, stepId: string): void {
    const key = `${taskId}\u0000${stepId}`;
    const entry = this.entries.get(key);
    if (!entry) return;
    clearTimeout(entry.timer);
    this.entries.delete(key);
  }

  clear(): void {
    for (const entry of this.entries.values()) clearTimeout(entry.timer);
    this.entries.clear();
  }
}
