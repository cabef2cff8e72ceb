import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDuckLM } from "../src/runtime/create-ducklm.js";
import type { DuckLM } from "../src/runtime/ducklm.js";
import { REPO_ROOT } from "./helpers/cli-child.js";
import { makeTempDir } from "./helpers/test-runtime.js";

const tsxLoader = import.meta.resolve("tsx");
const bubblewrap = spawnSync("bwrap", ["--version"]).status === 0;

/** A small project: the files the everyday commands run. */
function writeProject(workspace: string): void {
  mkdirSync(join(workspace, "src"), { recursive: true });
  mkdirSync(join(workspace, "build"), { recursive: true });
  writeFileSync(join(workspace, "f"), "a\nb\n");
  writeFileSync(join(workspace, "script.py"), "print(1)\n");
  writeFileSync(join(workspace, "test.js"), "console.log(1)\n");
  writeFileSync(join(workspace, "package.json"), JSON.stringify({ scripts: { test: "node test.js", build: "node test.js" } }));
  writeFileSync(join(workspace, "Makefile"), "all:\n\techo hi\n");
  writeFileSync(join(workspace, "README.md"), "# project\n");
  writeFileSync(join(workspace, "src", "main.js"), "export {};\n");
}

const EVERYDAY = ["sed -n '1,20p' f", "python3 script.py", "node test.js", "npm test", "npm run build", "make", "pytest -q", "git add -A", "git commit -m wip", "cp README.md build/"];
const DANGEROUS_INSIDE = ["rm -rf src", "git reset --hard", "git clean -fdx", "git checkout -- .", "git restore .", "git push --force"];
const DESTROYING = ["rm -rf /", "rm -rf /*", "rm -rf .", "rm -rf ..", 'rm -rf "$PWD"', "cd .. && rm -rf ws", "rm -rf ~", "cat <<X | rm -rf /\nhello\nX", "true <<X && rm -rf .\nX"];

describe.skipIf(!bubblewrap)("ducklm permissions check, with bubblewrap: the sandbox is the boundary", () => {
  let ducklm: DuckLM;
  let workspace: string;
  beforeAll(async () => {
    workspace = join(makeTempDir("ducklm-check-"), "ws");
    mkdirSync(workspace);
    writeProject(workspace);
    ducklm = await createDuckLM({ home: makeTempDir("ducklm-check-home-"), config: join(REPO_ROOT, "config"), workspace, models: false, integrations: false });
  });
  afterAll(async () => {
    await ducklm?.close();
  });

  it("runs the everyday developer commands without a question", async () => {
    for (const command of EVERYDAY) {
      const verdict = await ducklm.checkCommand(command);
      expect({ command, decision: verdict.decision, escalations: verdict.escalations }).toEqual({ command, decision: "run", escalations: [] });
      expect(verdict.confinement).toBe("confined");
    }
  });

  it("asks, every time, for what is dangerous inside the workspace", async () => {
    for (const command of DANGEROUS_INSIDE) {
      const verdict = await ducklm.checkCommand(command);
      expect({ command, decision: verdict.decision, always: verdict.always_offered }).toEqual({ command, decision: "ask", always: false });
    }
  });

  it("never runs what removes the workspace, anything above it or the root, a here-document before it or not", async () => {
    for (const command of DESTROYING) {
      const verdict = await ducklm.checkCommand(command);
      expect({ command, decision: verdict.decision }).toEqual({ command, decision: "hard_stop" });
    }
  });

  it("names the escalations it asks for: the network, sudo, a file the user's own tools run later", async () => {
    const fetch = await ducklm.checkCommand("curl -fsS https://example.com/data.json -o data.json");
    expect(fetch).toMatchObject({ decision: "ask", escalations: ["network"], always_offered: true });
    const sudo = await ducklm.checkCommand("sudo apt-get install -y jq");
    expect(sudo.decision).toBe("ask");
    expect(sudo.escalations).toContain("sudo");
    expect(sudo.always_offered).toBe(false);
    const init = await ducklm.checkCommand("git init");
    expect(init).toMatchObject({ decision: "ask", escalations: ["writes .git"], always_offered: false });
  });

  it("refuses a workspace DuckLM would refuse, and an empty command, with an error a person can act on", async () => {
    await expect(ducklm.checkCommand("ls", { workspace: "/" })).rejects.toMatchObject({ code: "DUCK_ERR_INVALID_INPUT" });
    await expect(ducklm.checkCommand("ls", { workspace: join(workspace, "missing") })).rejects.toThrow(/not a directory/);
    await expect(ducklm.checkCommand("  ")).rejects.toThrow(/give the command/);
  });
});

describe("ducklm permissions check from the terminal", () => {
  const home = makeTempDir("ducklm-check-cli-home-");
  const workspace = makeTempDir("ducklm-check-cli-ws-");
  writeProject(workspace);
  afterAll(() => {
    rmSync(home, { recursive: true, force: true });
    rmSync(workspace, { recursive: true, force: true });
  });
  const cli = (args: string[]) =>
    spawnSync(process.execPath, ["--import", tsxLoader, join(REPO_ROOT, "src/cli/main.ts"), "--home", home, "--config", join(REPO_ROOT, "config"), "--workspace", workspace, ...args], { encoding: "utf8", timeout: 90_000 });

  it("prints the decision as JSON, and runs nothing", () => {
    const result = cli(["permissions", "check", "--json", "--", "rm", "-rf", "src"]);
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
    const verdict = JSON.parse(result.stdout);
    expect(verdict).toMatchObject({ command: "rm -rf src", decision: "ask", category: "no_always", workspace });
    expect(verdict.reason).toMatch(/rm -r/);
    expect(existsSync(join(workspace, "src", "main.js"))).toBe(true);
    expect(readFileSync(join(workspace, "README.md"), "utf8")).toBe("# project\n");
  });

  it("says it in words, with where and how the command would run", () => {
    const result = cli(["permissions", "check", "--", "rm -rf /"]);
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^hard_stop: rm -rf \//);
    expect(result.stdout).toMatch(/why: .*root/);
    expect(result.stdout).toContain(`in ${workspace}`);
  });

  it("exits 2 with a message when no command is given", () => {
    const result = cli(["permissions", "check", "--", " "]);
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/DUCK_ERR_INVALID_INPUT.*give the command/);
  });
});
