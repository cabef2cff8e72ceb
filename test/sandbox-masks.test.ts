import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MASKED, maskedConfigOf, maskedRepositoryConfig } from "../src/tools/sandbox-masks.js";
import { makeTempDir } from "./helpers/test-runtime.js";

// Each config holds one credential a command must not read; the mask replaces it and keeps the rest.
const WITH_CREDENTIALS: Array<[string, string, string]> = [
  ["git's extraheader", '[http "https://example.com/"]\n\textraheader = AUTHORIZATION: basic c2VjcmV0LXRva2Vu\n', "c2VjcmV0LXRva2Vu"],
  ["a token in a remote's URL", '[remote "origin"]\n\turl = https://ghp_secretToken123@github.com/me/repo.git\n', "ghp_secretToken123"],
  ["a password in a URL's query", "[remote \"o\"]\n\turl = https://host/repo.git?password=hunter2hunter2\n", "hunter2hunter2"],
  ["an inline credential helper", '[credential]\n\thelper = "!f() { echo password=inline-secret-9; }; f"\n', "inline-secret-9"],
  ["a value continued over lines", "[http]\n\textraheader = Bearer first-half \\\n second-half-secret\n", "second-half-secret"],
  ["npm's registry token", "registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken=npm_abcdefSECRET\n", "npm_abcdefSECRET"],
  ["npm's basic auth", "//npm.example.com/:_auth=dXNlcjpzZWNyZXQtYXV0aA==\n", "dXNlcjpzZWNyZXQtYXV0aA=="],
  ["npm's password", "//npm.example.com/:_password=c2VjcmV0cGFzcw==\n", "c2VjcmV0cGFzcw=="],
  ["pip's index with credentials", "[global]\nindex-url = https://user:pip-secret-42@pypi.example.com/simple\n", "pip-secret-42"],
  ["cargo's registry token", '[registry]\ntoken = "cio_cargoSecret77"\n', "cio_cargoSecret77"],
  ["gradle's signing password", "signing.keyId=24875D73\nsigning.password=gradle-secret-5\n", "gradle-secret-5"],
  ["Maven's server password", "<servers>\n  <server><id>r</id><username>me</username><password>maven-secret-8</password></server>\n</servers>\n", "maven-secret-8"],
  ["a yarnrc's auth token", 'npmAuthToken = "yarn-secret-3"\n', "yarn-secret-3"],
  ["a GitHub OAuth key", "[github]\n\toauth = gho_oauthSecret11\n", "gho_oauthSecret11"],
  ["an Azure personal access token", "[azure]\n\tpat = azure-pat-secret-12\n", "azure-pat-secret-12"],
  ["a quoted URL whose password holds a space", '[remote "o"]\n\turl = "https://me:pass word-secret-13@host/repo.git"\n', "word-secret-13"],
  ["a password in core.sshCommand", "[core]\n\tsshCommand = sshpass -p ssh-secret-14 ssh\n", "ssh-secret-14"],
];

describe("a config's credentials, as a confined command reads them", () => {
  for (const [name, text, secret] of WITH_CREDENTIALS) {
    it(`are masked: ${name}`, () => {
      const masked = maskedRepositoryConfig(text);
      expect(masked).not.toBeNull();
      expect(masked).not.toContain(secret);
      expect(masked).toContain(MASKED.slice(0, 6));
    });
  }

  it("leaves a config without credentials as it is (no copy is made)", () => {
    expect(maskedRepositoryConfig('[core]\n\tbare = false\n[remote "origin"]\n\turl = https://github.com/me/repo.git\n')).toBeNull();
    expect(maskedRepositoryConfig("registry=https://registry.npmjs.org/\nsave-exact=true\n")).toBeNull();
  });

  it("keeps the settings around a masked one", () => {
    const masked = maskedRepositoryConfig("registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken=npm_x1\nsave-exact=true\n")!;
    expect(masked).toContain("registry=https://registry.npmjs.org/");
    expect(masked).toContain("save-exact=true");
  });
});

describe("a config read for its masked copy", () => {
  it("is read only where its path leads without a link: a folder swapped for one shows nothing of where it leads", () => {
    const workspace = makeTempDir("ducklm-masks-ws-");
    mkdirSync(join(workspace, "real", ".git"), { recursive: true });
    writeFileSync(join(workspace, "real", ".git", "config"), '[remote "o"]\n\turl = https://ghp_secretToken123@github.com/me/repo.git\n');
    const direct = maskedConfigOf(join(workspace, "real", ".git", "config"));
    expect(direct).toContain("github.com/me/repo.git");
    expect(direct).not.toContain("ghp_secretToken123");
    // The path DuckLM found, with the folder on the way now a link (to a place only DuckLM may read).
    symlinkSync(join(workspace, "real"), join(workspace, "swapped"));
    expect(maskedConfigOf(join(workspace, "swapped", ".git", "config"))).toBeNull();
    symlinkSync(join(workspace, "real", ".git", "config"), join(workspace, "linked-config"));
    expect(maskedConfigOf(join(workspace, "linked-config"))).toBeNull();
  });
});
