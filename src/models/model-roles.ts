import { statSync, type Stats } from "node:fs";
import { isAbsolute, join } from "node:path";
import type { ModelRoleConfig, ModelsConfig } from "../config/config-schemas.js";
import type { ModelRole } from "../contracts/index.js";
import { ggufEmbeddingLength, ggufFileProblem, ggufModelProblem } from "./gguf/gguf-header.js";

/** Which role stands in when a role's own file is missing (the seed's critic shares the JSON compiler's model). */
export const ROLE_FALLBACKS: Partial<Record<ModelRole, ModelRole>> = {
  critic: "json_compiler",
  sys_util: "json_compiler",
  json_compiler: "thinker",
  coder: "thinker",
  orchestrator: "thinker",
};

export interface ResolvedRole {
  role: ModelRole;
  /** The role's own entry in models.json, if any. */
  config: ModelRoleConfig | null;
  /** Absolute path of the role's own file (null for a server role). */
  path: string | null;
  /** The role runs on an OpenAI-compatible server (always counted as present; reachability shows at call time). */
  remote: boolean;
  present: boolean;
  /** Why the role's file, which exists, cannot be its model (not GGUF, a folder, empty); null otherwise. */
  problem: string | null;
  sizeBytes: number | null;
  /** The role whose model actually serves this one (itself, a fallback, or none). */
  servedBy: ModelRole | null;
}

export function modelPath(modelsDir: string, file: string): string {
  return isAbsolute(file) ? file : join(modelsDir, file);
}

/**
 * Resolves every role to a file that exists, following fallbacks; roles with nothing to run get
 * `servedBy: null`. `fileProblem` judges a file that is there (by default from its first bytes).
 */
/** A file's stat, or undefined where there is none: missing, or a path through a file (a home that is a file). */
function statIfThere(path: string): Stats | undefined {
  try {
    return statSync(path, { throwIfNoEntry: false });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOTDIR") return undefined;
    throw error;
  }
}

/** Why an embedding model is not the one models.json describes: it gives vectors of another width. */
async function dimensionProblem(path: string, dimension: number): Promise<string | null> {
  const length = await ggufEmbeddingLength(path);
  if (length === null || length === dimension) return null;
  return `gives ${length}-dimensional vectors, but models.json says dimension ${dimension}: set roles.embeddings.dimension to ${length} in your models.json (\`ducklm config path\` names it)`;
}

export function resolveRoles(config: ModelsConfig, modelsDir: string, fileProblem: (path: string, role: ModelRole) => string | null = ggufFileProblem): Map<ModelRole, ResolvedRole> {
  const own = new Map<ModelRole, ResolvedRole>();
  const roles: ModelRole[] = ["thinker", "json_compiler", "critic", "coder", "sys_util", "orchestrator", "embeddings"];
  for (const role of roles) {
    const entry = config.roles[role] ?? null;
    const remote = entry?.server !== undefined;
    const path = entry?.file !== undefined ? modelPath(modelsDir, entry.file) : null;
    const info = path ? statIfThere(path) : undefined;
    // A file that is there but is no model (an HTML page saved by a download, a folder) serves nothing.
    const problem = !remote && path && info ? fileProblem(path, role) : null;
    const present = remote || (Boolean(info?.isFile()) && problem === null);
    own.set(role, { role, config: entry, path, remote, present, problem, sizeBytes: info?.isFile() ? info.size : null, servedBy: present ? role : null });
  }
  for (const role of roles) {
    const resolved = own.get(role)!;
    if (resolved.present) continue;
    let candidate = ROLE_FALLBACKS[role];
    const seen = new Set<ModelRole>([role]);
    while (candidate && !seen.has(candidate)) {
      seen.add(candidate);
      if (own.get(candidate)?.present) {
        resolved.servedBy = candidate;
        break;
      }
      candidate = ROLE_FALLBACKS[candidate];
    }
  }
  return own;
}

/**
 * `resolveRoles` with each local file read through to its tensor table (`ggufModelProblem`), so that a
 * file cut short or damaged inside counts as broken: for `models list` and `doctor`, which can afford it.
 */
export async function resolveRolesChecked(config: ModelsConfig, modelsDir: string): Promise<Map<ModelRole, ResolvedRole>> {
  const problems = new Map<string, string | null>();
  for (const entry of Object.values(config.roles)) {
    if (!entry?.file || entry.server !== undefined) continue;
    const path = modelPath(modelsDir, entry.file);
    if (!problems.has(path) && statIfThere(path)) problems.set(path, await ggufModelProblem(path));
  }
  // An embedding model of another width than models.json says fails at the first memory search; said here first.
  const embeddings = config.roles.embeddings;
  const embeddingsPath = embeddings?.file && embeddings.server === undefined ? modelPath(modelsDir, embeddings.file) : null;
  const embeddingsProblem = embeddingsPath === null || problems.get(embeddingsPath) !== null || embeddings?.dimension === undefined ? null : await dimensionProblem(embeddingsPath, embeddings.dimension);
  return resolveRoles(config, modelsDir, (path, role) => (role === "embeddings" && embeddingsProblem !== null ? embeddingsProblem : (problems.get(path) ?? ggufFileProblem(path))));
}
