/** Counts the replayed task's published events and lets async work wait for a position. */
export class ReplayProgress {
  private position = 0;
  private readonly waiters: Array<{ seq: number; resolve: () => void; reject: (reason: unknown) => void; signal?: AbortSignal; onAbort?: () => void }> = [];
  /** Bumped on every event, so the replayer can tell a stall from progress. */
  ticks = 0;

  get seq(): number {
    return this.position;
  }

  advance(seq: number): void {
    this.position = Math.max(this.position, seq);
    this.ticks += 1;
    for (const waiter of [...this.waiters]) {
      if (waiter.seq <= this.position) this.settle(waiter, true);
    }
  }

  /** Resolves once event `seq` has been published; rejects when `signal` aborts first. */
  until(seq: number, signal?: AbortSignal): Promise<void> {
    if (seq <= this.position) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const waiter: (typeof this.waiters)[number] = { seq, resolve, reject, ...(signal ? { signal } : {}) };
      if (signal) {
        if (signal.aborted) {
          reject(signal.reason);
          return;
        }
        waiter.onAbort = () => this.settle(waiter, false);
        signal.addEventListener("abort", waiter.onAbort, { once: true });
      }
      this.waiters.push(waiter);
    });
  }

  /** Waits until the signal aborts: what a call that never finished in the recording does. */
  forever(signal?: AbortSignal): Promise<never> {
    return new Promise((_resolve, reject) => {
      if (!signal) return;
      if (signal.aborted) reject(signal.reason);
      else signal.addEventListener("abort", () => reject(signal.reason), { once: true });
    });
  }

  private settle(waiter: (typeof this.waiters)[number], reached: boolean): void {
    const index = this.waiters.indexOf(waiter);
    if (index === -1) return;
    this.waiters.splice(index, 1);
    if (waiter.signal && waiter.onAbort) waiter.signal.removeEventListener("abort", waiter.onAbort);
    if (reached) waiter.resolve();
    else waiter.reject(waiter.signal?.reason);
  }
}
