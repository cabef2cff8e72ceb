import { join } from "node:path";
import { ModelRoleNames } from "../config/config-schemas.js";
import { loadConfig, resolveConfigDir, resolveHomeDir } from "../config/load-config.js";
import { setRoleModelFile } from "../config/update-models-config.js";
import type { ModelRole } from "../contracts/index.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { createModelProvider, modelsDirectory } from "../models/create-model-provider.js";
import { downloadModel } from "../models/model-download.js";
import { resolveRoles } from "../models/model-roles.js";
import { createLogger } from "../runtime/logger.js";
import type { GlobalOptions } from "./with-ducklm.js";

function formatBytes(bytes: number | null): string {
  if (bytes === null) return "-";
  if (bytes >= 1024 ** 3) return `${(bytes / 1024 ** 3).toFixed(1)} GiB`;
  if (bytes >= 1024 ** 2) return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
  return `${(bytes / 1024).toFixed(0)} KiB`;
}

function checkRole(role: string): ModelRole {
  if (!(ModelRoleNames as readonly string[]).includes(role)) {
    throw new DuckError(ErrorCode.InvalidInput, `unknown role "${role}"; roles: ${ModelRoleNames.join(", ")}`);
  }
  return role as ModelRole;
}

/** `ducklm models list`: each role, its file, whether the file is there, and what serves the role. */
export function modelsListCommand(globals: GlobalOptions, options: { json?: boolean }): number {
  const home = resolveHomeDir(globals.home);
  const config = loadConfig(resolveConfigDir(globals.config));
  const roles = resolveRoles(config.models, modelsDirectory(home));
  const rows = [...roles.values()].map((role) => ({
    role: role.role,
    file: role.path,
    server: role.config?.server ? `${role.config.server.model} @ ${role.config.server.base_url}` : null,
    present: role.present,
    problem: role.problem,
    size_bytes: role.sizeBytes,
    served_by: role.servedBy,
    // Models load lazily inside the process that uses them; a separate CLI process has none loaded.
    loaded: false,
  }));
  if (options.json) {
    for (const row of rows) console.log(JSON.stringify(row));
    return 0;
  }
  for (const row of rows) {
    const status = row.server ? "server" : row.present ? "present" : row.problem ? "broken" : row.file ? "missing" : "not configured";
    const serving = row.served_by === row.role ? "" : row.served_by ? `  → runs on the ${row.served_by} model` : "  → unavailable";
    console.log(`${row.role.padEnd(14)} ${status.padEnd(15)} ${formatBytes(row.size_bytes).padStart(9)}  ${row.server ?? row.file ?? ""}${serving}`);
    if (row.problem) console.log(`${"".padEnd(14)} ↳ the file ${row.problem}`);
  }
  if (!rows.some((row) => row.role !== "embeddings" && row.served_by)) {
    console.log("\nNo chat model is present: DuckLM runs in IntentParser mode. Get one with\n  ducklm models pull hf:<user>/<repo>/<file>.gguf --role thinker");
  }
  return 0;
}

/** `ducklm models pull <url | hf:user/repo/file.gguf>`: download (resumable), check, and point a role at it. */
export async function modelsPullCommand(globals: GlobalOptions, source: string, options: { role?: string; sha256?: string; size?: string }): Promise<number> {
  const role = options.role ? checkRole(options.role) : null;
  const size = options.size === undefined ? undefined : Number(options.size);
  if (size !== undefined && (!Number.isInteger(size) || size <= 0)) throw new DuckError(ErrorCode.InvalidInput, "--size must be a positive number of bytes");
  const home = resolveHomeDir(globals.home);
  const configDir = resolveConfigDir(globals.config);
  loadConfig(configDir);
  const interactive = process.stderr.isTTY;
  let lastShown = 0;
  const result = await downloadModel(source, {
    directory: modelsDirectory(home),
    ...(options.sha256 ? { sha256: options.sha256 } : {}),
    ...(size !== undefined ? { size } : {}),
    onProgress: ({ received, total }) => {
      const now = Date.now();
      if (now - lastShown < 200) return;
      lastShown = now;
      const share = total ? ` ${((received / total) * 100).toFixed(1)}%` : "";
      const line = `downloading ${formatBytes(received)}${total ? ` of ${formatBytes(total)}` : ""}${share}`;
      process.stderr.write(interactive ? `\r${line}   ` : `${line}\n`);
    },
  });
  if (interactive) process.stderr.write("\n");
  console.log(`${result.resumedFrom > 0 ? `resumed at ${formatBytes(result.resumedFrom)}; ` : ""}saved ${result.file} (${formatBytes(result.bytes)}, sha256 ${result.sha256})`);
  if (role) {
    setRoleModelFile(configDir, role, result.file.slice(modelsDirectory(home).length + 1));
    console.log(`${join(configDir, "models.json")}: role ${role} now uses it`);
  }
  return 0;
}

/** `ducklm models bench <role>`: prompt and generation speed of the role's model. */
export async function modelsBenchCommand(globals: GlobalOptions, roleName: string, options: { tokens?: string }): Promise<number> {
  const role = checkRole(roleName);
  const home = resolveHomeDir(globals.home);
  const config = loadConfig(resolveConfigDir(globals.config));
  // The same provider tasks use: a local file or a model server, whichever serves the role.
  const provider = await createModelProvider({ config: config.models, home, logger: createLogger({ file: join(home, "logs", "ducklm.log") }) });
  if (!provider?.hasRole(role)) {
    await provider?.dispose();
    throw new DuckError(ErrorCode.ModelUnavailable, `role ${role} has no model file or server; see \`ducklm models list\``);
  }
  try {
    const tokens = Number(options.tokens ?? 128);
    const loadStart = performance.now();
    await provider.ensureLoaded?.(role);
    const loadMs = performance.now() - loadStart;
    const prompt = "Describe, step by step, how a compiler turns source code into machine code. ".repeat(8);
    const promptTokens = provider.countTokens(role, prompt);
    let firstTokenAt = 0;
    let generated = 0;
    const start = performance.now();
    const text = await provider.generateText({
      role,
      system: "",
      prompt,
      maxTokens: tokens,
      temperature: 0,
      onDelta: () => {
        if (firstTokenAt === 0) firstTokenAt = performance.now();
      },
    });
    const end = performance.now();
    generated = provider.countTokens(role, text);
    const firstMs = (firstTokenAt || end) - start;
    console.log(`role ${role}: load ${loadMs.toFixed(0)} ms`);
    console.log(`  prompt      ${promptTokens} tokens, time to first token ${firstMs.toFixed(0)} ms (${((promptTokens / firstMs) * 1000).toFixed(1)} tokens/s)`);
    console.log(`  generation  ${generated} tokens in ${(end - (firstTokenAt || start)).toFixed(0)} ms (${((generated / Math.max(1, end - (firstTokenAt || start))) * 1000).toFixed(1)} tokens/s)`);
    return 0;
  } finally {
    await provider.dispose();
  }
}
