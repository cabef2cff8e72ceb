#!/usr/bin/env node
// In a checkout (sources and tsx present) this runs the TypeScript sources, so an edit never meets a
// stale build; an installed package runs its build.
import { existsSync } from "node:fs";

const sources = new URL("../src/cli/main.ts", import.meta.url);
const built = new URL("../dist/cli/main.js", import.meta.url);
let tsx = null;
if (existsSync(sources)) {
  tsx = await import("tsx/esm/api").catch(() => null);
}
if (tsx) {
  tsx.register();
  await import(sources.href);
} else {
  await import(built.href);
}
