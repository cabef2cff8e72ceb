import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import { beforeAll, describe, expect, it } from "vitest";
import { makeTempDir } from "../../test/helpers/test-runtime.js";
import { BUNDLED_CONFIG_DIR, loadConfig } from "../config/load-config.js";
import { CommandClassifier } from "./command-classifier.js";

// Judged against a real workspace: links, globs and repositories are what the file system says.
let root: string;
let workspace: string;
let classifier: CommandClassifier;
const classify = async (command: string) => (await classifier.classify(command, { workspace })).category;

beforeAll(() => {
  root = makeTempDir("ducklm-paths-");
  workspace = join(root, "ws");
  mkdirSync(join(workspace, "a", "b", "c"), { recursive: true });
  mkdirSync(join(root, "secret"));
  writeFileSync(join(root, "secret", "key"), "TOPSECRET\n");
  execFileSync("git", ["init", "-q", workspace]);
  // A link to the workspace itself, deep inside it: `L/..` is the workspace's parent to the kernel.
  symlinkSync(workspace, join(workspace, "a", "b", "c", "L"));
  // A link into .git: writing through it must count as writing .git.
  symlinkSync("../../../.git/info", join(workspace, "a", "b", "c", "G"));
  mkdirSync(join(workspace, "src"));
  writeFileSync(join(workspace, "src", "real.txt"), "inside\n");
  symlinkSync(join(root, "secret", "key"), join(workspace, "src", "notes.txt"));
  // A folder that git takes for a bare repository, whose config a task wrote.
  mkdirSync(join(workspace, "sub", "objects"), { recursive: true });
  mkdirSync(join(workspace, "sub", "refs"));
  writeFileSync(join(workspace, "sub", "HEAD"), "ref: refs/heads/main\n");
  writeFileSync(join(workspace, "sub", "config"), '[diff]\n\texternal = "id > ../PWNED; true"\n');
  classifier = new CommandClassifier(loadConfig(BUNDLED_CONFIG_DIR).permissions, { protectedPaths: [join(root, "home")] });
});

describe("paths judged the way the kernel resolves them", () => {
  it("follows a link before the `..` after it", async () => {
    expect(await classify("cat a/b/c/L/../secret/key")).toBe("unknown");
    expect(await classify("cat a/b/c/L/../../../../etc/shadow")).toBe("unknown");
    expect(await classify("cat a/b/c/L/src/real.txt")).toBe("normal");
  });

  it("counts a write through a link into .git as a write into .git", async () => {
    expect(await classify("echo ../evil > a/b/c/G/../commondir")).toBe("unknown");
  });

  it("does not let a glob expand to a link that leads out", async () => {
    expect(await classify("cat src/*")).toBe("unknown");
    expect(await classify("tail src/*")).toBe("unknown");
    expect(await classify("cat src/real.txt")).toBe("normal");
    expect(await classify("cat src/notes.txt")).toBe("unknown");
  });

  it("trusts git only with the workspace's own repository", async () => {
    expect(await classify("git status")).toBe("normal");
    expect(await classify("cd sub && git diff --no-index HEAD config")).toBe("unknown");
    expect(await classify("cd a && git log --oneline -1")).toBe("normal");
  });
});
