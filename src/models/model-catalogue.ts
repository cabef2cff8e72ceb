import { existsSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { z } from "zod";
import { ModelRoleNames } from "../config/config-schemas.js";
import { BUNDLED_CONFIG_DIR } from "../config/load-config.js";
import type { ModelRole } from "../contracts/index.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";

const CatalogueModelSchema = z.strictObject({
  /** `hf:user/repo@revision/file.gguf` (or without the revision) or an http(s) URL. */
  source: z.string().min(1),
  /** Pinned exact size: a download of any other size is refused before it starts. */
  bytes: z.number().int().positive().optional(),
  /** For a file not pinned: the size the listing shows before the download says the exact one. */
  approx_bytes: z.number().int().positive().optional(),
  license: z.string().min(1),
  description: z.string().min(1),
  /** Pinned SHA-256; without it the hub's own (X-Linked-ETag) is checked while downloading. */
  sha256: z.string().regex(/^[0-9a-f]{64}$/).optional(),
  /** Embedding models: the vector dimension. */
  dimension: z.number().int().positive().optional(),
}).refine((model) => model.bytes !== undefined || model.approx_bytes !== undefined, { message: "give the file's size: bytes (exact) or approx_bytes" });

const CatalogueSchema = z.strictObject({
  models: z.record(z.string(), CatalogueModelSchema),
  presets: z.record(z.string(), z.strictObject({ description: z.string(), roles: z.partialRecord(z.enum(ModelRoleNames), z.string()) })),
});

export type CatalogueModel = z.infer<typeof CatalogueModelSchema> & { name: string; file: string };
export type Catalogue = z.infer<typeof CatalogueSchema>;

export const CATALOGUE_FILE = "models-catalogue.json";

function readCatalogue(file: string): Catalogue {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    throw new DuckError(ErrorCode.ConfigInvalid, `${file}: not readable JSON (${(error as Error).message})`);
  }
  const result = CatalogueSchema.safeParse(parsed);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    throw new DuckError(ErrorCode.ConfigInvalid, `${file}: ${issue.path.join(".") || "(top level)"}: ${issue.message}`);
  }
  return result.data;
}

/**
 * The curated models DuckLM ships a list of (config/models-catalogue.json of the package), with the
 * user's own `models-catalogue.json` of the config folder laid over it: a model or preset of the
 * same name there replaces the bundled one (an organisation's mirror, its own pinned files).
 */
export function loadCatalogue(configDir?: string): Catalogue {
  const bundled = readCatalogue(join(BUNDLED_CONFIG_DIR, CATALOGUE_FILE));
  const ownFile = configDir === undefined ? null : join(configDir, CATALOGUE_FILE);
  const own = ownFile !== null && existsSync(ownFile) ? readCatalogue(ownFile) : null;
  const catalogue: Catalogue = own ? { models: { ...bundled.models, ...own.models }, presets: { ...bundled.presets, ...own.presets } } : bundled;
  for (const [preset, { roles }] of Object.entries(catalogue.presets)) {
    for (const name of Object.values(roles)) if (!catalogue.models[name]) throw new DuckError(ErrorCode.ConfigInvalid, `${ownFile ?? CATALOGUE_FILE}: preset ${preset} names ${name}, which is not in the catalogue`);
  }
  return catalogue;
}

/** The size to show and plan with: the pinned one, else the approximate one. */
export function listedBytes(model: CatalogueModel): number {
  return model.bytes ?? model.approx_bytes!;
}

export function catalogueModel(catalogue: Catalogue, name: string): CatalogueModel | null {
  const model = catalogue.models[name];
  return model ? { ...model, name, file: decodeURIComponent(basename(model.source)) } : null;
}

/** One download of a preset: the model, the roles it serves, and whether the file is already there. */
export interface PlannedModel {
  model: CatalogueModel;
  roles: ModelRole[];
  present: boolean;
}

/** What `ducklm setup --preset NAME` downloads and assigns, one entry per distinct model. */
export function presetPlan(catalogue: Catalogue, preset: string, modelsDir: string): PlannedModel[] {
  const chosen = catalogue.presets[preset];
  if (!chosen) throw new DuckError(ErrorCode.InvalidInput, `no preset "${preset}": choose one of ${Object.keys(catalogue.presets).join(", ")}`);
  const plan = new Map<string, PlannedModel>();
  for (const [role, name] of Object.entries(chosen.roles) as Array<[ModelRole, string]>) {
    const entry = plan.get(name) ?? { model: catalogueModel(catalogue, name)!, roles: [], present: false };
    entry.roles.push(role);
    plan.set(name, entry);
  }
  for (const entry of plan.values()) entry.present = existsSync(join(modelsDir, entry.model.file));
  return [...plan.values()];
}

/** The settings a role gets with a catalogue model: what the bundled models.json gives it, with the file. */
export function roleSettings(role: ModelRole, model: CatalogueModel): Record<string, unknown> {
  const decides = role === "thinker" || role === "orchestrator" || role === "coder";
  return {
    file: model.file,
    backend: "auto",
    gpu_layers: "auto",
    context_size: role === "embeddings" ? 2048 : role === "sys_util" ? 4096 : 8192,
    max_tokens: role === "embeddings" ? 1 : decides ? 2048 : 1024,
    temperature: role === "embeddings" ? 0 : role === "thinker" || role === "orchestrator" ? 0.3 : role === "coder" ? 0.2 : 0.1,
    ...(model.dimension !== undefined ? { dimension: model.dimension } : {}),
  };
}
