import type { Logger } from "pino";

/** One loaded thing that takes memory and can be unloaded when idle. */
export interface Resident {
  key: string;
  sizeBytes: number;
  lastUsed: number;
  /** Calls in progress; a busy resident is never unloaded. */
  active: number;
  unload(): Promise<void>;
}

/**
 * Keeps the loaded models within a memory budget by unloading the least recently used idle ones.
 * Loads of the same key share one promise, so two roles naming one file load it once.
 */
export class ModelResidency<R extends Resident> {
  private readonly residents = new Map<string, R>();
  private readonly loading = new Map<string, Promise<R>>();
  /** Loads performed, per key: tests use it to show that sharing works. */
  readonly loadCounts = new Map<string, number>();
  private clock = 0;

  constructor(
    private readonly budgetBytes: number,
    private readonly logger: Logger,
  ) {}

  async acquire(key: string, estimateBytes: number, load: () => Promise<R>): Promise<R> {
    const ready = this.residents.get(key);
    if (ready) return this.touch(ready);
    const pending = this.loading.get(key);
    if (pending) return this.touch(await pending);
    const loading = (async () => {
      await this.makeRoom(estimateBytes);
      this.loadCounts.set(key, (this.loadCounts.get(key) ?? 0) + 1);
      const resident = await load();
      this.residents.set(key, resident);
      return resident;
    })();
    this.loading.set(key, loading);
    try {
      return this.touch(await loading);
    } finally {
      this.loading.delete(key);
    }
  }

  /** The loaded resident for `key`, without loading or touching it. */
  peek(key: string): R | undefined {
    return this.residents.get(key);
  }

  isLoaded(key: string): boolean {
    return this.residents.has(key);
  }

  loaded(): R[] {
    return [...this.residents.values()];
  }

  loadedKeys(): string[] {
    return [...this.residents.keys()];
  }

  usedBytes(): number {
    let total = 0;
    for (const resident of this.residents.values()) total += resident.sizeBytes;
    return total;
  }

  async unloadAll(): Promise<void> {
    const all = [...this.residents.values()];
    this.residents.clear();
    await Promise.allSettled(all.map((resident) => resident.unload()));
  }

  private touch(resident: R): R {
    resident.lastUsed = ++this.clock;
    return resident;
  }

  private async makeRoom(needed: number): Promise<void> {
    while (this.usedBytes() + needed > this.budgetBytes) {
      const idle = [...this.residents.values()].filter((resident) => resident.active === 0).sort((a, b) => a.lastUsed - b.lastUsed);
      const victim = idle[0];
      if (!victim) {
        this.logger.warn({ needed, used: this.usedBytes(), budget: this.budgetBytes }, "model memory budget exceeded: every loaded model is busy");
        return;
      }
      this.residents.delete(victim.key);
      this.logger.info({ model: victim.key, bytes: victim.sizeBytes }, "unloading the least recently used model to stay within the memory budget");
      await victim.unload();
    }
  }
}
