// Compiles the benches, with DuckLM and the test helpers they use, into .bench-build/ with tsc, as
// DuckLM itself is built for its package (dist/). A bench run through tsx would measure esbuild's
// output instead, which wraps every function it creates in a `__name` call (its keepNames); the
// peers the benches compare with run their published JavaScript. The package's own build (dist/) is
// brought up to date too: cli-start measures bin/ducklm.js, which runs it.
import { spawnSync } from "node:child_process";
import { mkdirSync, rmSync, symlinkSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";

const root = resolve(import.meta.dirname, "..");
const out = join(root, ".bench-build");
rmSync(out, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
for (const project of [join(root, "bench", "tsconfig.json"), join(root, "tsconfig.build.json")]) {
  const built = spawnSync(process.execPath, [tsc, "-p", project], { stdio: "inherit" });
  if (built.status !== 0) process.exit(built.status ?? 1);
}
// The compiled modules find the bundled config and the web page where the sources do: beside them.
mkdirSync(out, { recursive: true });
for (const folder of ["config", "web"]) symlinkSync(join(root, folder), join(out, folder), "dir");
