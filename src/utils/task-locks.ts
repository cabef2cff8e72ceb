/**
 * One readers-writer lock per task: calls of a task's steps share it while they run, and a call that
 * must see the workspace hold still (a command whose approval is bound to files it runs) takes it
 * alone, after the calls under way end and before any other starts. Waiting ends with the signal.
 */
export class TaskLocks {
  private readonly held = new Map<string, { readers: number; writer: boolean; waiting: Array<{ exclusive: boolean; wake: () => void }> }>();

  async run<T>(taskId: string, exclusive: boolean, signal: AbortSignal, body: () => Promise<T>): Promise<T> {
    await this.acquire(taskId, exclusive, signal);
    try {
      return await body();
    } finally {
      this.release(taskId, exclusive);
    }
  }

  /** How many tasks have a lock held or waited for: none once their calls are over. */
  get size(): number {
    return this.held.size;
  }

  private state(taskId: string) {
    let state = this.held.get(taskId);
    if (!state) this.held.set(taskId, (state = { readers: 0, writer: false, waiting: [] }));
    return state;
  }

  private acquire(taskId: string, exclusive: boolean, signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    const state = this.state(taskId);
    // In order of arrival: a shared call that comes after a waiting exclusive one waits behind it.
    const free = exclusive ? !state.writer && state.readers === 0 && state.waiting.length === 0 : !state.writer && state.waiting.length === 0;
    if (free) {
      if (exclusive) state.writer = true;
      else state.readers += 1;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const entry = {
        exclusive,
        wake: () => {
          signal.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        state.waiting.splice(state.waiting.indexOf(entry), 1);
        this.wakeNext(taskId);
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      state.waiting.push(entry);
    });
  }

  private release(taskId: string, exclusive: boolean): void {
    const state = this.held.get(taskId);
    if (!state) return;
    if (exclusive) state.writer = false;
    else state.readers -= 1;
    this.wakeNext(taskId);
  }

  private wakeNext(taskId: string): void {
    const state = this.held.get(taskId);
    if (!state) return;
    while (state.waiting.length > 0 && !state.writer) {
      const next = state.waiting[0]!;
      if (next.exclusive && state.readers > 0) break;
      state.waiting.shift();
      if (next.exclusive) state.writer = true;
      else state.readers += 1;
      next.wake();
      if (next.exclusive) break;
    }
    if (!state.writer && state.readers === 0 && state.waiting.length === 0) this.held.delete(taskId);
  }
}
