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
exec "$@"
`;

const CANARY = "canary-Pw-7f3a9c1e-do-not-store";
const originalPath = process.env.PATH;
afterAll(() => {
  process.env.PATH = originalPath;
});

function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true }).map((entry) => join(dir, String(entry)));
}

describe("a sudo password given through the secrets API", () => {
  it("reaches sudo through the askpass helper and is found nowhere afterwards", async () => {
    const fakeBin = makeTempDir("ducklm-fake-sudo-");
    writeFileSync(join(fakeBin, "sudo"), FAKE_SUDO);
    chmodSync(join(fakeBin, "sudo"), 0o755);
    writeFileSync(join(fakeBin, "expected"), CANARY);
    process.env.PATH = `${fakeBin}:${originalPath}`;

    const home = makeTempDir("ducklm-secret-home-");
    mkdirSync(join(home, "logs"), { recursive: true });
    const runtime = createTestRuntime({ home });
    const streamed: string[] = [];
    runtime.bus.subscribeAll((event: DuckEvent) => void streamed.push(JSON.stringify(event)));

    const handle = runtime.loop.submit({ text: "run `sudo whoami`" });
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

    // Nowhere: not in the events, the stream, the database file or its WAL, nor the logs.
    const events = runtime.store.listEvents(handle.taskId).map((event) => JSON.stringify(event)).join("\n");
    expect(events).not.toContain(CANARY);
    expect(streamed.join("\n")).not.toContain(CANARY);
    expect(streamed.join("\n")).toContain("secret-provided");
    const onDiskWhileOpen = ["ducklm.sqlite3", "ducklm.sqlite3-wal", "ducklm.sqlite3-shm"].map((name) => join(home, name)).filter(existsSync);
    expect(onDiskWhileOpen.length).toBeGreaterThanOrEqual(2);
    for (const file of onDiskWhileOpen) expect(readFileSync(file).includes(Buffer.from(CANARY)), file).toBe(false);
    await runtime.dispose();
    const files = [...filesUnder(home), ...filesUnder(runtime.workspace)].filter((file) => statSync(file).isFile());
    expect(files.some((file) => file.endsWith("ducklm.log"))).toBe(true);
    for (const file of files) expect(readFileSync(file).includes(Buffer.from(CANARY)), file).toBe(false);
    // The askpass folder is gone.
    expect(readdirSync("/tmp").filter((name) => name.startsWith("ducklm-askpass-"))).toEqual([]);
  });

  it("refuses an answer to a request that does not exist", async () => {
    const runtime = createTestRuntime();
    const handle = runtime.loop.submit({ text: "run `echo hi`" });
    await handle.done;
    expect(() => runtime.loop.provideSecret(handle.taskId, "nope", "pw")).toThrow(/no open secret request/);
    await runtime.dispose();
  });
});
