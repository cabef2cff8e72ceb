import { spawn } from "node:child_process";
import { cpSync } from "node:fs";
import { join, resolve } from "node:path";
import { makeTempDir } from "./test-runtime.js";

export const REPO_ROOT = resolve(import.meta.dirname, "../..");
// Resolved here, because `--import tsx` would be looked up from the child's working directory.
const tsxLoader = import.meta.resolve("tsx");

/** A copy of the bundled config folder that a test may change. */
export function copyOfConfig(prefix = "ducklm-config-"): string {
  const dir = makeTempDir(prefix);
  cpSync(join(REPO_ROOT, "config"), dir, { recursive: true });
  return dir;
}

/**
 * Runs `ducklm` from the sources with its own config and a fresh home, without blocking: a loopback
 * server in the test's own process can answer the child while it runs.
 */
export function runDucklm(args: string[], configDir: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, ["--import", tsxLoader, join(REPO_ROOT, "src/cli/main.ts"), "--config", configDir, "--home", makeTempDir(), ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("exit", (code) => done({ code, stdout, stderr }));
  });
}
