import { chmodSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { makeTempDir } from "../../test/helpers/test-runtime.js";
import { ensurePrivateDir } from "./private-files.js";

const modeOf = (path: string) => statSync(path).mode & 0o777;

describe("ensurePrivateDir", () => {
  it("creates a missing folder, and the folders above it, readable by this user alone", () => {
    const dir = join(makeTempDir(), "a", "home");
    ensurePrivateDir(dir);
    expect(modeOf(dir)).toBe(0o700);
  });

  it("tightens an existing folder that is DuckLM's: empty, or holding what DuckLM writes", () => {
    const empty = makeTempDir();
    chmodSync(empty, 0o777);
    ensurePrivateDir(empty);
    expect(modeOf(empty)).toBe(0o700);
    const home = makeTempDir();
    writeFileSync(join(home, "token"), "x");
    chmodSync(home, 0o755);
    ensurePrivateDir(home);
    expect(modeOf(home)).toBe(0o700);
  });

  it("leaves any other folder's mode alone: `--home /etc` as root must not lock a system folder", () => {
    const shared = makeTempDir();
    mkdirSync(join(shared, "projects"));
    writeFileSync(join(shared, "notes.txt"), "x");
    chmodSync(shared, 0o755);
    ensurePrivateDir(shared);
    expect(modeOf(shared)).toBe(0o755);
  });

  it("refuses a path that is not a folder, and leaves it as it was (`--home /dev/null`)", () => {
    const file = join(makeTempDir(), "a-file");
    writeFileSync(file, "x");
    chmodSync(file, 0o644);
    expect(() => ensurePrivateDir(file)).toThrow(`${file} is not a folder`);
    expect(modeOf(file)).toBe(0o644);
  });
});
