// Embeds DuckLM in a script: submits a task, streams its events, answers its permission request.
// Run it from a project that has `ducklm` installed: `npx tsx embed-ducklm.ts` (or compile it).
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDuckLM, type TypedEvent } from "ducklm";

const home = mkdtempSync(join(tmpdir(), "ducklm-example-home-"));
const workspace = mkdtempSync(join(tmpdir(), "ducklm-example-ws-"));
writeFileSync(join(workspace, "notes.txt"), "ducks like bread\n");

// No model here: DuckLM acts on explicit requests such as run `…` and read file …
const ducklm = await createDuckLM({ home, workspace, models: false, integrations: false });
await ducklm.start();

const describe = (event: TypedEvent): string => {
  switch (event.type) {
    case "tool-called":
      return `runs ${event.payload.call.tool} ${JSON.stringify(event.payload.call.arguments)}`;
    case "permission-requested":
      return `asks: ${event.payload.commands.join(" ; ")} [${event.payload.category}]`;
    case "task-completed":
      return `answer: ${event.payload.answer.trim()}`;
    default:
      return event.type;
  }
};

// Confined, cp would run unasked; `rm -f` is asked every time (permissions.json no_always), so DuckLM asks.
const handle = ducklm.submit({ text: "run `cp notes.txt copy.txt && rm -f notes.txt && cat copy.txt`" });
const unsubscribe = ducklm.subscribe(handle.taskId, (event) => console.log(`#${event.seq} ${describe(event)}`));
let outcome = await handle.done;
for (const request of outcome.pending_permissions) {
  console.log(`allowing once: ${request.commands.join(" ; ")}`);
  outcome = await ducklm.answerPermission(handle.taskId, request.request_id, "allow").done;
}
unsubscribe();
console.log(`task ${outcome.task_id} ${outcome.state}`);
await ducklm.close();
process.exitCode = outcome.state === "completed" ? 0 : 1;
