import type { Logger } from "pino";
import type { DuckEvent } from "../contracts/index.js";

export type EventHandler = (event: DuckEvent) => void | Promise<void>;

export interface SubscribeOptions {
  /** Deliver stored events from this seq first, then live ones. Without it, only live events. */
  fromSeq?: number;
}

/** After these a task sends nothing more (feedback aside). */
const FINAL_EVENTS: ReadonlySet<string> = new Set(["task-completed", "task-failed", "task-cancelled"]);

/** Reads up to `limit` stored events from `fromSeq`, so a subscriber can catch up before live delivery begins. */
export type StoredEventReader = (taskId: string, fromSeq: number, limit: number) => DuckEvent[];

/** Stored events read and delivered at a time when a subscriber catches up; the loop gets a turn between pages. */
export const CATCH_UP_PAGE = 256;

interface Subscription {
  handler: EventHandler;
  /** Highest seq delivered, per task: a live event at or below it is a duplicate and is dropped. */
  delivered: Map<string, number>;
  /** Still reading stored events: live ones are left to the next page, which holds them (they are committed). */
  catchingUp: boolean;
  /** Unsubscribed: a catch-up in progress stops. */
  closed: boolean;
  /** The seq it asked to start from, if it did: where it picks up before anything was delivered to it. */
  since?: number;
  /** One task's subscriber, which catches up from storage (a subscriber to every task never does). */
  perTask: boolean;
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
   * Subscribes to one task's events. With `fromSeq`, stored events from that seq are delivered first,
   * a page at a time (CATCH_UP_PAGE), so a task with ten thousand events is neither read into memory
   * at once nor sent in one block of the event loop. The first page is delivered before this returns.
   * While pages remain, live events are skipped: each is committed before it is published, so a later
   * page holds it. The read that finds no more pages and the switch to live delivery are one
   * synchronous step, so no event falls in between and none comes twice.
   */
  subscribe(taskId: string, handler: EventHandler, options: SubscribeOptions = {}): () => void {
    const subscription: Subscription = { handler, delivered: new Map(), catchingUp: options.fromSeq !== undefined, closed: false, perTask: true, ...(options.fromSeq !== undefined ? { since: Math.max(1, options.fromSeq) } : {}) };
    let set = this.byTask.get(taskId);
    if (!set) this.byTask.set(taskId, (set = new Set()));
    set.add(subscription);
    if (options.fromSeq !== undefined) this.catchUp(subscription, taskId, Math.max(1, options.fromSeq));
    return () => {
      subscription.closed = true;
      set.delete(subscription);
      if (set.size === 0 && this.byTask.get(taskId) === set) this.byTask.delete(taskId);
    };
  }

  /** Delivers one page of stored events from `fromSeq`, and schedules the next while pages remain. */
  private catchUp(subscription: Subscription, taskId: string, fromSeq: number): void {
    if (subscription.closed) return;
    let page: DuckEvent[];
    try {
      page = this.readStored(taskId, fromSeq, CATCH_UP_PAGE);
    } catch (error) {
      // A read that fails (a closed database) ends the catch-up; live events still arrive.
      subscription.catchingUp = false;
      this.logger.error({ err: error, task_id: taskId, from_seq: fromSeq }, "reading stored events for a subscriber failed");
      return;
    }
    if (page.length === 0) {
      subscription.catchingUp = false;
      return;
    }
    for (const event of page) this.deliver(subscription, event, true);
    const next = page.at(-1)!.seq + 1;
    // A short page is the end, unless a handler caused events while it ran: read once more, at once,
    // until a read finds nothing; a full page lets the loop take a turn first.
    if (page.length < CATCH_UP_PAGE) this.catchUp(subscription, taskId, next);
    else setImmediate(() => this.catchUp(subscription, taskId, next));
  }

  /**
   * Live events of every task (for logs and terminals); no replay. On a shared PostgreSQL database
   * that includes the events other processes commit, read from storage when their notice comes.
   */
  subscribeAll(handler: EventHandler): () => void {
    const subscription: Subscription = { handler, delivered: new Map(), catchingUp: false, closed: false, perTask: false };
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

  /**
   * Another process committed events `from`…`to` of a task (a PostgreSQL notice): each subscriber to
   * it reads what it has not had yet from storage, in order. A subscriber still catching up reads
   * them on its next page anyway.
   */
  committedElsewhere(taskId: string, from: number, to: number): void {
    if (this.everyTask.size > 0 && to !== Number.MAX_SAFE_INTEGER) this.deliverCommittedToEveryTask(taskId, from, to);
    const forTask = this.byTask.get(taskId);
    if (!forTask) return;
    for (const subscription of [...forTask]) {
      if (subscription.catchingUp || subscription.closed) continue;
      // After what it had, or from where it asked to start; a subscriber to live events only starts at this commit.
      const delivered = subscription.delivered.get(taskId);
      const start = delivered !== undefined ? delivered + 1 : (subscription.since ?? from);
      if (start > to) continue;
      subscription.catchingUp = true;
      this.catchUp(subscription, taskId, start);
    }
  }

  /**
   * Events `from`…`to` another process committed, to the subscribers to every task: read from storage
   * in order and delivered at once (a notice covers one commit, so the range is short). Each
   * subscriber's marks drop what it already had; live delivery to them of this process's own events
   * goes on meanwhile, as nothing here yields.
   */
  private deliverCommittedToEveryTask(taskId: string, from: number, to: number): void {
    for (let seq = Math.max(1, from); seq <= to; ) {
      let page: DuckEvent[];
      try {
        page = this.readStored(taskId, seq, Math.min(CATCH_UP_PAGE, to - seq + 1));
      } catch (error) {
        this.logger.error({ err: error, task_id: taskId, from_seq: seq }, "reading another process's events for the subscribers to every task failed");
        return;
      }
      if (page.length === 0) return;
      for (const event of page) {
        if (event.seq > to) return;
        for (const subscription of [...this.everyTask]) {
          this.deliver(subscription, event, true);
          if (FINAL_EVENTS.has(event.type)) subscription.delivered.delete(event.task_id);
        }
      }
      seq = page.at(-1)!.seq + 1;
    }
  }

  /** Tasks with subscribers here: after notices may have been missed, each is read again (committedElsewhere). */
  subscribedTasks(): string[] {
    return [...this.byTask.keys()];
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

  private deliver(subscription: Subscription, event: DuckEvent, stored = false): void {
    if (subscription.catchingUp && !stored) return;
    const last = subscription.delivered.get(event.task_id) ?? 0;
    if (event.seq <= last) return;
    // A live event past the next one due (another process committed those between): what came
    // between is read from storage first, in order, and this one with it.
    const due = last > 0 ? last + 1 : subscription.since;
    if (!stored && subscription.perTask && due !== undefined && event.seq > due) {
      subscription.catchingUp = true;
      this.catchUp(subscription, event.task_id, due);
      return;
    }
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
