import { spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { makeTempDir } from "./helpers/test-runtime.js";

const root = resolve(import.meta.dirname, "..");

/** Every file and folder under `dir`, relative to it. */
function tree(dir: string): string[] {
  const found: string[] = [];
  const walk = (folder: string) => {
    for (const entry of readdirSync(folder, { withFileTypes: true })) {
      const path = join(folder, entry.name);
      found.push(relative(dir, path));
      if (entry.isDirectory()) walk(path);
    }
  };
  walk(dir);
  return found.sort();
}

const gitStatus = () => spawnSync("git", ["status", "--porcelain", "--untracked-files=all"], { cwd: root, encoding: "utf8" }).stdout;

describe("where the CLI writes", () => {
  it("run from a folder outside the checkout, writes only under the user's data and config folders", () => {
    // A user with nothing set but HOME: the defaults decide where things go.
    const user = makeTempDir("ducklm-user-");
    const temp = makeTempDir("ducklm-user-tmp-");
    const folder = makeTempDir("ducklm-project-");
    writeFileSync(join(folder, "notes.txt"), "ducks like bread\n");
    mkdirSync(join(folder, "src"));
    const before = tree(folder);
    const checkoutBefore = gitStatus();
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: user, TMPDIR: temp, LANG: "C.UTF-8" };
    const ducklm = (...args: string[]) => spawnSync(process.execPath, [join(root, "bin/ducklm.js"), ...args], { cwd: folder, env, encoding: "utf8", timeout: 90_000 });
    for (const args of [["--version"], ["run", "read file notes.txt"], ["run", "remember that the heron nests by the mill"], ["tasks"], ["config", "path"], ["models", "list"], ["memory", "list"]]) {
      const result = ducklm(...args);
      expect(result.status, `${args.join(" ")}: ${result.stderr}`).toBe(0);
    }
    expect(ducklm("run", "read file notes.txt").stdout).toContain("ducks like bread");
    // The project folder is as it was: no ./data, no logs, no config.
    expect(tree(folder)).toEqual(before);
    // In the user's home: the data folder, and the config folder, empty (made so that commands can
    // be kept out of it), and nothing else of DuckLM's.
    const written = tree(user);
    expect(written.length).toBeGreaterThan(0);
    expect(written.filter((path) => !path.startsWith(".local") && !path.startsWith(".config"))).toEqual([]);
    expect(written.every((path) => [".local", join(".local", "share")].includes(path) || path.startsWith(join(".local", "share", "ducklm")) || [".config", join(".config", "ducklm")].includes(path))).toBe(true);
    expect(statSync(join(user, ".local", "share", "ducklm")).mode & 0o777).toBe(0o700);
    expect(statSync(join(user, ".config", "ducklm")).mode & 0o777).toBe(0o700);
    // (A checkout whose sources are newer than its build runs them through tsx, which keeps its
    // compile cache in the temporary folder: that is the checkout's, not DuckLM's.)
    expect(tree(temp).filter((path) => !path.startsWith("tsx-"))).toEqual([]);
    // Nor does it write into the package it runs from.
    expect(gitStatus()).toBe(checkoutBefore);
  }, 240_000);
});
