import { mkdirSync, rmSync, writeFileSync, cpSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { makeTempDir } from "../../test/helpers/test-runtime.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { BUNDLED_CONFIG_DIR, loadConfig, resolveConfigDir, resolveHomeDir } from "./load-config.js";

function copyOfBundled(): string {
  const dir = makeTempDir("ducklm-config-");
  cpSync(BUNDLED_CONFIG_DIR, dir, { recursive: true });
  return dir;
}

function loadError(dir: string, fallback?: string | null): DuckError {
  try {
    loadConfig(dir, fallback === undefined ? {} : { fallback });
  } catch (error) {
    if (DuckError.isInstance(error)) return error;
    throw error;
  }
  throw new Error("expected loadConfig to fail");
}

describe("loadConfig", () => {
  it("loads the bundled config with the seed's defaults", () => {
    const config = loadConfig(BUNDLED_CONFIG_DIR);
    expect(config.runtime.timeouts.step_ms).toBe(30_000);
    expect(config.runtime.timeouts.task_ms).toBe(300_000);
    expect(config.runtime.retrieval_top_k).toBe(5);
    expect(config.models.roles.critic?.file).toBe(config.models.roles.json_compiler?.file);
    expect(Object.keys(config.prompts).sort()).toEqual(["coder", "critic", "json_compiler", "orchestrator", "planning", "sys_util", "system", "thinker"]);
  });

  it("lets llama.cpp choose each role's backend, so a first model runs on a machine without a GPU", () => {
    const config = loadConfig(BUNDLED_CONFIG_DIR);
    const backends = Object.values(config.models.roles).map((role) => role?.backend);
    expect(backends.length).toBeGreaterThan(0);
    expect(new Set(backends)).toEqual(new Set(["auto"]));
  });

  it("names the file, the field and what was expected when a value is wrong", () => {
    const dir = copyOfBundled();
    writeFileSync(join(dir, "runtime.json"), JSON.stringify({ timeouts: { step_ms: "thirty" } }));
    const error = loadError(dir);
    expect(error.code).toBe("DUCK_ERR_CONFIG_INVALID");
    expect(error.message).toContain(join(dir, "runtime.json"));
    expect(error.message).toContain("timeouts.step_ms");
    expect(error.message).toMatch(/expected number/);
  });

  it("refuses a model server on a port fetch will never connect to, naming the field, and takes the one next to it", () => {
    const dir = copyOfBundled();
    const withServer = (base_url: string) => writeFileSync(join(dir, "models.json"), JSON.stringify({ roles: { critic: { server: { base_url, model: "judge" } } } }));
    withServer("http://127.0.0.1:9/v1");
    const error = loadError(dir);
    expect(error.message).toContain("roles.critic.server.base_url");
    expect(error.message).toMatch(/that port is one web clients refuse to connect to.*serve the model on another port/);
    withServer("http://127.0.0.1:8/v1");
    expect(loadConfig(dir).models.roles.critic?.server?.base_url).toBe("http://127.0.0.1:8/v1");
  });

  it("names a config file that is a folder, instead of a raw EISDIR", () => {
    const dir = copyOfBundled();
    rmSync(join(dir, "prompts", "critic.md"));
    mkdirSync(join(dir, "prompts", "critic.md"));
    expect(loadError(dir).message).toBe(`${join(dir, "prompts", "critic.md")} is a folder, not a file`);
    const other = copyOfBundled();
    rmSync(join(other, "runtime.json"));
    mkdirSync(join(other, "runtime.json"));
    expect(loadError(other)).toMatchObject({ code: "DUCK_ERR_CONFIG_INVALID", message: `${join(other, "runtime.json")} is a folder, not a file` });
  });

  it("reports a misspelt key instead of ignoring it", () => {
    const dir = copyOfBundled();
    writeFileSync(join(dir, "runtime.json"), JSON.stringify({ retrieval_topk: 3 }));
    expect(loadError(dir).message).toMatch(/retrieval_topk/);
  });

  it("reports a file that is not JSON", () => {
    const dir = copyOfBundled();
    writeFileSync(join(dir, "permissions.json"), "{ not json");
    const error = loadError(dir);
    expect(error.message).toContain("permissions.json");
    expect(error.message).toMatch(/not valid JSON/);
  });

  it("takes a file the user's folder lacks from the bundled defaults, and says where each came from", () => {
    const dir = makeTempDir("ducklm-config-");
    writeFileSync(join(dir, "runtime.json"), JSON.stringify({ retrieval_top_k: 3 }));
    const config = loadConfig(dir);
    expect(config.runtime.retrieval_top_k).toBe(3);
    expect(config.permissions.categories.normal.length).toBeGreaterThan(10);
    expect(config.sources?.["runtime.json"]).toBe(join(dir, "runtime.json"));
    expect(config.sources?.["permissions.json"]).toBe(join(BUNDLED_CONFIG_DIR, "permissions.json"));
    expect(config.sources?.["prompts/system.md"]).toBe(join(BUNDLED_CONFIG_DIR, "prompts", "system.md"));
  });

  it("fills defaults for a missing JSON file but requires every prompt when there is no fallback", () => {
    const dir = makeTempDir("ducklm-config-");
    mkdirSync(join(dir, "prompts"));
    for (const name of ["thinker", "json_compiler", "coder", "critic", "sys_util", "orchestrator", "planning"]) {
      writeFileSync(join(dir, "prompts", `${name}.md`), name);
    }
    const error = loadError(dir, null);
    expect(error.code).toBe("DUCK_ERR_CONFIG_MISSING");
    expect(error.message).toContain("system.md");
    writeFileSync(join(dir, "prompts", "system.md"), "system");
    expect(loadConfig(dir, { fallback: null }).runtime.retry.max_step_retries).toBe(2);
  });

  it("keeps data and config in the user's own folders, never in the directory it starts in", () => {
    expect(resolveHomeDir(undefined, { DUCKLM_HOME: "/tmp/duck-home" }, "/work")).toBe("/tmp/duck-home");
    expect(resolveHomeDir(undefined, { HOME: "/home/ann" }, "/work")).toBe("/home/ann/.local/share/ducklm");
    expect(resolveHomeDir(undefined, { HOME: "/home/ann", XDG_DATA_HOME: "/data/ann" }, "/work")).toBe("/data/ann/ducklm");
    // A relative XDG value is ignored, as the spec says.
    expect(resolveHomeDir(undefined, { HOME: "/home/ann", XDG_DATA_HOME: "rel" }, "/work")).toBe("/home/ann/.local/share/ducklm");
    expect(resolveConfigDir(undefined, { HOME: "/home/ann" }, "/work")).toBe("/home/ann/.config/ducklm");
    expect(resolveConfigDir(undefined, { HOME: "/home/ann", XDG_CONFIG_HOME: "/cfg" }, "/work")).toBe("/cfg/ducklm");
    const work = makeTempDir("ducklm-cwd-");
    mkdirSync(join(work, "mine"));
    expect(resolveConfigDir(undefined, { DUCKLM_CONFIG: "mine" }, work)).toBe(join(work, "mine"));
    expect(resolveConfigDir("mine", {}, work)).toBe(join(work, "mine"));
  });

  it("refuses a config folder someone named that is not there, instead of running on the defaults without it", () => {
    const work = makeTempDir("ducklm-cwd-");
    writeFileSync(join(work, "a-file"), "");
    const refusal = (run: () => unknown) => {
      try {
        run();
      } catch (error) {
        return { code: (error as DuckError).code, message: (error as Error).message };
      }
      return null;
    };
    expect(refusal(() => resolveConfigDir("typo-dir", {}, work))).toEqual({ code: ErrorCode.InvalidInput, message: expect.stringContaining(`--config names ${join(work, "typo-dir")}, which does not exist`) });
    expect(refusal(() => resolveConfigDir(undefined, { DUCKLM_CONFIG: "a-file" }, work))).toEqual({ code: ErrorCode.InvalidInput, message: expect.stringContaining("DUCKLM_CONFIG names") });
    expect(refusal(() => resolveConfigDir(undefined, { DUCKLM_CONFIG: "a-file" }, work))?.message).toContain("is not a folder");
    // The default folder may be missing: files there are optional.
    expect(refusal(() => resolveConfigDir(undefined, { HOME: join(work, "nobody") }, work))).toBeNull();
  });
});
