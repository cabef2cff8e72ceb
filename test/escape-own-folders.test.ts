import { spawnSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { tmpdir } from "node:os";
import { describe, expect, it } from "vitest";
import { BUNDLED_CONFIG_DIR } from "../src/config/load-config.js";
import { programPaths, programPathsOf, sandboxPathsFor } from "../src/runtime/create-runtime.js";
import { workspaceRefusal } from "../src/runtime/workspace-refusal.js";
import { fileWriteTool } from "../src/tools/builtin/file-write.js";
import { bubblewrapShell } from "../src/tools/shell-sandbox.js";
import { createTestRuntime, makeTempDir } from "./helpers/test-runtime.js";
import { runConfined } from "./helpers/test-tools.js";

const root = join(import.meta.dirname, "..");
const tsxLoader = import.meta.resolve("tsx");

const runIn = (sandbox: ReturnType<typeof bubblewrapShell>, command: string, workspace: string) => runConfined(sandbox, command, workspace);

describe("DuckLM's own folders, from a task's side", () => {
  it("keeps its program read-only where it lies in the workspace: the code it runs, its packages, its page and its bundled config", async () => {
    const names = programPaths().map((path) => path.slice(dirname(BUNDLED_CONFIG_DIR).length + 1));
    expect(names).toEqual(expect.arrayContaining(["bin", "dist", "src", "node_modules", "package.json", "tsconfig.json", "web", "config"]));
    expect(sandboxPathsFor(makeTempDir("ducklm-own-home-"), makeTempDir("ducklm-own-config-")).readOnlyPaths).toEqual(programPaths());

    // A checkout of its own, as a workspace: the commands of a task approved in advance.
    const checkout = makeTempDir("ducklm-own-checkout-");
    for (const folder of ["dist", "src", "bin", "node_modules/dep", "web"]) mkdirSync(join(checkout, folder), { recursive: true });
    writeFileSync(join(checkout, "dist", "main.js"), "console.log('the real code');\n");
    writeFileSync(join(checkout, "package.json"), '{"name":"ducklm"}\n');
    writeFileSync(join(checkout, "web", "app.js"), "// the page\n");
    const program = ["dist", "src", "bin", "node_modules", "web", "package.json"].map((entry) => join(checkout, entry));
    const sandbox = bubblewrapShell({ hiddenPaths: [], readOnlyPaths: program });
    expect(await runIn(sandbox, "cat dist/main.js", checkout)).toBe("console.log('the real code');\n");
    for (const attack of [
      "echo 'import(\"node:fs\")' >> dist/main.js",
      "rm -rf dist",
      "mv dist old && mkdir dist",
      "echo '{}' > package.json",
      "echo 'steal()' >> web/app.js",
      "mkdir -p node_modules/dep && echo x > node_modules/dep/index.js",
      "echo x > src/evil.ts",
    ]) {
      await runIn(sandbox, attack, checkout);
      expect(readFileSync(join(checkout, "dist", "main.js"), "utf8"), attack).toBe("console.log('the real code');\n");
      expect(readFileSync(join(checkout, "package.json"), "utf8"), attack).toBe('{"name":"ducklm"}\n');
      expect(readFileSync(join(checkout, "web", "app.js"), "utf8"), attack).toBe("// the page\n");
      expect(readdirSync(join(checkout, "node_modules", "dep")), attack).toEqual([]);
      expect(readdirSync(join(checkout, "src")), attack).toEqual([]);
    }
    // A program folder or file that is not there (no build yet, no .npmrc) cannot be made with code in it either.
    const unbuilt = makeTempDir("ducklm-own-unbuilt-");
    mkdirSync(join(unbuilt, "src"));
    const fresh = bubblewrapShell({ hiddenPaths: [], readOnlyPaths: ["dist", "src", "node_modules", ".npmrc"].map((entry) => join(unbuilt, entry)) });
    await runIn(fresh, "mkdir -p dist/cli node_modules/commander && echo 'steal()' > dist/cli/main.js; echo 'steal()' > node_modules/commander/esm.mjs; echo node-options=--import=./x.mjs > .npmrc", unbuilt);
    expect(existsSync(join(unbuilt, "dist", "cli", "main.js"))).toBe(false);
    expect(existsSync(join(unbuilt, "node_modules", "commander"))).toBe(false);
    expect(existsSync(join(unbuilt, ".npmrc")) ? readFileSync(join(unbuilt, ".npmrc"), "utf8") : "").toBe("");
    // Installed in a project, the project's node_modules (its dependencies, its .bin) is the program too.
    expect(programPathsOf("/p/node_modules/ducklm")).toEqual(expect.arrayContaining(["/p/node_modules/ducklm/dist", "/p/node_modules/ducklm/src", "/p/node_modules", "/p/.npmrc"]));
    expect(programPathsOf("/p/node_modules/.pnpm/ducklm@1/node_modules/ducklm")).toContain("/p/node_modules");
    expect(programPathsOf("/home/me/ducklm")).not.toContain("/home/me");
    // The file tools read it and never write it.
    const context = { workspace: checkout, readOnlyPaths: program, protectedPaths: [], signal: new AbortController().signal } as unknown as Parameters<typeof fileWriteTool.execute>[1];
    await expect(fileWriteTool.execute({ path: "dist/main.js", content: "x", mode: "overwrite" }, context)).rejects.toMatchObject({ code: "DUCK_ERR_PATH_PROTECTED", message: expect.stringContaining("DuckLM's own program") });
    await expect(fileWriteTool.execute({ path: "dist/new.js", content: "x", mode: "create" }, context)).rejects.toMatchObject({ code: "DUCK_ERR_PATH_PROTECTED" });
    expect(readdirSync(join(checkout, "dist"))).toEqual(["main.js"]);
  });

  it("makes the user's config folder at start, so a task cannot make it (with confinement turned off) for the next start", async () => {
    const workspace = makeTempDir("ducklm-own-home-ws-");
    const configDir = join(workspace, ".config", "ducklm");
    const runtime = createTestRuntime({ home: join(workspace, ".local", "share", "ducklm"), workspace, configDir, runtime: { retry: { max_step_retries: 0 } } });
    try {
      await runtime.ready();
      expect(existsSync(configDir)).toBe(true);
      await runtime.loop.submit({ text: 'run `mkdir -p .config/ducklm && echo \'{"sandbox":{"mode":"off"}}\' > .config/ducklm/runtime.json`', auto_approve: ["unknown"] }).done;
      expect(readdirSync(configDir)).toEqual([]);
    } finally {
      await runtime.dispose();
    }
  });

  it("refuses a workspace that is, or lies inside, its home, the user's config, the bundled config or its program", async () => {
    const home = makeTempDir("ducklm-own-refuse-home-");
    const configDir = makeTempDir("ducklm-own-refuse-config-");
    const workspace = makeTempDir("ducklm-own-refuse-ws-");
    const runtime = createTestRuntime({ home, workspace, configDir });
    try {
      mkdirSync(join(home, "inside"), { recursive: true });
      for (const refused of [home, join(home, "inside"), configDir, BUNDLED_CONFIG_DIR, join(BUNDLED_CONFIG_DIR, "prompts"), join(root, "src")]) {
        expect(() => runtime.loop.submit({ text: "read file x.txt", workspace: refused }), refused).toThrow(/is DuckLM's own (state|program) or lies inside it/);
      }
      // A folder that holds them (a checkout, a home directory) is a workspace: they are hidden or read-only
      // in it, unless a part of the program is a link there (a worktree's node_modules), which a task could swap.
      if (lstatSync(join(root, "node_modules")).isSymbolicLink()) {
        expect(() => runtime.loop.submit({ text: "read file package.json", workspace: root })).toThrow(/node_modules in it is a symbolic link/);
      } else {
        expect((await runtime.loop.submit({ text: "read file package.json", workspace: root }).done).state).toBe("completed");
      }
      // Nor may a workspace hold the system's folders, other users' homes, or the temporary folder where
      // DuckLM's private helpers lie (a container's working folder is often `/`).
      for (const refused of ["/", "/tmp", "/var", "/home", "/usr", tmpdir()]) {
        expect(() => runtime.loop.submit({ text: "read file x.txt", workspace: refused }), refused).toThrow(/holds \/[a-z]*.*choose a project folder/);
      }
      for (const refused of ["/etc/cron.d", "/usr/local/bin", "/dev/shm"].filter((folder) => existsSync(folder))) {
        expect(() => runtime.loop.submit({ text: "read file x.txt", workspace: refused }), refused).toThrow(/lies in \/[a-z]+.*choose a project folder/);
      }
      const linked = makeTempDir("ducklm-own-linked-");
      expect(workspaceRefusal(linked, [], [join(linked, "node_modules")])).toBeNull();
      symlinkSync(makeTempDir("ducklm-own-real-modules-"), join(linked, "node_modules"));
      expect(workspaceRefusal(linked, [], [join(linked, "node_modules")])).toMatch(/is a symbolic link, which a task could replace/);
    } finally {
      await runtime.dispose();
    }
    // The command line says so before it opens anything.
    const cli = spawnSync(process.execPath, ["--import", tsxLoader, join(root, "src/cli/main.ts"), "--workspace", join(root, "config"), "run", "read file permissions.json"], {
      env: { ...process.env, DUCKLM_HOME: home, DUCKLM_CONFIG: configDir },
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(cli.status).toBe(2);
    expect(cli.stderr).toMatch(/DUCK_ERR_INVALID_INPUT: the workspace .*config is DuckLM's own state or lies inside it/);
  }, 120_000);
});
