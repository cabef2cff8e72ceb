import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openFolderWithin, withFolderWithin } from "../src/tools/folder-walk.js";
import { RunLaterPlaceholders } from "../src/tools/run-later-files.js";

// DuckLM makes a stand-in's folders and the stand-in itself after checking the workspace, while other
// commands of the task may still run. A folder swapped for a link to the host in that moment must
// make nothing there: these tests put the workspace in the swapped state and check the host side.

let root: string;
let workspace: string;
let host: string;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "duck-folder-walk-"));
  workspace = join(root, "workspace");
  host = join(root, "host");
  mkdirSync(workspace);
  mkdirSync(host);
});

afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

describe("walking a workspace's folders by descriptor", () => {
  it("makes missing folders inside the workspace", () => {
    expect(withFolderWithin(workspace, "a/b/c", true, () => "made")).toBe("made");
    expect(statSync(join(workspace, "a/b/c")).isDirectory()).toBe(true);
  });

  it("refuses a folder that is a link, and makes nothing where it leads", () => {
    symlinkSync(host, join(workspace, "sub"));
    expect(openFolderWithin(workspace, "sub/deeper", true)).toBeNull();
    expect(readdirSync(host)).toEqual([]);
  });

  it("refuses `..`, and a part that is a file", () => {
    expect(openFolderWithin(workspace, "../host", true)).toBeNull();
    mkdirSync(join(workspace, "x"));
    expect(openFolderWithin(workspace, "x/../../host", false)).toBeNull();
  });
});

describe("stand-ins made while a task swaps a folder for a link", () => {
  it("no stand-in is made outside the workspace through a swapped folder", () => {
    symlinkSync(host, join(workspace, "sub"));
    const placeholders = new RunLaterPlaceholders();
    const stand = placeholders.hold(workspace, [{ name: "sub/.git", folder: true }, { name: "sub/.envrc", folder: false }], Date.now() + 60_000);
    expect(stand.paths).toEqual([]);
    expect(readdirSync(host)).toEqual([]);
    stand.release();
  });

  it("a stand-in whose folder is swapped while it is held is neither marked nor removed through the link", () => {
    mkdirSync(join(workspace, "sub"));
    const placeholders = new RunLaterPlaceholders();
    const first = placeholders.hold(workspace, [{ name: "sub/.envrc", folder: false }], Date.now() + 60_000);
    expect(first.paths).toEqual([join(workspace, "sub/.envrc")]);
    // The task moves the folder away and puts a link to the host's folder in its place, where an
    // empty `.envrc` of the host's own waits.
    renameSync(join(workspace, "sub"), join(workspace, "moved"));
    symlinkSync(host, join(workspace, "sub"));
    const hostFile = join(host, ".envrc");
    writeFileSync(hostFile, "");
    const longAgo = new Date("2020-01-01T00:00:00Z");
    utimesSync(hostFile, longAgo, longAgo);
    const second = placeholders.hold(workspace, [{ name: "sub/.envrc", folder: false }], Date.now() + 60_000);
    second.release();
    first.release();
    expect(statSync(hostFile).mtimeMs).toBe(longAgo.getTime());
    expect(existsSync(join(workspace, "moved/.envrc"))).toBe(true);
  });

  it("an ordinary stand-in is made and removed again", () => {
    const placeholders = new RunLaterPlaceholders();
    const stand = placeholders.hold(workspace, [{ name: ".git", folder: true }, { name: ".envrc", folder: false }], Date.now() + 60_000);
    expect(readdirSync(workspace).sort()).toEqual([".envrc", ".git"]);
    stand.release();
    expect(readdirSync(workspace)).toEqual([]);
  });
});
