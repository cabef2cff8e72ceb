import type { SubmitOptions } from "./runtime-loop.js";
import type { TaskOutcome } from "./task-outcome.js";

/** A task waiting for a place to run: `done` settles with the outcome of the drive it is given when it is let in. */
export interface WaitingTask {
  options: SubmitOptions;
  done: Promise<TaskOutcome>;
  /** Lets the task in with the drive that now runs it (or the outcome it ends with while waiting). */
  begin(drive: Promise<TaskOutcome>): void;
}

/** The tasks waiting to run, first come first served. */
export class WaitingLine {
  private readonly entries = new Map<string, WaitingTask>();

  get size(): number {
    return this.entries.size;
  }

  get(taskId: string): WaitingTask | undefined {
    return this.entries.get(taskId);
  }

  /** Puts the task at the end of the line. */
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

  /** The task that has waited longest. */
  first(): string | undefined {
    return this.entries.keys().next().value;
  }

  /** 1 for the task that goes next, or null for a task not in line. */
  position(taskId: string): number | null {
    let position = 0;
    for (const id of this.entries.keys()) {
      position += 1;
      if (id === taskId) return position;
    }
    return null;
  }

  ids(): string[] {
    return [...this.entries.keys()];
  }
}
