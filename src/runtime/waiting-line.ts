import type { SubmitOptions } from "./runtime-loop.js";
import type { TaskOutcome } from "./task-outcome.js";

/** A task waiting for a place to run: `done` settles with the outcome of the drive it is given when it is let in. */
export interface WaitingTask {
  options: SubmitOptions;
  done: Promise<TaskOutcome>;
  /** Lets the task in with the drive that now runs it (or the outcome it ends with while waiting). */
  begin(drive: Promise<TaskOutcome>): void;
}

/**
 * The tasks waiting to run, fair between conversations: the next one in belongs to the conversation
 * with the fewest tasks running, and among those to the one served least recently (a conversation
 * never served first); within a conversation, first come first served. So one conversation that
 * sends twenty tasks does not hold up another's one, even when a single place frees at a time. A
 * task with no session is a conversation of its own.
 *
 * A place in line is where the task would go in if places came free one at a time and nothing
 * finished meanwhile: the same rule, played forward.
 */
export class WaitingLine {
  private readonly entries = new Map<string, WaitingTask>();
  /** When each conversation last had a task start (a count of starts, not a time). */
  private readonly lastServed = new Map<string, number>();
  private starts = 0;

  /** `conversationOf`: a task's session, or its own id when it has none. */
  constructor(private readonly conversationOf: (taskId: string) => string) {}

  get size(): number {
    return this.entries.size;
  }

  get(taskId: string): WaitingTask | undefined {
    return this.entries.get(taskId);
  }

  /** Puts the task at the end of its conversation's part of the line. */
  add(taskId: string, options: SubmitOptions): WaitingTask {
    let begin!: (drive: Promise<TaskOutcome>) => void;
    const started = new Promise<Promise<TaskOutcome>>((resolve) => (begin = resolve));
    const entry: WaitingTask = { options, done: started.then((drive) => drive), begin };
    this.entries.set(taskId, entry);
    return entry;
  }

  /** Takes the task out of the line, wherever it is. */
  take(taskId: string): WaitingTask | undefined {
    const entry = this.entries.get(taskId);
    this.entries.delete(taskId);
    return entry;
  }

  /** Notes that a task started (let in from the line or started at once): its conversation was served. */
  started(taskId: string, running: Iterable<string>): void {
    this.starts += 1;
    this.lastServed.set(this.conversationOf(taskId), this.starts);
    // Conversations with nothing running or waiting are forgotten: coming back, they count as new.
    if (this.lastServed.size > 64 + 4 * this.entries.size) {
      const active = new Set([...running, ...this.entries.keys()].map((id) => this.conversationOf(id)));
      for (const conversation of this.lastServed.keys()) if (!active.has(conversation)) this.lastServed.delete(conversation);
    }
  }

  /** The task to let in next, given the tasks running now. */
  next(running: Iterable<string>): string | undefined {
    return this.order(running, () => true);
  }

  /** 1 for the task that goes next, or null for a task not in line. */
  position(taskId: string, running: Iterable<string>): number | null {
    if (!this.entries.has(taskId)) return null;
    let place = 0;
    this.order(running, (id) => {
      place += 1;
      return id === taskId;
    });
    return place;
  }

  ids(): string[] {
    return [...this.entries.keys()];
  }

  /**
   * Plays the rule forward, handing each task in the order it would go in to `visit` until `visit`
   * says stop; returns the task it stopped at. A heap of conversations keeps it at n log n.
   */
  private order(running: Iterable<string>, visit: (taskId: string) => boolean): string | undefined {
    const counts = new Map<string, number>();
    for (const id of running) {
      const conversation = this.conversationOf(id);
      counts.set(conversation, (counts.get(conversation) ?? 0) + 1);
    }
    const waiting = new Map<string, Array<{ id: string; arrival: number }>>();
    let arrival = 0;
    for (const id of this.entries.keys()) {
      const conversation = this.conversationOf(id);
      let queue = waiting.get(conversation);
      if (!queue) waiting.set(conversation, (queue = []));
      queue.push({ id, arrival: (arrival += 1) });
    }
    const heap = new ConversationHeap();
    for (const [conversation, queue] of waiting) heap.push({ conversation, running: counts.get(conversation) ?? 0, served: this.lastServed.get(conversation) ?? 0, arrival: queue[0]!.arrival, next: 0 });
    let starts = this.starts;
    for (let turn = heap.pop(); turn; turn = heap.pop()) {
      const queue = waiting.get(turn.conversation)!;
      const id = queue[turn.next]!.id;
      if (visit(id)) return id;
      if (turn.next + 1 < queue.length) heap.push({ ...turn, running: turn.running + 1, served: (starts += 1), arrival: queue[turn.next + 1]!.arrival, next: turn.next + 1 });
    }
    return undefined;
  }
}

/** A conversation's turn: its running tasks, when it was last served, and when its next task arrived. */
interface Turn {
  conversation: string;
  running: number;
  served: number;
  arrival: number;
  /** Index of its next waiting task. */
  next: number;
}

const before = (a: Turn, b: Turn) => a.running - b.running || a.served - b.served || a.arrival - b.arrival;

/** A binary min-heap of turns, the fewest running first, then the least recently served, then the earliest arrival. */
class ConversationHeap {
  private readonly items: Turn[] = [];

  push(turn: Turn): void {
    const items = this.items;
    items.push(turn);
    for (let at = items.length - 1; at > 0; ) {
      const parent = (at - 1) >> 1;
      if (before(items[parent]!, items[at]!) <= 0) break;
      [items[parent], items[at]] = [items[at]!, items[parent]!];
      at = parent;
    }
  }

  pop(): Turn | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length > 0 && last) {
      items[0] = last;
      for (let at = 0; ; ) {
        const left = 2 * at + 1;
        const right = left + 1;
        let smallest = at;
        if (left < items.length && before(items[left]!, items[smallest]!) < 0) smallest = left;
        if (right < items.length && before(items[right]!, items[smallest]!) < 0) smallest = right;
        if (smallest === at) break;
        [items[smallest], items[at]] = [items[at]!, items[smallest]!];
        at = smallest;
      }
    }
    return top;
  }
}
