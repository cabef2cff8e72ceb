import { randomBytes, timingSafeEqual } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** The per-install API token: `<home>/token`, created on first use with mode 0600. */
export function loadInstallToken(home: string): string {
  const file = join(home, "token");
  if (!existsSync(file)) {
    mkdirSync(home, { recursive: true, mode: 0o700 });
    writeFileSync(file, `${randomBytes(32).toString("hex")}\n`, { mode: 0o600 });
  }
  chmodSync(file, 0o600);
  return readFileSync(file, "utf8").trim();
}

export function tokensEqual(offered: string, expected: string): boolean {
  const a = Buffer.from(offered, "utf8");
  const b = Buffer.from(expected, "utf8");
  return a.length === b.length && timingSafeEqual(a, b);
}
