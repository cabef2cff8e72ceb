import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { makeTempDir } from "./helpers/test-runtime.js";

const root = join(import.meta.dirname, "..");

/** A package laid out as a checkout: bin/, a source entry and a build entry that say which ran. */
function checkout(): { dir: string; run: () => string } {
  const dir = makeTempDir("ducklm-entry-");
  mkdirSync(join(dir, "bin"));
  cpSync(join(root, "bin", "ducklm.js"), join(dir, "bin", "ducklm.js"));
  writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }));
  mkdirSync(join(dir, "src", "cli"), { recursive: true });
  writeFileSync(join(dir, "src", "cli", "main.ts"), 'const from: string = "sources";\nconsole.log(from);\n');
  mkdirSync(join(dir, "dist", "cli"), { recursive: true });
  writeFileSync(join(dir, "dist", "cli", "main.js"), 'console.log("build");\n');
  symlinkSync(join(root, "node_modules"), join(dir, "node_modules"));
  return { dir, run: () => execFileSync(process.execPath, [join(dir, "bin", "ducklm.js")], { encoding: "utf8" }).trim() };
}

const setTime = (path: string, seconds: number) => utimesSync(path, seconds, seconds);

describe("bin/ducklm.js", () => {
  it("runs the build when it is newer than every source, and the sources once one of them changes", () => {
    const { dir, run } = checkout();
    const now = Date.now() / 1000;
    setTime(join(dir, "src", "cli", "main.ts"), now - 100);
    setTime(join(dir, "dist", "cli", "main.js"), now - 50);
    expect(run()).toBe("build");
    // An edit after the build: the build is stale, so the sources run through tsx.
    mkdirSync(join(dir, "src", "tools"));
    writeFileSync(join(dir, "src", "tools", "edited.ts"), "export {};\n");
    expect(run()).toBe("sources");
    // A test file is not part of the build.
    setTime(join(dir, "src", "tools", "edited.ts"), now - 100);
    writeFileSync(join(dir, "src", "tools", "edited.test.ts"), "export {};\n");
    expect(run()).toBe("build");
  });

  it("runs the sources when there is no build", () => {
    const { dir, run } = checkout();
    execFileSync("rm", ["-r", join(dir, "dist")]);
    expect(run()).toBe("sources");
  });
});
