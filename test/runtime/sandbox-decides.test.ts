import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import type { ExecutionDirective } from "../../src/contracts/index.js";
import { scriptedAgent } from "../helpers/scripted-agent.js";
import { afterEach, describe, expect, it } from "vitest";
import { unconfinedShell } from "../../src/tools/shell-sandbox.js";
import { makeTempDir, useTestRuntimes } from "../helpers/test-runtime.js";

const setup = useTestRuntimes(afterEach);
const bubblewrap = spawnSync("bwrap", ["--version"]).status === 0;

describe.skipIf(!bubblewrap)("confined, the sandbox decides (permissions.json confined: run)", () => {
  it("runs a script no rule covers without a question, and the script still cannot write outside the workspace", async () => {
    const outside = makeTempDir("ducklm-outside-");
    const runtime = setup({ confinedCommands: "run" });
    writeFileSync(join(runtime.workspace, "build.sh"), `echo built > inside.txt\necho planted > ${outside}/planted.txt 2>/dev/null || echo refused\n`);
    const outcome = await runtime.loop.submit({ text: "run `sh build.sh`" }).done;
    expect(outcome.state).toBe("completed");
    const events = runtime.store.listEvents(outcome.task_id);
    expect(events.some((event) => event.type === "permission-requested")).toBe(false);
    expect(events.find((event) => event.type === "task-started")?.payload).toMatchObject({ confined_commands: "run" });
    expect(readFileSync(join(runtime.workspace, "inside.txt"), "utf8")).toBe("built\n");
    expect(existsSync(join(outside, "planted.txt"))).toBe(false);
  });

  it("still asks, every time, before removing a folder of the workspace, and before using the network", async () => {
    const runtime = setup({ confinedCommands: "run" });
    mkdirSync(join(runtime.workspace, "src"));
    writeFileSync(join(runtime.workspace, "src", "main.c"), "int main;\n");
    const removal = await runtime.loop.submit({ text: "run `rm -rf src`" }).done;
    expect(removal.state).toBe("awaiting_permission");
    expect(removal.pending_permissions[0]).toMatchObject({ category: "no_always" });
    expect(existsSync(join(runtime.workspace, "src", "main.c"))).toBe(true);
    const fetch = await runtime.loop.submit({ text: "run `curl -s https://example.com`" }).done;
    expect(fetch.state).toBe("awaiting_permission");
    expect(fetch.pending_permissions[0]).toMatchObject({ network: true });
  });

  it("refuses the hard stops as before", async () => {
    const runtime = setup({ confinedCommands: "run" });
    writeFileSync(join(runtime.workspace, "keep.txt"), "kept\n");
    const outcome = await runtime.loop.submit({ text: "run `cd .. && rm -rf " + runtime.workspace.split("/").at(-1) + "`" }).done;
    expect(outcome.state).toBe("failed");
    expect(readFileSync(join(runtime.workspace, "keep.txt"), "utf8")).toBe("kept\n");
  });
});

describe("unconfined, with the sandbox deciding elsewhere", () => {
  it("runs safe shapes, and asks for anything else every time, with no \"always\" and no remembered approval", async () => {
    const runtime = setup({ confinedCommands: "run", sandbox: unconfinedShell });
    writeFileSync(join(runtime.workspace, "a"), "a\n");
    expect((await runtime.loop.submit({ text: "run `ls`" }).done).state).toBe("completed");
    runtime.approvals.grant({ command: "cp a b", cwd: runtime.workspace, category: "unknown", grantedByTask: null });
    const copy = await runtime.loop.submit({ text: "run `cp a b`", auto_approve: ["unknown"] }).done;
    expect(copy.state).toBe("awaiting_permission");
    expect(copy.pending_permissions[0]).toMatchObject({ category: "no_always" });
    expect(copy.pending_permissions[0]?.reason).toMatch(/no sandbox could be started here/);
    expect(existsSync(join(runtime.workspace, "b"))).toBe(false);
  });

  it("asks the same way when confinement was turned off on purpose", async () => {
    const runtime = setup({ confinedCommands: "run", sandbox: { ...unconfinedShell, confinement: "off" } });
    const outcome = await runtime.loop.submit({ text: "run `touch made-by-a-script && sh -c true`" }).done;
    expect(outcome.state).toBe("awaiting_permission");
    expect(outcome.pending_permissions[0]?.reason).toMatch(/confinement is off/);
  });
});

describe.skipIf(!bubblewrap)("writing outside the workspace, named by the command (write_outside)", () => {
  const directiveFor = (command: string, writeOutside: string[]): ExecutionDirective => ({ kind: "tool", tool: "shell_exec", arguments: { command, write_outside: writeOutside }, reason: "" });

  it("is asked every time, and once allowed the command may write there, and only there", async () => {
    const outside = makeTempDir("ducklm-write-outside-");
    const elsewhere = makeTempDir("ducklm-write-elsewhere-");
    const runtime = setup({ confinedCommands: "run", models: scriptedAgent({ directive: directiveFor(`echo built > ${outside}/out.txt; echo planted > ${elsewhere}/x.txt 2>/dev/null; true`, [outside]) }) });
    const asked = await runtime.loop.submit({ text: "build into the other folder", auto_approve: ["unknown"] }).done;
    expect(asked.state).toBe("awaiting_permission");
    expect(asked.pending_permissions[0]).toMatchObject({ category: "no_always" });
    expect(asked.pending_permissions[0]!.reason).toContain(`write outside the workspace, in ${realpathSync(outside)}`);
    expect(existsSync(join(outside, "out.txt"))).toBe(false);
    const done = await runtime.loop.resolvePermission(asked.task_id, asked.pending_permissions[0]!.request_id, "allow").done;
    expect(done.state).toBe("completed");
    expect(readFileSync(join(outside, "out.txt"), "utf8")).toBe("built\n");
    expect(existsSync(join(elsewhere, "x.txt"))).toBe(false);
  });

  it("is refused for the root, a folder holding the workspace, DuckLM's own home and a system folder", async () => {
    for (const target of ["/", "..", "HOME", "/etc", homedir()]) {
      const runtime = setup({ confinedCommands: "run", models: scriptedAgent({ directive: { kind: "respond", answer: "" } }) });
      const path = target === ".." ? dirname(runtime.workspace) : target === "HOME" ? runtime.home : target;
      runtime.context.models = scriptedAgent({ directive: directiveFor("true", [path]) });
      const outcome = await runtime.loop.submit({ text: "write there" }).done;
      const result = runtime.store.listEvents(outcome.task_id).find((event) => event.type === "tool-result")?.payload as { result: { error?: { code: string; message: string } } } | undefined;
      expect(result?.result.error?.code, target).toBe("DUCK_ERR_PERMISSION_DENIED");
      expect(result?.result.error?.message, target).toMatch(/refused: /);
    }
  });
});
