import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { ExecutionDirective } from "../src/contracts/index.js";
import { ScriptedModelProvider, type ScriptedReply } from "../src/models/scripted-provider.js";
import { makeTempDir, useTestRuntimes } from "./helpers/test-runtime.js";
import { scriptedAgent } from "./helpers/scripted-agent.js";

const newRuntime = useTestRuntimes(afterEach);

const CHECK = `const { add } = require("./add.js");\nif (add(2, 3) !== 5) { console.error("add(2, 3) gave " + add(2, 3)); process.exit(1); }\nconsole.log("add works");\n`;

function coderModels(directive: ExecutionDirective, ...proposals: ScriptedReply[]): ScriptedModelProvider {
  return scriptedAgent({ directive, draft: "a coder step", coder: proposals });
}

const addStep = (testCommand?: string): ExecutionDirective => ({
  kind: "plan",
  goal: "an add function",
  steps: [{ id: "write-add", kind: "coder", description: "write add.js", depends_on: [], coder: { specification: "Export add(a, b) from add.js (CommonJS).", files: ["add.js"], ...(testCommand ? { test_command: testCommand } : {}) } }],
});

describe("coder steps", () => {
  it("writes the proposed files, runs the test with permission, and sends a failure back to the coder", async () => {
    const workspace = makeTempDir("ducklm-coder-");
    writeFileSync(join(workspace, "check.js"), CHECK);
    writeFileSync(join(workspace, "add.js"), "// to be written\n");
    const models = coderModels(
      addStep("node check.js"),
      { files: [{ path: "add.js", content: "exports.add = (a, b) => a - b;\n" }], notes: "first try" },
      { files: [{ path: "add.js", content: "exports.add = (a, b) => a + b;\n" }], notes: "fixed the operator" },
    );
    const runtime = newRuntime({ models, workspace });
    const paused = await runtime.loop.submit({ text: "write an add function" }).done;
    expect(paused.state).toBe("awaiting_permission");
    const request = paused.pending_permissions[0]!;
    expect(request.call).toEqual({ tool: "code_apply", arguments: { files: ["add.js"], test_command: "node check.js" } });
    expect(request.commands).toEqual(["node check.js"]);
    // Nothing is written before the user answers.
    expect(readFileSync(join(workspace, "add.js"), "utf8")).toBe("// to be written\n");

    const done = await runtime.loop.resolvePermission(paused.task_id, request.request_id, "allow_always").done;
    expect(done.state).toBe("completed");
    expect(readFileSync(join(workspace, "add.js"), "utf8")).toBe("exports.add = (a, b) => a + b;\n");

    const events = runtime.store.listEvents(paused.task_id);
    const results = events.filter((event) => event.type === "tool-result").map((event) => event.payload as { attempt: number; result: { ok: boolean; exit_code: number; output: string } });
    expect(results.map((entry) => [entry.attempt, entry.result.ok, entry.result.exit_code])).toEqual([[1, false, 1], [2, true, 0]]);
    expect(results[0]!.result.output).toContain("add(2, 3) gave -1");
    expect(results[0]!.result.output).toContain("-// to be written");
    expect(results[1]!.result.output).toContain("add works");
    // The second attempt's prompt carries the first attempt's test output; the approval was remembered.
    const coderPrompts = models.calls.filter((call) => call.role === "coder").map((call) => call.prompt);
    expect(coderPrompts).toHaveLength(2);
    expect(coderPrompts[0]).toContain("// to be written");
    expect(coderPrompts[0]).not.toContain("previous attempt");
    expect(coderPrompts[1]).toContain("Your previous attempt failed");
    expect(coderPrompts[1]).toContain("add(2, 3) gave -1");
    expect(events.filter((event) => event.type === "coder-proposed")).toHaveLength(2);
    expect(events.some((event) => event.type === "approval-used")).toBe(true);
    expect(events.filter((event) => event.type === "permission-requested")).toHaveLength(1);
  });

  it.each([
    { written: "run.sh", test: "bash run.sh", script: "run.sh" },
    // Written through a link to a folder, run by the folder's own name.
    { written: "linked/run.sh", test: "bash real/run.sh", script: "real/run.sh" },
    // Run after a cd.
    { written: "real/run.sh", test: "cd real && bash run.sh", script: "real/run.sh" },
  ])("judges the test command by the files the coder is about to write: $test after writing $written is asked about as rewritten", async ({ written, test, script }) => {
    const workspace = makeTempDir("ducklm-coder-");
    mkdirSync(join(workspace, "real"));
    symlinkSync(join(workspace, "real"), join(workspace, "linked"));
    writeFileSync(join(workspace, script), "echo test\n");
    mkdirSync(join(workspace, "victimdir"));
    writeFileSync(join(workspace, "victimdir", "keep.txt"), "keep\n");
    const directive: ExecutionDirective = {
      kind: "plan",
      goal: "a test script",
      steps: [{ id: "write-test", kind: "coder", description: "write the script", depends_on: [], coder: { specification: "Write the script.", files: [written], test_command: test } }],
    };
    const models = coderModels(directive, { files: [{ path: written, content: "rm -r victimdir; head -c 60 /etc/shadow\n" }], notes: "" });
    const runtime = newRuntime({ models, workspace });
    // Unknown commands approved in advance: what the script will hold is no_always, asked however.
    const paused = await runtime.loop.submit({ text: "write a test script", auto_approve: ["unknown"] }).done;
    expect(paused.state).toBe("awaiting_permission");
    const request = paused.pending_permissions[0]!;
    expect(request.category).toBe("no_always");
    expect(request.commands).toContain("rm -r victimdir");
    expect(request.commands).not.toContain("echo test");
    expect(request.ran_files).toContain(script);
    // Nothing written, nothing removed, before the answer.
    expect(readFileSync(join(workspace, script), "utf8")).toBe("echo test\n");
    expect(readFileSync(join(workspace, "victimdir", "keep.txt"), "utf8")).toBe("keep\n");
    await runtime.loop.resolvePermission(paused.task_id, request.request_id, "deny").done;
    expect(readFileSync(join(workspace, "victimdir", "keep.txt"), "utf8")).toBe("keep\n");
  });

  it("writes files inside the workspace without asking when there is no test command", async () => {
    const models = coderModels(addStep(), { files: [{ path: "src/add.js", content: "exports.add = (a, b) => a + b;\n" }], notes: "" });
    const runtime = newRuntime({ models });
    const outcome = await runtime.loop.submit({ text: "write add" }).done;
    expect(outcome.state).toBe("completed");
    expect(readFileSync(join(runtime.workspace, "src/add.js"), "utf8")).toContain("a + b");
  });

  it("refuses a proposed path outside the workspace and writes nothing there", async () => {
    const outside = makeTempDir("ducklm-outside-");
    const models = coderModels(addStep(), { files: [{ path: join(outside, "evil.js"), content: "bad" }, { path: "../escape.js", content: "bad" }], notes: "" });
    // Retries allowed: a path outside the workspace is not something another attempt changes.
    const runtime = newRuntime({ models, runtime: { retry: { max_step_retries: 2 } } });
    const outcome = await runtime.loop.submit({ text: "write add" }).done;
    expect(outcome.state).toBe("failed");
    const events = runtime.store.listEvents(outcome.task_id);
    const result = events.find((event) => event.type === "tool-result")!.payload as { result: { ok: boolean; output: string; error: { code: string } } };
    expect(result.result.ok).toBe(false);
    expect(result.result.output).toContain("DUCK_ERR_PATH_OUTSIDE_WORKSPACE");
    expect(result.result.error.code).toBe("DUCK_ERR_PATH_OUTSIDE_WORKSPACE");
    expect(events.filter((event) => event.type === "step-retrying")).toEqual([]);
    expect(existsSync(join(outside, "evil.js"))).toBe(false);
    expect(existsSync(join(runtime.workspace, "..", "escape.js"))).toBe(false);
  });

  it("fails the step clearly without a coder model, and a plan cannot call code_apply by name", async () => {
    // No coder and no Thinker to stand in for it (ROLE_FALLBACKS): only the JSON compiler.
    const models = scriptedAgent({ directive: addStep(), draft: null, verdict: () => "fail" });
    const runtime = newRuntime({ models });
    const outcome = await runtime.loop.submit({ text: "write add" }).done;
    expect(outcome.state).toBe("failed");
    expect(JSON.stringify(runtime.store.listEvents(outcome.task_id))).toContain("DUCK_ERR_MODEL_UNAVAILABLE");
    expect(runtime.tools.names()).not.toContain("code_apply");
    expect(runtime.tools.catalogue().map((tool) => tool.name)).not.toContain("code_apply");
  });
});
