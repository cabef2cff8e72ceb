import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createTestRuntime, makeTempDir, useTestRuntimes } from "../helpers/test-runtime.js";
import { unconfinedShell } from "../../src/tools/shell-sandbox.js";

const setup = useTestRuntimes(afterEach);

describe("without any model (IntentParser mode)", () => {
  it("reads a file the user names", async () => {
    const runtime = setup();
    writeFileSync(join(runtime.workspace, "notes.md"), "# Notes\nfirst line\nsecond line\n");
    const outcome = await runtime.loop.submit({ text: "read file notes.md" }).done;
    expect(outcome.state).toBe("completed");
    expect(outcome.answer).toContain("# Notes\nfirst line");
  });

  it("runs an explicit safe command and returns its output", async () => {
    const runtime = setup();
    const outcome = await runtime.loop.submit({ text: "run `echo hello from shell`" }).done;
    expect(outcome.state).toBe("completed");
    expect(outcome.answer).toBe("hello from shell\n");
  });

  it("answers honestly that no model is configured for anything else", async () => {
    const runtime = setup();
    const handle = runtime.loop.submit({ text: "What is the capital of France?" });
    const outcome = await handle.done;
    expect(outcome.state).toBe("completed");
    expect(outcome.answer).toMatch(/No language model is configured/);
    expect(outcome.answer).toMatch(/`ducklm setup` downloads a small one for every role/);
    const decided = runtime.store.listEvents(handle.taskId).find((event) => event.type === "directive-decided");
    expect(decided?.payload.source).toBe("no-model");
  });

  it("remembers a fact and recalls it in a later task", async () => {
    const runtime = setup();
    expect((await runtime.loop.submit({ text: "remember that the staging server is called heron" }).done).state).toBe("completed");
    const handle = runtime.loop.submit({ text: "what do you remember about staging?" });
    const outcome = await handle.done;
    expect(outcome.answer).toContain("the staging server is called heron");
  });

  it("keeps a fact the user states about themselves, as a memory-written event", async () => {
    const runtime = setup();
    const handle = runtime.loop.submit({ text: "I prefer bash over zsh" });
    await handle.done;
    const written = runtime.store.listEvents(handle.taskId).filter((event) => event.type === "memory-written");
    expect(written).toHaveLength(1);
    expect(runtime.memory.store.get(written[0]!.payload.memory_id as number)?.text).toMatch(/I prefer bash/);
  });

  it("refuses to read outside the workspace", async () => {
    const runtime = setup();
    const outcome = await runtime.loop.submit({ text: "read file ../../../../etc/passwd" }).done;
    expect(outcome.state).toBe("failed");
    expect(outcome.error?.code).toBe("DUCK_ERR_PATH_OUTSIDE_WORKSPACE");
  });
});

