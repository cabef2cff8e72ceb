import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RuntimeConfigSchema, type DuckConfig } from "../../src/config/config-schemas.js";
import { BUNDLED_CONFIG_DIR, loadConfig } from "../../src/config/load-config.js";
import type { ModelProvider } from "../../src/models/model-provider.js";
import { createRuntime, type Runtime } from "../../src/runtime/create-runtime.js";
import type { ShellSandbox } from "../../src/tools/shell-sandbox.js";
import type { AnyToolDefinition } from "../../src/tools/tool-definition.js";

export interface TestRuntimeOptions {
  models?: ModelProvider | null;
  tools?: AnyToolDefinition[];
  /** Deep-merged over runtime.json. */
  runtime?: Record<string, unknown>;
  home?: string;
  workspace?: string;
  databaseFile?: string;
  /** A config folder of the user's (over the bundled defaults) instead of the bundled config alone. */
  configDir?: string;
  /** How commands are started, instead of what runtime.json chooses. */
  sandbox?: ShellSandbox;
  /** Where the PostgreSQL connection string is read from, with `runtime: { storage: { backend: "postgres" } }`. */
  env?: NodeJS.ProcessEnv;
  /** permissions.json `confined`: `ask` unless a test is about the sandbox being the boundary. */
  confinedCommands?: "run" | "ask";
}

export interface TestRuntime extends Runtime {
  workspace: string;
  /** Closes the runtime and removes its directories. */
  dispose(): Promise<void>;
}

function merge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(over)) {
    const existing = out[key];
    out[key] =
      value && typeof value === "object" && !Array.isArray(value) && existing && typeof existing === "object"
        ? merge(existing as Record<string, unknown>, value as Record<string, unknown>)
        : value;
  }
  return out;
}

export function makeTempDir(prefix = "ducklm-test-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** The bundled config with runtime.json overrides (fast retries by default, so tests stay quick). */
export function testConfig(runtimeOverrides: Record<string, unknown> = {}, configDir = BUNDLED_CONFIG_DIR, confinedCommands: "run" | "ask" = "ask"): DuckConfig {
  const config = loadConfig(configDir);
  // One decision per task, as before the agent loop, unless a test is about the loop and says so.
  const runtime = RuntimeConfigSchema.parse(merge(merge(config.runtime as unknown as Record<string, unknown>, { retry: { backoff_ms: 1 }, agent: { max_iterations: 1 } }), runtimeOverrides));
  // Commands no rule covers are asked, as the tests of questions, approvals and the classifier need
  // (an unknown command is how they make a task ask), unless a test is about the sandbox deciding.
  return { ...config, runtime, permissions: { ...config.permissions, confined: confinedCommands } };
}

export function createTestRuntime(options: TestRuntimeOptions = {}): TestRuntime {
  const home = options.home ?? makeTempDir();
  const workspace = options.workspace ?? makeTempDir("ducklm-ws-");
  const runtime = createRuntime({
    home,
    config: testConfig(options.runtime, options.configDir, options.confinedCommands),
    workspace,
    models: options.models ?? null,
    ...(options.tools ? { tools: options.tools } : {}),
    ...(options.databaseFile ? { databaseFile: options.databaseFile } : {}),
    ...(options.sandbox ? { sandbox: options.sandbox } : {}),
    ...(options.env ? { env: options.env } : {}),
  });
  return {
    ...runtime,
    workspace,
    async dispose() {
      await runtime.close();
      if (!options.home) rmSync(home, { recursive: true, force: true });
      if (!options.workspace) rmSync(workspace, { recursive: true, force: true });
    },
  };
}

/**
 * A `setup` for a test file: each runtime it creates is disposed after the test. Call at module level.
 */
export function useTestRuntimes(afterEach: (fn: () => Promise<void>) => void): (options?: TestRuntimeOptions) => TestRuntime {
  const runtimes: TestRuntime[] = [];
  afterEach(async () => {
    await Promise.all(runtimes.splice(0).map((runtime) => runtime.dispose()));
  });
  return (options = {}) => {
    const runtime = createTestRuntime(options);
    runtimes.push(runtime);
    return runtime;
  };
}
