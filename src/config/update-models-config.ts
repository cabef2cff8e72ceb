import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ModelsConfigSchema } from "./config-schemas.js";
import { overlayConfig } from "./config-overlay.js";
import { BUNDLED_CONFIG_DIR } from "./load-config.js";

/**
 * Sets roles in the user's config/models.json, keeping every other setting of the file and of each
 * role as it is, and writing atomically. The file holds only what the user set: it is laid over the
 * bundled one, so roles and settings not named keep their bundled values; the package's file is
 * never written.
 */
export function setRoleModels(configDir: string, settings: Record<string, Record<string, unknown>>): void {
  const path = join(configDir, "models.json");
  const raw = existsSync(path) ? (JSON.parse(readFileSync(path, "utf8").replace(/^\uFEFF/, "")) as Record<string, unknown>) : {};
  const roles = { ...((raw.roles ?? {}) as Record<string, Record<string, unknown>>) };
  for (const [role, values] of Object.entries(settings)) {
    // A file given replaces a server the role pointed at.
    const { server: _server, ...rest } = roles[role] ?? {};
    roles[role] = { ...rest, ...values };
  }
  const next = { ...raw, roles };
  const bundled = join(BUNDLED_CONFIG_DIR, "models.json");
  ModelsConfigSchema.parse(existsSync(bundled) ? overlayConfig("models.json", JSON.parse(readFileSync(bundled, "utf8")), next) : next);
  mkdirSync(configDir, { recursive: true });
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(next, null, 2)}\n`);
  renameSync(temporary, path);
}

/** Points one role at a model file (`ducklm models pull --role`). */
export function setRoleModelFile(configDir: string, role: string, file: string): void {
  setRoleModels(configDir, { [role]: { file } });
}
