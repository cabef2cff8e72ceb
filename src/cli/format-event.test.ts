import { describe, expect, it } from "vitest";
import type { DuckEvent } from "../contracts/index.js";
import { askedAbout, createEventFormatter } from "./format-event.js";

let seq = 0;
const event = (type: string, payload: Record<string, unknown>, taskId = "t1"): DuckEvent => ({ task_id: taskId, seq: (seq += 1), type: type as DuckEvent["type"], time: "2026-12-01T00:00:00.000Z", payload });

describe("the CLI's account of a task", () => {
  it("says a completed task had failed steps on the way, so a model's claim of success is not the only word", () => {
    const format = createEventFormatter();
    format(event("step-failed", { step_id: "step-1", attempt: 1, recovery: "continue", reason: "command exited with 2" }));
    const completed = format(event("task-completed", { answer: "All good: the command succeeded." }));
    expect(completed).toBe("✔ completed, though a step failed on the way (step-1)\n\nAll good: the command succeeded.");
    // Another task, with nothing failed, reads as before.
    expect(format(event("task-completed", { answer: "done" }, "t2"))).toBe("✔ completed\n\ndone");
    // And the first task's failures are not carried over to its next run in the same session.
    expect(format(event("task-completed", { answer: "again" }))).toBe("✔ completed\n\nagain");
  });
});

describe("the CLI's transcript of model output", () => {
  it("shows an output that came whole, without deltas, as it shows a streamed one", async () => {
    const { createEventPrinter } = await import("./follow-task.js");
    const transcript = (events: DuckEvent[]) => {
      let written = "";
      const print = createEventPrinter(false, (text) => (written += text));
      for (const each of events) print(each);
      return written;
    };
    const streamed = transcript([
      event("model-output-started", { role: "thinker", purpose: "draft" }),
      event("model-output-delta", { role: "thinker", purpose: "draft", text: "I will " }),
      event("model-output-delta", { role: "thinker", purpose: "draft", text: "read it." }),
      event("model-output-completed", { role: "thinker", purpose: "draft", text: "I will read it." }),
    ]);
    const whole = transcript([
      event("model-output-started", { role: "thinker", purpose: "draft" }),
      event("model-output-completed", { role: "thinker", purpose: "draft", text: "I will read it." }),
    ]);
    expect(streamed).toBe("  thinker (draft):\nI will read it.\n");
    expect(whole).toBe(streamed);
  });
});

describe("askedAbout", () => {
  it("shows the command exactly as it would run, with the commands found in it when there is more than that one", () => {
    const shell = (command: string) => ({ tool: "shell_exec", arguments: { command } });
    expect(askedAbout({ call: shell("sudo ls"), commands: ["ls", "sudo"] })).toBe("sudo ls  (it runs: ls · sudo)");
    const quoted = `python3 -c "import os; print(1)" && echo "a;b"`;
    expect(askedAbout({ call: shell(quoted), commands: ["python3 -c import os; print(1)", "echo a;b"] })).toBe(`${quoted}  (it runs: python3 -c import os; print(1) · echo a;b)`);
    expect(askedAbout({ call: shell("cp a.txt b.txt"), commands: ["cp a.txt b.txt"] })).toBe("cp a.txt b.txt");
    expect(askedAbout({ call: { tool: "file_write", arguments: { path: "x.txt" } }, commands: [] })).toBe('file_write {"path":"x.txt"}');
  });

  it("says a failed command's exit code once", () => {
    const format = createEventFormatter();
    const failed = format(event("tool-result", { step_id: "step-1", attempt: 1, result: { tool: "shell_exec", ok: false, output: "", exit_code: 1, error: { code: "DUCK_ERR_TOOL_FAILED", message: "command exited with 1" }, truncated: false, duration_ms: 12 } }));
    expect(failed).toBe("    ← DUCK_ERR_TOOL_FAILED: command exited with 1 (12 ms)");
    const passed = format(event("tool-result", { step_id: "step-2", attempt: 1, result: { tool: "shell_exec", ok: true, output: "", exit_code: 0, truncated: false, duration_ms: 3 } }));
    expect(passed).toBe("    ← ok exit 0 (3 ms)");
  });
});
