import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { makeTempDir } from "./helpers/test-runtime.js";

const root = join(import.meta.dirname, "..");

// The package as a user gets it: `npm pack`, unpacked into a fresh project, its example type-checked
// against the published .d.ts and run. Dependencies are linked from this checkout's node_modules
// (installing them again would only download the same files).
describe("the published package", () => {
  it("packs the build and its types, and runs the SDK example from a fresh project", () => {
    const out = makeTempDir("ducklm-pack-");
    // Packed from a copy: `prepare` builds dist/ there, never under the CLI tests running beside this one.
    const staging = makeTempDir("ducklm-staging-");
    for (const entry of ["package.json", "README.md", "tsconfig.json", "tsconfig.build.json", "bin", "config", "web", "examples", "src"]) cpSync(join(root, entry), join(staging, entry), { recursive: true });
    symlinkSync(join(root, "node_modules"), join(staging, "node_modules"));
    const packed = execFileSync("npm", ["pack", "--json", "--pack-destination", out], { cwd: staging, encoding: "utf8", env: { ...process.env, npm_config_loglevel: "error" } });
    const [{ filename, files }] = JSON.parse(packed) as [{ filename: string; files: Array<{ path: string }> }];
    const paths = files.map((file) => file.path);
    expect(paths).toContain("dist/index.js");
    expect(paths).toContain("dist/index.d.ts");
    expect(paths).toContain("dist/cli/main.js");
    expect(paths).toContain("config/permissions.json");
    expect(paths.some((path) => path.startsWith("src/") || path.startsWith("test/") || path.endsWith(".test.js"))).toBe(false);

    const project = makeTempDir("ducklm-consumer-");
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "consumer", type: "module", private: true }));
    const modules = join(project, "node_modules");
    mkdirSync(join(modules, "ducklm"), { recursive: true });
    execFileSync("tar", ["-xzf", join(out, filename), "-C", join(modules, "ducklm"), "--strip-components", "1"]);
    for (const name of readdirSync(join(root, "node_modules"))) {
      if (name === "ducklm" || name.startsWith(".")) continue;
      symlinkSync(join(root, "node_modules", name), join(modules, name));
    }
    cpSync(join(root, "examples", "embed-ducklm.ts"), join(project, "embed-ducklm.ts"));
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({ compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true, types: ["node"], skipLibCheck: false, outDir: "build" }, files: ["embed-ducklm.ts"] }),
    );
    const typecheck = spawnSync(process.execPath, [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", project], { encoding: "utf8" });
    expect(typecheck.status, typecheck.stdout + typecheck.stderr).toBe(0);
    const run = spawnSync(process.execPath, [join(project, "build", "embed-ducklm.js")], { cwd: project, encoding: "utf8", timeout: 120_000 });
    expect(run.status, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toMatch(/asks: cp notes\.txt copy\.txt/);
    expect(run.stdout).toMatch(/answer: ducks like bread/);
    expect(run.stdout).toMatch(/task \S+ completed/);
  }, 300_000);
});