describe("permission requests pause a task", () => {
  it("waits for an unknown command, then finishes when allowed", async () => {
    const runtime = setup();
    const handle = runtime.loop.submit({ text: "run `awk 'BEGIN{printf \"a%sb\", \"x\"}' > made.txt`" });
    const paused = await handle.done;
    expect(paused.state).toBe("awaiting_permission");
    expect(runtime.store.getTask(handle.taskId)?.state).toBe("awaiting_permission");
    expect(existsSync(join(runtime.workspace, "made.txt"))).toBe(false);
    const [request] = paused.pending_permissions;
    expect(request?.category).toBe("unknown");
    const finished = await runtime.loop.resolvePermission(handle.taskId, request!.request_id, "allow").done;
    expect(finished.state).toBe("completed");
    expect(readFileSync(join(runtime.workspace, "made.txt"), "utf8")).toBe("axb");
    // Answering twice is harmless.
    const again = await runtime.loop.resolvePermission(handle.taskId, request!.request_id, "allow").done;
    expect(again.state).toBe("completed");
  });

  it("fails the step without running it when denied", async () => {
    const runtime = setup();
    const handle = runtime.loop.submit({ text: "run `cp /dev/null denied.txt; echo done`" });
    const paused = await handle.done;
    const outcome = await runtime.loop.resolvePermission(handle.taskId, paused.pending_permissions[0]!.request_id, "deny").done;
    expect(outcome.state).toBe("failed");
    expect(outcome.error?.code).toBe("DUCK_ERR_PERMISSION_DENIED");
    expect(existsSync(join(runtime.workspace, "denied.txt"))).toBe(false);
    const started = runtime.store.listEvents(handle.taskId).filter((event) => event.type === "step-started");
    expect(started).toHaveLength(1);
  });

  it("refuses an answer meant for another task", async () => {
    const runtime = setup();
    const first = runtime.loop.submit({ text: "run `cp a.txt b.txt`" });
    const second = runtime.loop.submit({ text: "run `cp c.txt d.txt`" });
    const [pausedFirst] = await Promise.all([first.done, second.done]);
    expect(() => runtime.loop.resolvePermission(second.taskId, pausedFirst.pending_permissions[0]!.request_id, "allow")).toThrow(/no open permission request/);
    expect(runtime.store.getTask(second.taskId)?.state).toBe("awaiting_permission");
  });

  it("refuses an answer to an unknown request", async () => {
    const runtime = setup();
    const handle = runtime.loop.submit({ text: "run `cp a.txt b.txt`" });
    await handle.done;
    expect(() => runtime.loop.resolvePermission(handle.taskId, "not-a-request", "allow")).toThrow(/no open permission request/);
  });

  it("survives a restart while paused and finishes when approved afterwards", async () => {
    const home = makeTempDir();
    const workspace = makeTempDir("ducklm-ws-");
    const first = createTestRuntime({ home, workspace });
    const handle = first.loop.submit({ text: "run `awk 'BEGIN{print \"resumed\"}' > after-restart.txt`" });
    const paused = await handle.done;
    const requestId = paused.pending_permissions[0]!.request_id;
    await first.close();

    const second = setup({ home, workspace });
    expect(second.store.getTask(handle.taskId)?.state).toBe("awaiting_permission");
    const outcome = await second.loop.resolvePermission(handle.taskId, requestId, "allow").done;
    expect(outcome.state).toBe("completed");
    expect(readFileSync(join(workspace, "after-restart.txt"), "utf8")).toBe("resumed\n");
    const seqs = second.store.listEvents(handle.taskId).map((event) => event.seq);
    expect(seqs).toEqual(seqs.map((_, index) => index + 1));
  });

  it("asks before running again a command that timed out part-way, instead of re-running it", async () => {
    const runtime = setup({ runtime: { timeouts: { step_ms: 800 }, retry: { max_step_retries: 1 } } });
    const handle = runtime.loop.submit({ text: "run `cp /dev/null started.txt; sleep 5; cp /dev/null finished.txt`", auto_approve: ["unknown"] });
    const outcome = await handle.done;
    expect(outcome.state).toBe("awaiting_permission");
    expect(outcome.pending_permissions[0]?.reason).toMatch(/timed out and may have done part of its work/);
    const types = runtime.store.listEvents(handle.taskId).map((event) => event.type);
    expect(types.filter((type) => type === "tool-called")).toHaveLength(1);
    expect(existsSync(join(runtime.workspace, "started.txt"))).toBe(true);
    expect(existsSync(join(runtime.workspace, "finished.txt"))).toBe(false);
    runtime.loop.cancel(handle.taskId);
  });

  it("re-runs a timed-out command of a safe shape without asking", async () => {
    const runtime = setup({ runtime: { timeouts: { step_ms: 500 }, retry: { max_step_retries: 1 } } });
    const outcome = await runtime.loop.submit({ text: "run `sleep 3`" }).done;
    expect(outcome.state).toBe("failed");
    expect(runtime.store.listEvents(outcome.task_id).filter((event) => event.type === "tool-called")).toHaveLength(2);
  });

  it("cancels a task that waits for permission", async () => {
    const runtime = setup();
    const handle = runtime.loop.submit({ text: "run `cp a.txt b.txt`" });
    await handle.done;
    runtime.loop.cancel(handle.taskId);
    expect(runtime.store.getTask(handle.taskId)?.state).toBe("cancelled");
  });
});

describe("where commands cannot be confined", () => {
  it("asks before every command, however safe its shape, and records why", async () => {
    const runtime = setup({ sandbox: unconfinedShell });
    const outcome = await runtime.loop.submit({ text: "run `ls`" }).done;
    expect(outcome.state).toBe("awaiting_permission");
    expect(outcome.pending_permissions[0]?.reason).toMatch(/cannot be confined here \(no bubblewrap\)/);
    const started = runtime.store.listEvents(outcome.task_id).find((event) => event.type === "task-started");
    expect(started?.payload).toMatchObject({ confinement: "none" });
    // Pre-approval does not make it unattended either.
    expect((await runtime.loop.submit({ text: "run `cp a b`", auto_approve: ["unknown"] }).done).state).toBe("awaiting_permission");
  });

  it("runs commands of a safe shape when confinement was turned off on purpose", async () => {
    const runtime = setup({ sandbox: { ...unconfinedShell, confinement: "off" } });
    const outcome = await runtime.loop.submit({ text: "run `ls`" }).done;
    expect(outcome.state).toBe("completed");
  });
});
