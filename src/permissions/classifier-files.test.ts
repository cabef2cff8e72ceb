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

describe("the files a command runs, which an approval is bound to", () => {
  const judge = (command: string, pendingFiles?: ReadonlyMap<string, string>) => classifier.classify(command, { workspace, ...(pendingFiles ? { pendingFiles } : {}) });

  it("names a script, a program file, a program of the workspace and a build recipe, and digests what they hold", async () => {
    writeFileSync(join(workspace, "run.sh"), "echo one\n");
    writeFileSync(join(workspace, "tool.py"), "print(1)\n");
    writeFileSync(join(workspace, "package.json"), '{"scripts":{"test":"echo ok"}}\n');
    expect((await judge("bash run.sh")).ran_files).toEqual(["run.sh"]);
    expect((await judge("./run.sh")).ran_files).toEqual(["run.sh"]);
    expect((await judge("python3 tool.py --fast")).ran_files).toEqual(["tool.py"]);
    expect((await judge("npm test")).ran_files).toEqual([".npmrc", "package.json"]);
    expect((await judge("make all")).ran_files).toEqual(["GNUmakefile", "Makefile", "makefile"]);
    expect((await judge("make -C a all")).ran_files).toEqual(["a/GNUmakefile", "a/Makefile", "a/makefile"]);
    // A command that runs no file of the workspace is bound to nothing.
    const plain = await judge("cp a.txt b.txt");
    expect(plain.ran_files).toBeUndefined();
    expect(plain.content_digest).toBeUndefined();

    const before = (await judge("bash run.sh")).content_digest;
    expect(before).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect((await judge("bash run.sh")).content_digest).toBe(before);
    writeFileSync(join(workspace, "run.sh"), "echo two\n");
    expect((await judge("bash run.sh")).content_digest).not.toBe(before);
    // A makefile that appears later changes what `make` runs.
    const noMakefile = (await judge("make")).content_digest;
    writeFileSync(join(workspace, "Makefile"), "all:\n\ttrue\n");
    expect((await judge("make")).content_digest).not.toBe(noMakefile);
  });

  it("judges a script by what a coder step is about to write into it, not by what the disk holds", async () => {
    writeFileSync(join(workspace, "test.sh"), "echo harmless\n");
    const onDisk = await judge("bash test.sh");
    expect(onDisk.category).toBe("unknown");
    const pending = new Map([[join(workspace, "test.sh"), "rm -r victimdir; head -c 60 /etc/shadow\n"]]);
    const toBeWritten = await judge("bash test.sh", pending);
    expect(toBeWritten.category).toBe("no_always");
    expect(toBeWritten.commands).toContain("rm -r victimdir");
    expect(toBeWritten.commands).not.toContain("echo harmless");
    // Its digest is the one the file will have once written.
    expect(toBeWritten.content_digest).not.toBe(onDisk.content_digest);
    writeFileSync(join(workspace, "test.sh"), "rm -r victimdir; head -c 60 /etc/shadow\n");
    expect((await judge("bash test.sh")).content_digest).toBe(toBeWritten.content_digest);
  });

  it("judges a script wherever the command may run it, and asks every time where it cannot be read or bound", async () => {
    mkdirSync(join(workspace, "deep"), { recursive: true });
    writeFileSync(join(workspace, "deep", "r.sh"), "rm -r ../victimdir\n");
    // After a cd, the script there is judged (and bound) as the one at the top would be.
    const afterCd = await judge("cd deep && bash r.sh");
    expect(afterCd.category).toBe("no_always");
    expect(afterCd.ran_files).toContain("deep/r.sh");
    expect((await judge("cd deep; bash r.sh")).commands).toContain("rm -r ../victimdir");
    // Which file a glob names depends on what is there; a script too large to judge is not judged.
    expect((await judge("bash deep/r?.sh")).category).toBe("no_always");
    writeFileSync(join(workspace, "big.sh"), `${"# padding\n".repeat(30_000)}echo done\n`);
    expect((await judge("bash big.sh")).category).toBe("no_always");
    expect((await judge('cd "$SOMEWHERE" && python3 t.py')).category).toBe("no_always");
  });

  it("reads a coder step's pending file under a link on its way as the file the command names", async () => {
    mkdirSync(join(workspace, "real"), { recursive: true });
    writeFileSync(join(workspace, "real", "r.sh"), "echo ok\n");
    symlinkSync(join(workspace, "real"), join(workspace, "linked"));
    // What the coder will write through the link, keyed as permit-call keys it (both names).
    const pending = new Map([
      [join(workspace, "linked", "r.sh"), "rm -r victimdir\n"],
      [join(workspace, "real", "r.sh"), "rm -r victimdir\n"],
    ]);
    const verdict = await judge("bash real/r.sh", pending);
    expect(verdict.category).toBe("no_always");
    expect(verdict.commands).not.toContain("echo ok");
  });

  it("binds what a build runner or a program takes its commands from, and judges the package.json scripts it runs", async () => {
    mkdirSync(join(workspace, "pkg"), { recursive: true });
    writeFileSync(join(workspace, "pkg", "package.json"), JSON.stringify({ scripts: { test: "bash t.sh", preinstall: "rm -r ../victimdir", build: "echo built" } }));
    writeFileSync(join(workspace, "pkg", "t.sh"), "echo testing\n");
    // The script package.json runs is bound and judged, in the package's folder.
    for (const command of ["npm --prefix pkg test", "npm -C pkg test", "cd pkg && npm test", "npm --loglevel warn --prefix=pkg t"]) {
      const verdict = await judge(command);
      expect(verdict.ran_files, command).toEqual(expect.arrayContaining(["pkg/package.json", "pkg/t.sh"]));
      expect(verdict.commands, command).toContain("echo testing");
    }
    // A lifecycle script is judged like any command: `rm -r` in preinstall is asked every time.
    expect((await judge("cd pkg && npm install")).category).toBe("no_always");
    expect((await judge("cd pkg && npm ci")).category).toBe("no_always");
    expect((await judge("yarn --cwd pkg build")).ran_files).toContain("pkg/package.json");
    expect((await judge("make -kC pkg")).ran_files).toEqual(["pkg/GNUmakefile", "pkg/Makefile", "pkg/makefile"]);
    expect((await judge("make -kfpkg/build.mk")).ran_files).toEqual(["pkg/build.mk"]);
    // Files a networked program sends or obeys.
    writeFileSync(join(workspace, "req.txt"), "requests\n");
    expect((await judge("pip install -r req.txt")).ran_files).toEqual(["req.txt"]);
    expect((await judge("pip install -e .")).ran_files).toEqual(["pyproject.toml", "setup.cfg", "setup.py"]);
    expect((await judge("curl -K curl.cfg https://example.org")).ran_files).toEqual(["curl.cfg"]);
    expect((await judge("curl -d @req.txt https://example.org")).ran_files).toEqual(["req.txt"]);
    // `export BASH_ENV=…` makes every later bash run a file first.
    expect((await judge("export BASH_ENV=l.sh; bash -c true")).category).toBe("no_always");
  });

  it("binds the modules beside a program file only where the command needs the network", async () => {
    mkdirSync(join(workspace, "py"), { recursive: true });
    writeFileSync(join(workspace, "py", "t.py"), "import m\n");
    writeFileSync(join(workspace, "py", "m.py"), "print(1)\n");
    expect((await judge("python3 py/t.py")).ran_files).toEqual(["py/t.py"]);
    expect((await judge("python3 py/t.py && curl -s https://example.org")).ran_files).toEqual(["py/m.py", "py/t.py"]);
    writeFileSync(join(workspace, "py", "x.js"), "1\n");
    expect((await judge("node -r ./py/x.js py/t.js")).ran_files).toEqual(["py/t.js", "py/x.js"]);
    expect((await judge("cd py && python3 -m m")).ran_files).toEqual(expect.arrayContaining(["py/m.py", "py/m/__main__.py"]));
  });

  it("judges a makefile's recipes and binds what it includes; binds what npx runs; asks for a script fed through /dev/stdin", async () => {
    mkdirSync(join(workspace, "mk"), { recursive: true });
    writeFileSync(join(workspace, "mk", "Makefile"), "include rules.mk\nall:\n\t@echo $(CC) built\n");
    writeFileSync(join(workspace, "mk", "rules.mk"), "clean:\n\trm -r ../victimdir\n");
    const made = await judge("make -C mk");
    expect(made.ran_files).toEqual(expect.arrayContaining(["mk/Makefile", "mk/rules.mk"]));
    expect(made.category).toBe("no_always");
    expect(made.commands).toContain("rm -r ../victimdir");
    writeFileSync(join(workspace, "mk", "rules.mk"), "x := $(shell id)\n");
    expect((await judge("make -C mk")).category).toBe("no_always");

    mkdirSync(join(workspace, "node_modules", "foo"), { recursive: true });
    mkdirSync(join(workspace, "node_modules", ".bin"), { recursive: true });
    writeFileSync(join(workspace, "node_modules", "foo", "cli.js"), "require('./lib.js')\n");
    writeFileSync(join(workspace, "node_modules", "foo", "lib.js"), "1\n");
    symlinkSync("../foo/cli.js", join(workspace, "node_modules", ".bin", "foo"));
    const npx = await judge("npx foo");
    expect(npx.network).toBe(true);
    expect(npx.ran_files).toEqual(expect.arrayContaining(["node_modules/foo/cli.js", "node_modules/foo/lib.js"]));
    expect((await judge("npm exec foo")).ran_files).toEqual(expect.arrayContaining(["node_modules/foo/cli.js"]));

    writeFileSync(join(workspace, "r.sh"), "echo fed\n");
    for (const command of ["bash /dev/stdin < r.sh", "bash /dev/fd/0 < r.sh", "python3 /dev/stdin < r.sh", "source /proc/self/fd/0 < r.sh"]) expect((await judge(command)).category, command).toBe("no_always");
    writeFileSync(join(workspace, "t.sed"), "s/a/b/\n");
    expect((await judge("sed -f t.sed notes.txt")).ran_files).toEqual(["t.sed"]);
  });

  it("never reads a package.json or makefile outside the workspace or in DuckLM's own state", async () => {
    mkdirSync(join(root, "home"), { recursive: true });
    writeFileSync(join(root, "home", "package.json"), JSON.stringify({ scripts: { test: "echo token-in-home-7731" } }));
    writeFileSync(join(root, "home", "Makefile"), "all:\n\techo token-in-home-7731\n");
    for (const command of [`npm --prefix ${join(root, "home")} test`, `make -C ${join(root, "home")}`, `cd ${join(root, "home")} && npm test`]) {
      expect(JSON.stringify(await judge(command)), command).not.toContain("token-in-home-7731");
    }
  });
});
