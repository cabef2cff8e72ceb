import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type { DuckConfig } from "../../src/config/config-schemas.js";
import { createRuntime, type Runtime } from "../../src/runtime/create-runtime.js";
import type { DuckError } from "../../src/errors/duck-error.js";
import { makeTempDir, testConfig } from "../helpers/test-runtime.js";

const opened: Runtime[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((runtime) => runtime.close()));
});

function open(home: string, config: DuckConfig, checkPermissionExamples?: boolean): Runtime {
  const runtime = createRuntime({ home, config, workspace: makeTempDir("ducklm-ws-"), models: null, logger: pino({ level: "silent" }), ...(checkPermissionExamples === false ? { checkPermissionExamples } : {}) });
  opened.push(runtime);
  return runtime;
}

/** permissions.json with one example that its rules do not bear out. */
function withFalseExample(config: DuckConfig): DuckConfig {
  return { ...config, permissions: { ...config.permissions, examples: [...config.permissions.examples, { command: "rm -rf /", category: "normal" as const }] } };
}

const record = (home: string) => join(home, "cache", "permission-examples-checked");

describe("the check of permissions.json's examples at start", () => {
  it("stops a start whose examples do not hold, and records nothing", async () => {
    const home = makeTempDir();
    const error = await open(home, withFalseExample(testConfig())).ready().catch((caught: unknown) => caught);
    expect((error as DuckError).code).toBe("DUCK_ERR_CONFIG_INVALID");
    expect(String((error as Error).message)).toContain('"rm -rf /" is hard_stop, the example says normal');
    expect(existsSync(record(home))).toBe(false);
  });

  it("names the user's permissions.json when its rules break an example, its own or a bundled one", async () => {
    const configDir = makeTempDir("ducklm-own-rules-");
    writeFileSync(join(configDir, "permissions.json"), JSON.stringify({ categories: { normal: ["rm -rf build"] }, examples: [{ command: "rm -rf build", category: "normal" }] }));
    const error = await open(makeTempDir(), testConfig({}, configDir)).ready().catch((caught: unknown) => caught);
    expect((error as DuckError).code).toBe("DUCK_ERR_CONFIG_INVALID");
    expect(String((error as Error).message)).toContain(`${join(configDir, "permissions.json")} (laid over the bundled permissions.json): the examples of both files do not hold`);
    expect(String((error as Error).message)).toContain("rm -rf build");
  });

  it("records a passed check, and checks again when the rules change", async () => {
    const home = makeTempDir();
    await open(home, testConfig()).ready();
    const passed = readFileSync(record(home), "utf8").trim();
    expect(passed).toMatch(/^[0-9a-f]{64}$/);
    // Same home, other rules: the record does not cover them, so the false example is caught.
    const error = await open(home, withFalseExample(testConfig())).ready().catch((caught: unknown) => caught);
    expect((error as DuckError).code).toBe("DUCK_ERR_CONFIG_INVALID");
    expect(readFileSync(record(home), "utf8").trim()).toBe(passed);
  });

  it("is left out by a process that judges no command (a listing), which then starts whatever the examples say", async () => {
    const home = makeTempDir();
    const runtime = open(home, withFalseExample(testConfig()), false);
    await runtime.ready();
    expect(existsSync(record(home))).toBe(false);
  });
});
