#!/usr/bin/env node
// Runs the build (dist/, written by `npm install` through `prepare`, or `npm run build`). In a
// checkout whose TypeScript sources are newer than that build, it runs the sources through tsx
// instead, so an edit never meets a stale build; an installed package has no sources and runs its build.
import { existsSync, readdirSync, statSync } from "node:fs";
import { setFlagsFromString } from "node:v8";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const sources = new URL("../src/cli/main.ts", import.meta.url);
const built = new URL("../dist/cli/main.js", import.meta.url);

/** Whether a source file changed after the build was written (a few milliseconds for the whole tree). */
function sourcesNewerThanBuild() {
  if (!existsSync(built)) return true;
  const builtAt = statSync(built).mtimeMs;
  const folders = [fileURLToPath(new URL("../src/", import.meta.url))];
  while (folders.length > 0) {
    const folder = folders.pop();
    for (const entry of readdirSync(folder, { withFileTypes: true })) {
      const path = join(folder, entry.name);
      if (entry.isDirectory()) folders.push(path);
      else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts") && statSync(path).mtimeMs > builtAt) return true;
    }
  }
  return false;
}

// The shell parser is a 1.4 MB WebAssembly grammar. A command judges a few short scripts, and V8's
// baseline compiler serves those at once; recompiling the grammar with the optimising one took the
// main thread for most of a second on a 2-core machine.
setFlagsFromString("--liftoff-only");

let tsx = null;
if (existsSync(sources) && sourcesNewerThanBuild()) {
  tsx = await import("tsx/esm/api").catch(() => null);
}
if (tsx) {
  tsx.register();
  await import(sources.href);
} else {
  await import(built.href);
}
