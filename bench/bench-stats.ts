// Summaries the benches share.
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";

/** The middle value (the upper of the two middle ones for an even count). */
export function median(numbers: number[]): number {
  const sorted = [...numbers].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** `[min–max]`, with `digits` decimals. */
export function spread(numbers: number[], digits = 3): string {
  return `[${Math.min(...numbers).toFixed(digits)}–${Math.max(...numbers).toFixed(digits)}]`;
}

/** Whether this bench runs compiled (`npm run bench…` builds it into .bench-build/) or from its source through tsx. */
const COMPILED = import.meta.url.endsWith(".js");

/** The repository's root folder, from a bench compiled into .bench-build/bench/ or from its source in bench/. */
export const REPO_ROOT = resolve(import.meta.dirname, COMPILED ? "../.." : "..");

/**
 * A script of the benches to start in a child process, as this one runs: compiled, or through tsx.
 * `execArgv` goes before the script's path.
 */
export function benchScript(name: string): { file: string; execArgv: string[] } {
  return COMPILED ? { file: join(import.meta.dirname, `${name}.js`), execArgv: [] } : { file: join(import.meta.dirname, `${name}.ts`), execArgv: ["--import", import.meta.resolve("tsx")] };
}

/**
 * A bench's home and workspace, side by side in its temporary folder: DuckLM refuses a workspace
 * that is its home or lies inside it (a task could reach the database and token).
 */
export function benchFolders(dir: string): { home: string; workspace: string } {
  const home = join(dir, "home");
  const workspace = join(dir, "workspace");
  mkdirSync(home, { recursive: true });
  mkdirSync(workspace, { recursive: true });
  return { home, workspace };
}
