import { readFileSync, writeFileSync } from "node:fs";
import { EventSchema, type DuckEvent } from "../contracts/index.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";

/**
 * Reads a recorded task: JSON lines of events (the format `ducklm events --json` prints and archives
 * use; an archive's first line, `{"task": …}`, is skipped).
 */
export function readRecording(file: string): DuckEvent[] {
  const events: DuckEvent[] = [];
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" ? "no such file" : code === "EISDIR" ? "a folder, not a recording" : code === "EACCES" ? "not readable (permission denied)" : (error as Error).message;
    throw new DuckError(ErrorCode.InvalidInput, `${file}: ${why}`);
  }
  const lines = text.split("\n").filter((line) => line.trim() !== "");
  lines.forEach((line, index) => {
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw new DuckError(ErrorCode.InvalidInput, `${file}:${index + 1}: not JSON`);
    }
    if (value && typeof value === "object" && "task" in value && !("seq" in value)) return;
    const parsed = EventSchema.safeParse(value);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const field = issue?.path.length ? `${issue.path.join(".")} ` : "";
      throw new DuckError(ErrorCode.InvalidInput, `${file}:${index + 1}: not an event of a task (${field}${issue?.code === "invalid_type" && issue.message.endsWith("received undefined") ? "is missing" : (issue?.message ?? "invalid")}): give a file written by \`ducklm events --json\` or an archive`);
    }
    events.push(parsed.data);
  });
  if (events.length === 0) throw new DuckError(ErrorCode.InvalidInput, `${file}: no events`);
  return events;
}

export function writeRecording(file: string, events: readonly DuckEvent[]): void {
  writeFileSync(file, `${events.map((event) => JSON.stringify(event)).join("\n")}\n`);
}
