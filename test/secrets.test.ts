import { tmpdir } from "node:os";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { DuckEvent } from "../src/contracts/index.js";
import { createTestRuntime, makeTempDir } from "./helpers/test-runtime.js";

// A stand-in for sudo: it insists on -A, asks the askpass helper, checks the password, and then (badly)
// echoes it, so that redaction is tested too.
const FAKE_SUDO = `#!/bin/sh
[ "$1" = "-A" ] || { echo "fake sudo: expected -A" >&2; exit 9; }
shift
password=$("$SUDO_ASKPASS" "password:")
expected=$(cat "$(dirname "$0")/expected")
[ "$password" = "$expected" ] || { echo "fake sudo: wrong password" >&2; exit 1; }
echo "fake sudo: authenticated with $password"
# A leaky program could print the password encoded: every such form must be caught too.
printf 'b64 %s\n' "$(printf '%s' "$password" | base64 -w0)"
printf 'b64-shifted %s\n' "$(printf 'x%s' "$password" | base64 -w0)"
printf 'hex %s\n' "$(printf '%s' "$password" | od -An -tx1 | tr -d ' \n')"
printf 'rev %s\n' "$(printf '%s' "$password" | rev)"
exec "$@"
`;

const CANARY = "canary-Pw-7f3a9c1e-do-not-store";
/** The canary as it would look if something printed it encoded. */
const CANARY_FORMS = [
  CANARY,
  Buffer.from(CANARY).toString("base64").slice(0, 40),
  Buffer.from(`x${CANARY}`).toString("base64").slice(4, 40),
  Buffer.from(CANARY).toString("hex"),
  [...CANARY].reverse().join(""),
];
const originalPath = process.env.PATH;
afterAll(() => {
  process.env.PATH = originalPath;
});

function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true }).map((entry) => join(dir, String(entry)));
}

/** Puts the stand-in sudo first on DuckLM's PATH: the relay finds it as the real one. */
function installFakeSudo(): void {
  const fakeBin = makeTempDir("ducklm-fake-sudo-");
  writeFileSync(join(fakeBin, "sudo"), FAKE_SUDO);
  chmodSync(join(fakeBin, "sudo"), 0o755);
  writeFileSync(join(fakeBin, "expected"), CANARY);
  process.env.PATH = `${fakeBin}:${originalPath}`;
}

describe("a sudo password given through the secrets API", () => {
  it("reaches sudo through the askpass helper and is found nowhere afterwards", async () => {
    const privateFolders = () => readdirSync(tmpdir()).filter((name) => name.startsWith("ducklm-askpass-") || name.startsWith("ducklm-sudo-"));
    const before = privateFolders();
    installFakeSudo();

    const home = makeTempDir("ducklm-secret-home-");
    mkdirSync(join(home, "logs"), { recursive: true });
    const runtime = createTestRuntime({ home });
    const streamed: string[] = [];
    runtime.bus.subscribeAll((event: DuckEvent) => void streamed.push(JSON.stringify(event)));

    // The rest of the command line runs confined and never sees the helper or its folder.
    const handle = runtime.loop.submit({ text: "run `sudo whoami; echo \"askpass=[$SUDO_ASKPASS]\"; ls /tmp | grep -c askpass || true`" });
    const asked = await handle.done;
    expect(asked.pending_permissions[0]?.category).toBe("no_always");
    const needsPassword = await runtime.loop.resolvePermission(handle.taskId, asked.pending_permissions[0]!.request_id, "allow").done;
    expect(needsPassword.state).toBe("awaiting_permission");
    const [secretRequest] = needsPassword.pending_secrets;
    expect(secretRequest?.kind).toBe("sudo_password");

    const outcome = await runtime.loop.provideSecret(handle.taskId, secretRequest!.request_id, CANARY).done;
    expect(outcome.state, JSON.stringify(outcome.error)).toBe("completed");
    expect(outcome.answer).toContain("fake sudo: authenticated with [redacted]");
    expect(outcome.answer).toContain("root");
    expect(outcome.answer).toContain("askpass=[]");
    expect(outcome.answer).toMatch(/b64 \S*\[redacted\]/);
    expect(outcome.answer).toMatch(/hex \S*\[redacted\]/);
    expect(outcome.answer).toMatch(/rev \S*\[redacted\]/);
    expect(outcome.answer).toMatch(/b64-shifted \S*\[redacted\]/);
    expect(outcome.answer).toMatch(/\n0\n/);

    // Nowhere: not in the events, the stream, the database file or its WAL, nor the logs.
    const events = runtime.store.listEvents(handle.taskId).map((event) => JSON.stringify(event)).join("\n");
    for (const form of CANARY_FORMS) {
      expect(events, form).not.toContain(form);
      expect(streamed.join("\n"), form).not.toContain(form);
    }
    expect(streamed.join("\n")).toContain("secret-provided");
    const onDiskWhileOpen = ["ducklm.sqlite3", "ducklm.sqlite3-wal", "ducklm.sqlite3-shm"].map((name) => join(home, name)).filter(existsSync);
    expect(onDiskWhileOpen.length).toBeGreaterThanOrEqual(2);
    for (const file of onDiskWhileOpen) for (const form of CANARY_FORMS) expect(readFileSync(file).includes(Buffer.from(form)), `${file}: ${form}`).toBe(false);
    await runtime.dispose();
    const files = [...filesUnder(home), ...filesUnder(runtime.workspace)].filter((file) => statSync(file).isFile());
    expect(files.some((file) => file.endsWith("ducklm.log"))).toBe(true);
    for (const file of files) for (const form of CANARY_FORMS) expect(readFileSync(file).includes(Buffer.from(form)), `${file}: ${form}`).toBe(false);
    // The askpass and relay folders are gone.
    expect(privateFolders()).toEqual(before);
  });

  it("runs through the relay only the sudo commands the approved text contains", async () => {
    installFakeSudo();
    const runtime = createTestRuntime();
    writeFileSync(join(runtime.workspace, "name.txt"), "whoami\n");
    const handle = runtime.loop.submit({ text: "run `sudo true; sudo $(cat name.txt)`" });
    const asked = await handle.done;
    expect(asked.pending_permissions[0]?.category).toBe("no_always");
    const needsPassword = await runtime.loop.resolvePermission(handle.taskId, asked.pending_permissions[0]!.request_id, "allow").done;
    const outcome = await runtime.loop.provideSecret(handle.taskId, needsPassword.pending_secrets[0]!.request_id, CANARY).done;
    const result = runtime.store.listEvents(handle.taskId).find((event) => event.type === "tool-result")?.payload.result as { output: string };
    expect(result.output, JSON.stringify(result)).toContain("sudo whoami was not part of the approved command; not run");
    expect(result.output).toContain("fake sudo: authenticated with [redacted]");
    expect(result.output).not.toMatch(/^root$/m);
    // The run failed after `sudo true` had run: it is not repeated by itself, so nothing runs twice.
    expect(outcome.state).toBe("failed");
    const events = runtime.store.listEvents(handle.taskId);
    expect(events.filter((event) => event.type === "tool-called")).toHaveLength(1);
    expect(events.find((event) => event.type === "step-failed")?.payload).toMatchObject({ reason: expect.stringContaining("not run again: it ran, failed and may have changed something") });
    await runtime.dispose();
  });

  it("refuses an answer to a request that does not exist", async () => {
    const runtime = createTestRuntime();
    const handle = runtime.loop.submit({ text: "run `echo hi`" });
    await handle.done;
    expect(() => runtime.loop.provideSecret(handle.taskId, "nope", "pw")).toThrow(/no open secret request/);
    await runtime.dispose();
  });
});
