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
 * The tasks waiting to run, fair between conversations: the next one in is the longest-waiting task
 * of the conversation with the fewest tasks running, so one conversation that sends twenty tasks does
 * not hold up another's one. Within a conversation, first come first served. A task with no session
 * is a conversation of its own.
 *
 * Each waiting task has a level: how many tasks of its conversation run now, plus how many of the
 * conversation's waiting tasks are ahead of it. Letting in the lowest level first (earliest arrival
 * among equals) is the same as always choosing the conversation with the fewest running, and it
 * gives every task its place in line in one pass.
 */
export class WaitingLine {
  private readonly entries = new Map<string, WaitingTask>();

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

  /** The task to let in next, given the tasks running now. */
  next(running: Iterable<string>): string | undefined {
    let best: { id: string; level: number } | undefined;
    for (const candidate of this.levels(running)) if (!best || candidate.level < best.level) best = candidate;
    return best?.id;
  }

  /** 1 for the task that goes next, or null for a task not in line. */
  position(taskId: string, running: Iterable<string>): number | null {
    const levels = this.levels(running);
    const index = levels.findIndex((candidate) => candidate.id === taskId);
    if (index < 0) return null;
    const own = levels[index]!.level;
    // Ahead: every lower level, and equal levels that arrived earlier.
    return 1 + levels.filter((candidate, other) => candidate.level < own || (candidate.level === own && other < index)).length;
  }

  ids(): string[] {
    return [...this.entries.keys()];
  }

  /** The waiting tasks in arrival order, each with its level. */
  private levels(running: Iterable<string>): Array<{ id: string; level: number }> {
    const counts = new Map<string, number>();
    for (const id of running) {
      const conversation = this.conversationOf(id);
      counts.set(conversation, (counts.get(conversation) ?? 0) + 1);
    }
    const levels: Array<{ id: string; level: number }> = [];
    for (const id of this.entries.keys()) {
      const conversation = this.conversationOf(id);
      const level = counts.get(conversation) ?? 0;
      counts.set(conversation, level + 1);
      levels.push({ id, level });
    }
    return levels;
  }
}
