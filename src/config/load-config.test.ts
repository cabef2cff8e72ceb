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

  it("lays the user's file over the bundled one: a setting given replaces its default, the others stay", () => {
    const bundled = loadConfig(BUNDLED_CONFIG_DIR);
    const dir = makeTempDir("ducklm-config-");
    writeFileSync(join(dir, "models.json"), JSON.stringify({ threads: 1, roles: { coder: { server: { base_url: "http://127.0.0.1:8080/v1", model: "coder" } }, critic: { temperature: 0.5 } } }));
    writeFileSync(join(dir, "runtime.json"), JSON.stringify({ timeouts: { step_ms: 5_000 } }));
    writeFileSync(join(dir, "integrations.json"), JSON.stringify({ web: { fetch: { max_bytes: 1000 } } }));
    const config = loadConfig(dir);
    expect(config.models.threads).toBe(1);
    // Roles the file does not name keep their bundled model; a role it sets keeps what it does not say.
    expect(config.models.roles.thinker).toEqual(bundled.models.roles.thinker);
    expect(config.models.roles.embeddings?.dimension).toBe(768);
    expect(config.models.roles.critic).toEqual({ ...bundled.models.roles.critic, temperature: 0.5 });
    // A server given for a role replaces the bundled file.
    expect(config.models.roles.coder?.file).toBeUndefined();
    expect(config.models.roles.coder?.server?.model).toBe("coder");
    expect(config.models.roles.coder?.context_size).toBe(bundled.models.roles.coder?.context_size);
    expect(config.runtime.timeouts.step_ms).toBe(5_000);
    expect(config.runtime.timeouts.task_ms).toBe(bundled.runtime.timeouts.task_ms);
    expect(config.integrations.web.fetch.max_bytes).toBe(1000);
    expect(config.integrations.web.fetch.timeout_ms).toBe(bundled.integrations.web.fetch.timeout_ms);
    // null removes a setting, as in a JSON merge patch: a role with no model, a setting back to its default.
    writeFileSync(join(dir, "models.json"), JSON.stringify({ roles: { coder: null } }));
    writeFileSync(join(dir, "runtime.json"), JSON.stringify({ timeouts: { step_ms: null } }));
    const removed = loadConfig(dir);
    expect(removed.models.roles.coder).toBeUndefined();
    expect(removed.models.roles.thinker).toEqual(bundled.models.roles.thinker);
    expect(removed.runtime.timeouts.step_ms).toBe(30_000);
    // Within a role too; and a key the schema does not know is reported, `__proto__` as much as any.
    writeFileSync(join(dir, "models.json"), JSON.stringify({ roles: { critic: { temperature: null } } }));
    expect(loadConfig(dir).models.roles.critic?.temperature).toBe(0.2);
    writeFileSync(join(dir, "models.json"), '{"__proto__": {"threads": 3}, "roles": {}}');
    expect(loadError(dir).message).toMatch(/models\.json: __proto__: "__proto__" is not a setting/);
    writeFileSync(join(dir, "models.json"), '{"roles": {"__proto__": {"file": "x.gguf"}}}');
    expect(loadError(dir).message).toMatch(/models\.json: roles\.__proto__: "__proto__" is not a setting/);
    expect(({} as Record<string, unknown>).threads).toBeUndefined();
    writeFileSync(join(dir, "models.json"), "{}");
    // null where the bundled file has no such key removes it all the same: its default applies.
    writeFileSync(join(dir, "runtime.json"), JSON.stringify({ sandbox: { mode: null } }));
    expect(loadConfig(dir).runtime.sandbox.mode).toBe("auto");
  });

  it("refuses permission rules that are not lists, rather than dropping them", () => {
    const dir = makeTempDir("ducklm-config-");
    for (const [own, field] of [
      [{ categories: { hard_stop: "git push" } }, "categories.hard_stop"],
      [{ network: "curl" }, "network"],
      [{ categories: "x" }, "categories"],
      [{ categories: [] }, "categories"],
      [{ categories: { hard_stop: { 0: "sudo" } } }, "categories.hard_stop"],
      [{ examples: "x" }, "examples"],
    ] as const) {
      writeFileSync(join(dir, "permissions.json"), JSON.stringify(own));
      const error = loadError(dir);
      expect(error.code, JSON.stringify(own)).toBe(ErrorCode.ConfigInvalid);
      expect(error.message, JSON.stringify(own)).toContain(`permissions.json: ${field}`);
    }
  });

  it("adds the user's permission rules to the bundled ones: a file of one's own cannot drop the safety rules by leaving them out", () => {
    const bundled = loadConfig(BUNDLED_CONFIG_DIR).permissions;
    const dir = makeTempDir("ducklm-config-");
    writeFileSync(join(dir, "permissions.json"), JSON.stringify({ categories: { normal: [], no_always: ["make deploy"] }, network: ["my-sync"], unknown: "deny" }));
    const own = loadConfig(dir).permissions;
    expect(own.categories.hard_stop).toEqual(bundled.categories.hard_stop);
    expect(own.categories.no_always).toEqual([...bundled.categories.no_always, "make deploy"]);
    expect(own.categories.no_always).toContain("rm -r");
    expect(own.categories.normal).toEqual(bundled.categories.normal);
    expect(own.network).toEqual([...bundled.network, "my-sync"]);
    expect(own.examples).toEqual(bundled.examples);
    expect(own.unknown).toBe("deny");
    // A rule the bundled file has already is not listed twice.
    writeFileSync(join(dir, "permissions.json"), JSON.stringify({ categories: { no_always: ["rm -r"] } }));
    expect(loadConfig(dir).permissions.categories.no_always).toEqual(bundled.categories.no_always);
    // A file that says it stands alone does.
    writeFileSync(join(dir, "permissions.json"), JSON.stringify({ extends_bundled: false, categories: { no_always: ["make deploy"] } }));
    const alone = loadConfig(dir).permissions;
    expect(alone.categories.no_always).toEqual(["make deploy"]);
    expect(alone.categories.hard_stop).toEqual([]);
  });

  it("reads a file saved with a byte-order mark, and places a JSON error by line and column", () => {
    const dir = makeTempDir("ducklm-config-");
    writeFileSync(join(dir, "runtime.json"), `\uFEFF${JSON.stringify({ retrieval_top_k: 4 })}`);
    expect(loadConfig(dir).runtime.retrieval_top_k).toBe(4);
    writeFileSync(join(dir, "runtime.json"), '{\n  "retrieval_top_k": 4,\n  oops\n}');
    expect(loadError(dir).message).toMatch(/runtime\.json: not valid JSON \(.*line 3 column 3\)/);
    writeFileSync(join(dir, "runtime.json"), "{}");
    writeFileSync(join(dir, "models.json"), JSON.stringify({ roles: { thinker: { file: "x.gguf", gpu_layers: "lots" } } }));
    expect(loadError(dir).message).toMatch(/models\.json: roles\.thinker\.gpu_layers: a number of layers \(0 or more\), "auto" or "max"/);
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
