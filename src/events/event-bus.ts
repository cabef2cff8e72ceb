import type { Logger } from "pino";
import type { DuckEvent } from "../contracts/index.js";

export type EventHandler = (event: DuckEvent) => void | Promise<void>;

export interface SubscribeOptions {
  /** Deliver stored events from this seq first, then live ones. Without it, only live events. */
  fromSeq?: number;
}

/** After these a task sends nothing more (feedback aside). */
const FINAL_EVENTS: ReadonlySet<string> = new Set(["task-completed", "task-failed", "task-cancelled"]);

/** Reads stored events, so a subscriber can catch up before live delivery begins. */
export type StoredEventReader = (taskId: string, fromSeq: number) => DuckEvent[];

interface Subscription {
  handler: EventHandler;
  /** Highest seq delivered, per task: a live event at or below it is a duplicate and is dropped. */
  delivered: Map<string, number>;
}

/**
 * Per-task ordered fan-out of committed events. Publishing happens after the transaction commits,
 * so a subscriber never sees an event that is not stored.
 */
export class EventBus {
  private readonly byTask = new Map<string, Set<Subscription>>();
  private readonly everyTask = new Set<Subscription>();

  constructor(
    private readonly readStored: StoredEventReader,
    private readonly logger: Logger,
  ) {}

  /**
   * Subscribes to one task's events. With `fromSeq`, stored events from that seq are delivered first;
   * reading them and registering happen in one synchronous step, so no event falls in between.
   */
  subscribe(taskId: string, handler: EventHandler, options: SubscribeOptions = {}): () => void {
    const subscription: Subscription = { handler, delivered: new Map() };
    if (options.fromSeq !== undefined) {
      for (const event of this.readStored(taskId, Math.max(1, options.fromSeq))) this.deliver(subscription, event);
    }
    let set = this.byTask.get(taskId);
    if (!set) this.byTask.set(taskId, (set = new Set()));
    set.add(subscription);
    return () => {
      set.delete(subscription);
      if (set.size === 0 && this.byTask.get(taskId) === set) this.byTask.delete(taskId);
    };
  }

  /** Live events of every task (for logs and terminals); no replay. */
  subscribeAll(handler: EventHandler): () => void {
    const subscription: Subscription = { handler, delivered: new Map() };
    this.everyTask.add(subscription);
    return () => this.everyTask.delete(subscription);
  }

  publish(event: DuckEvent): void {
    const forTask = this.byTask.get(event.task_id);
    if (forTask) for (const subscription of [...forTask]) this.deliver(subscription, event);
    for (const subscription of [...this.everyTask]) {
      this.deliver(subscription, event);
      // A subscriber to every task never catches up from storage, so it needs no mark for a finished one.
      if (FINAL_EVENTS.has(event.type)) subscription.delivered.delete(event.task_id);
    }
  }

  subscriberCount(taskId: string): number {
    return this.byTask.get(taskId)?.size ?? 0;
  }

  /** What the bus holds per task: tasks with subscribers, and the delivery marks of every-task subscribers. */
  footprint(): { tasksWithSubscribers: number; everyTaskMarks: number } {
    let everyTaskMarks = 0;
    for (const subscription of this.everyTask) everyTaskMarks += subscription.delivered.size;
    return { tasksWithSubscribers: this.byTask.size, everyTaskMarks };
  }

  private deliver(subscription: Subscription, event: DuckEvent): void {
    const last = subscription.delivered.get(event.task_id) ?? 0;
    if (event.seq <= last) return;
    subscription.delivered.set(event.task_id, event.seq);
    try {
      const result = subscription.handler(event);
      if (result && typeof (result as Promise<void>).catch === "function") {
        (result as Promise<void>).catch((error: unknown) => this.reportFailure(error, event));
      }
    } catch (error) {
      this.reportFailure(error, event);
    }
  }

  private reportFailure(error: unknown, event: DuckEvent): void {
    this.logger.error({ err: error, task_id: event.task_id, seq: event.seq, type: event.type }, "event subscriber failed");
  }
}
