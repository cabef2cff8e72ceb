import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { ModelRoleNames } from "../config/config-schemas.js";
import { BUNDLED_CONFIG_DIR, loadConfig, resolveConfigDir, resolveHomeDir } from "../config/load-config.js";
import { createInterface } from "node:readline/promises";
import { Presets, SingleBar } from "cli-progress";
import { setRoleModels } from "../config/update-models-config.js";
import type { ModelRole } from "../contracts/index.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { createModelProvider, modelsDirectory } from "../models/create-model-provider.js";
import { catalogueModel, listedBytes, loadCatalogue, presetPlan, roleSettings } from "../models/model-catalogue.js";
import { downloadModel, type DownloadResult } from "../models/model-download.js";
import { ggufEmbeddingLength } from "../models/gguf/gguf-header.js";
import { homeIsNotAFolder } from "../storage/private-files.js";
import { resolveRolesChecked } from "../models/model-roles.js";
import { createLogger } from "../runtime/logger.js";
import { urlForDisplay } from "../utils/url-for-display.js";
import type { GlobalOptions } from "./with-ducklm.js";

function formatBytes(bytes: number | null): string {
  if (bytes === null) return "-";
  if (bytes >= 1024 ** 3) return `${(bytes / 1024 ** 3).toFixed(1)} GiB`;
  if (bytes >= 1024 ** 2) return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
  if (bytes >= 1024) return `${(bytes / 1024).toFixed(0)} KiB`;
  return `${bytes} B`;
}

function checkRole(role: string): ModelRole {
  if (!(ModelRoleNames as readonly string[]).includes(role)) {
    throw new DuckError(ErrorCode.InvalidInput, `unknown role "${role}"; roles: ${ModelRoleNames.join(", ")}`);
  }
  return role as ModelRole;
}

