import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type TestRuntime, useTestRuntimes } from "../helpers/test-runtime.js";
import { scriptedAgent } from "../helpers/scripted-agent.js";
import type { ExecutionDirective } from "../../src/contracts/index.js";

const setup = useTestRuntimes(afterEach);
const types = (runtime: TestRuntime, taskId: string) => runtime.store.listEvents(taskId).map((event) => event.type);

describe("remembered approvals", () => {
  it("remember the exact command in the same directory only, as events", async () => {
    const runtime = setup();
    const first = runtime.loop.submit({ text: "run `cp a.txt b.txt || true`" });
    const paused = await first.done;
    const done = await runtime.loop.resolvePermission(first.taskId, paused.pending_permissions[0]!.request_id, "allow_always").done;
    expect(done.state).toBe("completed");
    expect(types(runtime, first.taskId)).toContain("approval-granted");
    expect(runtime.approvals.list()).toHaveLength(1);

    // Same command, same directory: runs without asking, and says which approval it used.
    const second = runtime.loop.submit({ text: "run `cp a.txt b.txt || true`" });
    expect((await second.done).state).toBe("completed");
    expect(types(runtime, second.taskId)).toContain("approval-used");
    expect(types(runtime, second.taskId)).not.toContain("permission-requested");

    // A different command, or another directory, is asked again.
    const other = runtime.loop.submit({ text: "run `cp a.txt c.txt || true`" });
    expect((await other.done).state).toBe("awaiting_permission");
    mkdirSync(join(runtime.workspace, "elsewhere"));
    const elsewhere = runtime.loop.submit({ text: "run `cp a.txt b.txt || true`", workspace: join(runtime.workspace, "elsewhere") });
    expect((await elsewhere.done).state).toBe("awaiting_permission");
  });

  it("never remember a no_always command", async () => {
    const runtime = setup();
    const first = runtime.loop.submit({ text: "run `rm -f nothing-here`" });
    const paused = await first.done;
    expect(paused.pending_permissions[0]?.category).toBe("no_always");
    await runtime.loop.resolvePermission(first.taskId, paused.pending_permissions[0]!.request_id, "allow_always").done;
    expect(runtime.approvals.list()).toHaveLength(0);
    const resolved = runtime.store.listEvents(first.taskId).find((event) => event.type === "permission-resolved");
    expect(resolved?.payload.decision).toBe("allow");
    expect((await runtime.loop.submit({ text: "run `rm -f nothing-here`" }).done).state).toBe("awaiting_permission");
  });

  it("stop applying when revoked or expired, and the revocation is an event", async () => {
    const runtime = setup();
    const first = runtime.loop.submit({ text: "run `cp x y || echo no`" });
    const paused = await first.done;
    await runtime.loop.resolvePermission(first.taskId, paused.pending_permissions[0]!.request_id, "allow_always").done;
    const [approval] = runtime.approvals.list();
    runtime.loop.revokeApproval(approval!.id, "test");
    expect(types(runtime, first.taskId)).toContain("approval-revoked");
    expect((await runtime.loop.submit({ text: "run `cp x y || echo no`" }).done).state).toBe("awaiting_permission");

    const again = runtime.loop.submit({ text: "run `cp p q || echo no`" });
    const waiting = await again.done;
    await runtime.loop.resolvePermission(again.taskId, waiting.pending_permissions[0]!.request_id, "allow_always", "test", { expiresAt: new Date(Date.now() - 1000) }).done;
    expect((await runtime.loop.submit({ text: "run `cp p q || echo no`" }).done).state).toBe("awaiting_permission");
  });

  it("lets a task approve unknown commands in advance, but never no_always or hard_stop", async () => {
    const runtime = setup();
    const unknown = await runtime.loop.submit({ text: "run `awk 'BEGIN{printf \"ok\"}' > pre.txt`", auto_approve: ["unknown"] }).done;
    expect(unknown.state).toBe("completed");
    expect(readFileSync(join(runtime.workspace, "pre.txt"), "utf8")).toBe("ok");
    expect((await runtime.loop.submit({ text: "run `rm -f pre.txt`", auto_approve: ["unknown"] }).done).state).toBe("awaiting_permission");
    expect(() => runtime.loop.submit({ text: "run `ls`", auto_approve: ["hard_stop"] })).toThrow(/auto_approve.0: Invalid option: expected one of "unknown"|"network"/);
  });

  it("hold while the script the command runs is unchanged: rewritten, it is asked about again and does not run", async () => {
    const runtime = setup();
    const script = join(runtime.workspace, "run.sh");
    const out = join(runtime.workspace, "out.txt");
    writeFileSync(script, "echo one > out.txt\n");
    const first = await runtime.loop.submit({ text: "run `bash run.sh`" }).done;
    const request = first.pending_permissions[0]!;
    expect(request.ran_files).toEqual(["run.sh"]);
    expect(request.commands).toContain("echo one");
    expect((await runtime.loop.resolvePermission(first.task_id, request.request_id, "allow_always").done).state).toBe("completed");
    expect(runtime.approvals.list()[0]!.content_digest).toBe(request.content_digest);
    expect(readFileSync(out, "utf8")).toBe("one\n");

    const unchanged = runtime.loop.submit({ text: "run `bash run.sh`" });
    expect((await unchanged.done).state).toBe("completed");
    expect(types(runtime, unchanged.taskId)).toContain("approval-used");

    // What a later step of any task may write without asking: the same command now does something else.
    writeFileSync(script, "echo two > out.txt\n");
    const rewritten = await runtime.loop.submit({ text: "run `bash run.sh`" }).done;
    expect(rewritten.state).toBe("awaiting_permission");
    expect(rewritten.pending_permissions[0]!.commands).toContain("echo two");
    expect(types(runtime, rewritten.task_id)).not.toContain("approval-used");
    expect(readFileSync(out, "utf8")).toBe("one\n");
  });

  it("give the network only when the question they answered said the command needs it", async () => {
    const runtime = setup();
    // An approval given for a command as it was asked about without the network, found for it later.
    runtime.approvals.grant({ command: "curl -s https://example.invalid/x", cwd: runtime.workspace, category: "unknown", grantedByTask: null });
    const withoutNetwork = await runtime.loop.submit({ text: "run `curl -s https://example.invalid/x`" }).done;
    expect(withoutNetwork.state).toBe("awaiting_permission");
    expect(withoutNetwork.pending_permissions[0]!.network).toBe(true);
    expect(withoutNetwork.pending_permissions[0]!.reason).toMatch(/needs the network/);
    // Answered "always" to that question, the approval carries the network with it.
    await runtime.loop.resolvePermission(withoutNetwork.task_id, withoutNetwork.pending_permissions[0]!.request_id, "allow_always").done;
    const remembered = runtime.approvals.list().find((approval) => approval.network);
    expect(remembered?.command).toBe("curl -s https://example.invalid/x");
    const granted = runtime.store.listEvents(withoutNetwork.task_id).find((event) => event.type === "approval-granted");
    expect(granted?.payload.network).toBe(true);
    const again = runtime.loop.submit({ text: "run `curl -s https://example.invalid/x`" });
    await again.done;
    expect(types(runtime, again.taskId)).toContain("approval-used");
    expect(types(runtime, again.taskId)).not.toContain("permission-requested");
  });

  it("ask again when the script changed between the question and the answer, and run neither version unasked", async () => {
    const runtime = setup();
    const script = join(runtime.workspace, "run.sh");
    writeFileSync(script, "echo shown > out.txt\n");
    const asked = await runtime.loop.submit({ text: "run `bash run.sh`" }).done;
    writeFileSync(script, "echo swapped > out.txt\n");
    const after = await runtime.loop.resolvePermission(asked.task_id, asked.pending_permissions[0]!.request_id, "allow").done;
    expect(after.state).toBe("awaiting_permission");
    expect(after.pending_permissions[0]!.reason).toMatch(/changed after it was allowed/);
    expect(after.pending_permissions[0]!.commands).toContain("echo swapped");
    expect(() => readFileSync(join(runtime.workspace, "out.txt"))).toThrow(/ENOENT/);
    expect((await runtime.loop.resolvePermission(asked.task_id, after.pending_permissions[0]!.request_id, "allow").done).state).toBe("completed");
    expect(readFileSync(join(runtime.workspace, "out.txt"), "utf8")).toBe("swapped\n");
  });

  it("let no step beside an approved script rewrite what the script runs while it runs", async () => {
    const runScript: ExecutionDirective = { kind: "tool", tool: "shell_exec", arguments: { command: "bash run.sh" }, reason: "run it" };
    const race: ExecutionDirective = {
      kind: "plan",
      goal: "run the approved script while another step rewrites what it runs",
      steps: [
        { id: "run", kind: "tool", description: "", depends_on: [], tool: "shell_exec", arguments: { command: "bash run.sh" } },
        { id: "swap", kind: "tool", description: "", depends_on: [], tool: "file_write", arguments: { path: "l.sh", content: "echo EVIL > evil.txt\n", mode: "overwrite" } },
      ],
    };
    const runtime = setup({ models: scriptedAgent({ directive: (request) => (request.prompt.includes("race") ? race : runScript), draft: "go" }) });
    writeFileSync(join(runtime.workspace, "run.sh"), "sleep 1; bash l.sh\n");
    writeFileSync(join(runtime.workspace, "l.sh"), "echo fine > fine.txt\n");
    const first = await runtime.loop.submit({ text: "run the script" }).done;
    expect(first.pending_permissions[0]!.ran_files).toEqual(["l.sh", "run.sh"]);
    await runtime.loop.resolvePermission(first.task_id, first.pending_permissions[0]!.request_id, "allow_always").done;

    const raced = await runtime.loop.submit({ text: "race" }).done;
    // Either the script ran before the rewrite, alone, or it is asked about again as rewritten: never the new text unasked.
    const evil = () => readFileSync(join(runtime.workspace, "evil.txt"), "utf8");
    if (raced.state === "awaiting_permission") expect(raced.pending_permissions[0]!.commands).toContain("echo EVIL");
    expect(evil).toThrow(/ENOENT/);
  });
});
