import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { DuckConfig } from "../config/config-schemas.js";
import { ensurePrivateDir } from "../storage/private-files.js";

/**
 * What the check of permissions.json's examples depends on: the rules and examples themselves and
 * the classifier's code (every file of this folder, by size and time written). The same key means
 * the same verdicts, so a check that passed need not run again — it parses several hundred scripts,
 * most of a command's start-up.
 */
export function examplesCheckKey(permissions: DuckConfig["permissions"]): string {
  const hash = createHash("sha256").update(JSON.stringify(permissions));
  const folder = fileURLToPath(new URL(".", import.meta.url));
  for (const name of readdirSync(folder).sort()) {
    const stat = statSync(join(folder, name));
    hash.update(`\n${name} ${stat.size} ${stat.mtimeMs}`);
  }
  return hash.digest("hex");
}

const RECORD = "permission-examples-checked";

/** Whether this home recorded a passed check under `key`. */
export function examplesCheckPassed(home: string, key: string): boolean {
  try {
    return readFileSync(join(home, "cache", RECORD), "utf8").trim() === key;
  } catch {
    return false;
  }
}

/** Records a passed check; a home that cannot take it simply checks again next time. */
export function recordExamplesCheckPassed(home: string, key: string): void {
  try {
    ensurePrivateDir(join(home, "cache"));
    writeFileSync(join(home, "cache", RECORD), `${key}\n`, { mode: 0o600 });
  } catch {
    // Only a start-up saving is lost.
  }
}
