import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ModelsConfigSchema } from "./config-schemas.js";

/**
 * Points a role at a model file in config/models.json, keeping every other setting of the file and
 * the role as they are, and writing atomically.
 */
export function setRoleModelFile(configDir: string, role: string, file: string): void {
  const path = join(configDir, "models.json");
  const raw = existsSync(path) ? (JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>) : {};
  const roles = (raw.roles ?? {}) as Record<string, Record<string, unknown>>;
  // A pulled file replaces a server the role pointed at.
  const { server: _server, ...rest } = roles[role] ?? {};
  roles[role] = { ...rest, file };
  const next = { ...raw, roles };
  ModelsConfigSchema.parse(next);
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(next, null, 2)}\n`);
  renameSync(temporary, path);
}
