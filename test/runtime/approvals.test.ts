import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type TestRuntime, useTestRuntimes } from "../helpers/test-runtime.js";

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
});