/** `ducklm models list`: each role, its file, whether the file is there, and what serves the role. */
export async function modelsListCommand(globals: GlobalOptions, options: { json?: boolean }): Promise<number> {
  const home = resolveHomeDir(globals.home);
  // A home that is a file holds no models; saying each one is missing would send the user to `setup` in vain.
  if (statSync(home, { throwIfNoEntry: false })?.isDirectory() === false) {
    throw homeIsNotAFolder(home);
  }
  const config = loadConfig(resolveConfigDir(globals.config));
  const roles = await resolveRolesChecked(config.models, modelsDirectory(home));
  const rows = [...roles.values()].map((role) => ({
    role: role.role,
    file: role.path,
    server: role.config?.server ? `${role.config.server.model} @ ${urlForDisplay(role.config.server.base_url)}` : null,
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
    // The size as `ducklm setup` will show it: the starter preset's files, each counted once.
    const catalogue = loadCatalogue(resolveConfigDir(globals.config));
    const starter = new Set(Object.values(catalogue.presets.starter?.roles ?? {}));
    const bytes = [...starter].reduce((sum, name) => sum + (catalogue.models[name] ? listedBytes(catalogueModel(catalogue, name)!) : 0), 0);
    console.log(`\nNo chat model is present: DuckLM runs in IntentParser mode. Get the starter models (about ${formatBytes(bytes)}) with\n  ducklm setup`);
  }
  return 0;
}

/** A download with a progress bar on a terminal (bytes, speed, time left), or a line every tenth elsewhere. */
async function downloadWithProgress(source: string, label: string, options: { directory: string; sha256?: string; size?: number }): Promise<DownloadResult> {
  const interactive = process.stderr.isTTY === true;
  // Ctrl-C stops the download where it is (resumable) and gives the terminal back as it was.
  const interrupt = new AbortController();
  const onInterrupt = () => interrupt.abort(new DuckError(ErrorCode.Cancelled, `${label}: stopped before the file began to arrive; nothing was saved`));
  process.once("SIGINT", onInterrupt);
  const started = Date.now();
  let bar: SingleBar | null = null;
  let shownTenth = -1;
  const speedOf = (received: number, from: number) => {
    const seconds = Math.max(0.001, (Date.now() - started) / 1000);
    return (received - from) / seconds;
  };
  let from: number | null = null;
  try {
    const stall = Number(process.env.DUCKLM_DOWNLOAD_STALL_S);
    return await downloadModel(source, {
      ...options,
      signal: interrupt.signal,
      ...(Number.isFinite(stall) && stall > 0 ? { stallMs: stall * 1000 } : {}),
      onProgress: ({ received, total }) => {
        from ??= received;
        const speed = speedOf(received, from);
        if (interactive) {
          if (!bar) {
            bar = new SingleBar(
              { format: `${label} [{bar}] {percentage}% | {done} of {all} | {speed}/s | {left} left`, stream: process.stderr, hideCursor: true, barsize: 24, fps: 5, clearOnComplete: false },
              Presets.shades_classic,
            );
            bar.start(total ?? received, received, { done: formatBytes(received), all: total ? formatBytes(total) : "?", speed: formatBytes(speed), left: "…" });
          }
          const left = total && speed > 0 ? formatDuration((total - received) / speed) : "?";
          bar.update(received, { done: formatBytes(received), all: total ? formatBytes(total) : "?", speed: formatBytes(speed), left });
          return;
        }
        const tenth = total ? Math.floor((received / total) * 10) : Math.floor(received / 100 / 1024 ** 2);
        if (tenth === shownTenth) return;
        shownTenth = tenth;
        process.stderr.write(`${label}: ${formatBytes(received)}${total ? ` of ${formatBytes(total)} (${((received / total) * 100).toFixed(0)}%)` : ""}, ${formatBytes(speed)}/s\n`);
      },
    });
  } finally {
    process.removeListener("SIGINT", onInterrupt);
    const shown = bar as SingleBar | null;
    if (shown) {
      shown.stop();
      process.stderr.write("\n");
    }
  }
}

/** The exit code of a pull or setup that Ctrl-C stopped, after saying how to go on. */
function interrupted(error: unknown): number | null {
  if (!DuckError.isInstance(error) || error.code !== ErrorCode.Cancelled) return null;
  console.error(error.message);
  return 130;
}

function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return "?";
  if (seconds < 60) return `${Math.ceil(seconds)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
  return `${Math.floor(seconds / 3600)} h ${Math.round((seconds % 3600) / 60)} min`;
}

const CATALOGUE_PIN = "the catalogue's pinned hash";

/** `expectedFrom`: who gave the hash a download was checked against, when not the server. */
function describeResult(result: DownloadResult, expectedFrom = "the one given"): string {
  const hash = result.checkedAgainst === "server" ? "matches the hub's" : result.checkedAgainst === "given" ? `matches ${expectedFrom}` : "not checked: the server states none";
  if (result.unverified) return `${result.file} is already there (${formatBytes(result.bytes)}); it could not be compared with the server's copy: ${result.unverified}`;
  if (result.alreadyPresent) return `${result.file} is already there (${formatBytes(result.bytes)}, sha256 ${hash}); nothing downloaded`;
  return `${result.resumedFrom > 0 ? `resumed at ${formatBytes(result.resumedFrom)}; ` : ""}saved ${result.file} (${formatBytes(result.bytes)}, sha256 ${result.sha256}, ${hash})`;
}

/** `ducklm models pull <name | url | hf:user/repo/file.gguf>`: download (resumable), check, and point a role at it. */
export async function modelsPullCommand(globals: GlobalOptions, source: string, options: { role?: string; sha256?: string; size?: string }): Promise<number> {
  const role = options.role ? checkRole(options.role) : null;
  const size = options.size === undefined ? undefined : Number(options.size);
  if (size !== undefined && (!Number.isInteger(size) || size <= 0)) throw new DuckError(ErrorCode.InvalidInput, "--size must be a positive number of bytes");
  const home = resolveHomeDir(globals.home);
  const configDir = resolveConfigDir(globals.config);
  loadConfig(configDir);
  // A name from the catalogue stands for its file (and its pinned hash, if it has one).
  const catalogue = source.includes(":") ? null : loadCatalogue(configDir);
  const listed = catalogue && /^[a-z0-9][a-z0-9._-]*$/i.test(source) ? catalogueModel(catalogue, source) : null;
  if (catalogue && !listed) throw new DuckError(ErrorCode.InvalidInput, `"${source}" is not in the catalogue (${Object.keys(catalogue.models).join(", ")}), a URL, or hf:user/repo/file.gguf`);
  const sha256 = options.sha256 ?? listed?.sha256;
  const expectedSize = size ?? listed?.bytes;
  let result: DownloadResult;
  try {
    result = await downloadWithProgress(listed?.source ?? source, listed?.name ?? "downloading", {
      directory: modelsDirectory(home),
      ...(sha256 ? { sha256 } : {}),
      ...(expectedSize !== undefined ? { size: expectedSize } : {}),
    });
  } catch (error) {
    const code = interrupted(error);
    if (code !== null) return code;
    throw error;
  }
  console.log(describeResult(result, options.sha256 === undefined && listed?.sha256 ? CATALOGUE_PIN : undefined));
  if (role) {
    const file = result.file.slice(modelsDirectory(home).length + 1);
    // An embedding model's width is what memory search stores: taken from the file, which says it.
    const dimension = role === "embeddings" && !listed ? await ggufEmbeddingLength(result.file) : null;
    setRoleModels(configDir, { [role]: listed ? roleSettings(role, listed) : { file, ...(dimension !== null ? { dimension } : {}) } });
    console.log(`${join(configDir, "models.json")}: role ${role} now uses it${dimension !== null ? ` (${dimension}-dimensional vectors)` : ""}`);
  }
  return 0;
}

/** `ducklm setup`: a preset of catalogue models, downloaded and assigned to their roles. */
export async function setupCommand(globals: GlobalOptions, options: { preset?: string; dryRun?: boolean; yes?: boolean }): Promise<number> {
  const home = resolveHomeDir(globals.home);
  const configDir = resolveConfigDir(globals.config);
  loadConfig(configDir);
  const catalogue = loadCatalogue(configDir);
  const preset = options.preset ?? "starter";
  const directory = modelsDirectory(home);
  const plan = presetPlan(catalogue, preset, directory);
  const missing = plan.filter((entry) => !entry.present);
  const total = missing.reduce((sum, entry) => sum + listedBytes(entry.model), 0);
  console.log(`Preset ${preset}: ${catalogue.presets[preset]!.description}.`);
  for (const { model, roles, present } of plan) {
    const size = model.bytes !== undefined ? formatBytes(model.bytes) : `about ${formatBytes(listedBytes(model))}`;
    console.log(`  ${model.name.padEnd(26)} ${(present ? `${size}, present` : size).padEnd(16)} ${model.license.padEnd(11)} ${roles.join(", ")}`);
    console.log(`      ${model.source} → ${join(directory, model.file)}`);
    console.log(model.bytes !== undefined ? `      ${model.bytes} bytes exactly` : "      size not pinned: the download states it");
    const unpinned = model.source.startsWith("hf:") ? "not pinned: checked against the one the hub states, while downloading" : "not pinned: checked only if the server states one, while downloading";
    console.log(`      sha256 ${model.sha256 ?? unpinned}`);
  }
  console.log(missing.length === 0 ? "Every file is already there." : `To download: about ${formatBytes(total)} into ${directory}.`);
  // What each role has now: a role's own settings (context size, temperature…) stay; its model changes.
  const current = loadConfig(configDir).models.roles;
  const changes = plan.flatMap(({ model, roles }) =>
    roles.flatMap((role) => {
      const now = current[role];
      const was = now?.server ? `the server ${now.server.model} @ ${urlForDisplay(now.server.base_url)}` : now?.file ?? "nothing";
      return was === model.file ? [] : [`  ${role}: ${was} → ${model.file}`];
    }),
  );
  const userModels = join(configDir, "models.json");
  const inForce = existsSync(userModels) ? userModels : `the bundled defaults, ${join(BUNDLED_CONFIG_DIR, "models.json")}`;
  console.log(
    changes.length === 0
      ? `Every role is already set to these files (in ${inForce}).`
      : `${existsSync(userModels) ? `In ${userModels}` : `In ${userModels}, a new file over the bundled defaults`} (each role's other settings stay as they are):\n${changes.join("\n")}`,
  );
  if (options.dryRun) {
    console.log(`Nothing was downloaded or changed (--dry-run). Run \`ducklm setup --preset ${preset}\` to do it.`);
    return 0;
  }
  if (missing.length > 0 && !options.yes) {
    if (!process.stdin.isTTY) throw new DuckError(ErrorCode.InvalidInput, `downloading about ${formatBytes(total)} needs a yes: run \`ducklm setup --preset ${preset} --yes\``);
    const prompt = createInterface({ input: process.stdin, output: process.stdout });
    const reply = await prompt.question(`Download about ${formatBytes(total)} now? [Y/n] `).catch(() => null);
    prompt.close();
    if (reply === null) {
      console.log("\nNothing was downloaded or changed.");
      return 130;
    }
    if (!["", "y", "yes"].includes(reply.trim().toLowerCase())) {
      console.log("Nothing was downloaded or changed.");
      return 0;
    }
  }
  const settings: Record<string, Record<string, unknown>> = {};
  // What the user wrote for each role (not the defaults the schema fills in).
  const writtenRoles = existsSync(userModels) ? ((JSON.parse(readFileSync(userModels, "utf8")) as { roles?: Record<string, unknown> }).roles ?? {}) : {};
  for (const { model, roles } of plan) {
    let result: DownloadResult;
    try {
      result = await downloadWithProgress(model.source, model.name, { directory, ...(model.sha256 ? { sha256: model.sha256 } : {}), ...(model.bytes !== undefined ? { size: model.bytes } : {}) });
    } catch (error) {
      const code = interrupted(error);
      if (code !== null) return code;
      throw error;
    }
    console.log(describeResult(result, CATALOGUE_PIN));
    for (const role of roles) {
      // The role's own settings win over the preset's defaults; a server it used gives way to the file.
      const written = (writtenRoles[role] ?? {}) as Record<string, unknown>;
      const { server: _server, file: _file, dimension: _dimension, ...own } = written;
      settings[role] = { ...roleSettings(role, { ...model, file: result.file.slice(directory.length + 1) }), ...(written.server ? {} : own) };
    }
  }
  setRoleModels(configDir, settings);
  console.log(`${join(configDir, "models.json")}: ${Object.keys(settings).join(", ")} now use the ${preset} models.`);
  console.log('Try it: ducklm run "list the files here and tell me what this project is"');
  return 0;
}

/** `ducklm models bench <role>`: prompt and generation speed of the role's model. */
export async function modelsBenchCommand(globals: GlobalOptions, roleName: string, options: { tokens?: string }): Promise<number> {
  const role = checkRole(roleName);
  const tokens = Number(options.tokens ?? 128);
  if (!Number.isInteger(tokens) || tokens < 1 || tokens > 8192) throw new DuckError(ErrorCode.InvalidInput, "--tokens must be a whole number from 1 to 8192");
  const home = resolveHomeDir(globals.home);
  const config = loadConfig(resolveConfigDir(globals.config));
  // The same provider tasks use: a local file or a model server, whichever serves the role.
  const provider = await createModelProvider({ config: config.models, home, logger: createLogger({ file: join(home, "logs", "ducklm.log") }) });
  if (!provider?.hasRole(role)) {
    await provider?.dispose();
    throw new DuckError(ErrorCode.ModelUnavailable, `role ${role} has no model file or server; see \`ducklm models list\``);
  }
  try {
    const loadStart = performance.now();
    await provider.ensureLoaded?.(role);
    const loadMs = performance.now() - loadStart;
    const prompt = "Describe, step by step, how a compiler turns source code into machine code. ".repeat(8);
    const promptTokens = provider.countTokens(role, prompt);
    let firstTokenAt = 0;
    let counted: number | null = null;
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
      onTokens: (count) => void (counted = (counted ?? 0) + count),
    });
    const end = performance.now();
    // The generator's own count where the provider reports it (a model server may not): tokenising
    // the text again can count other tokens than were generated.
    const generated = counted ?? provider.countTokens(role, text);
    const firstMs = (firstTokenAt || end) - start;
    console.log(`role ${role}: load ${loadMs.toFixed(0)} ms`);
    console.log(`  prompt      ${promptTokens} tokens, time to first token ${firstMs.toFixed(0)} ms (${((promptTokens / firstMs) * 1000).toFixed(1)} tokens/s)`);
    console.log(`  generation  ${generated} tokens in ${(end - (firstTokenAt || start)).toFixed(0)} ms (${((generated / Math.max(1, end - (firstTokenAt || start))) * 1000).toFixed(1)} tokens/s)`);
    return 0;
  } finally {
    await provider.dispose();
  }
}
