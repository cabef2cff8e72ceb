import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { catalogueModel, loadCatalogue, presetPlan } from "./model-catalogue.js";
import { resolveModelSource } from "./model-download.js";

const dirs: string[] = [];
function configDirWith(catalogue: unknown): string {
  const dir = mkdtempSync(join(tmpdir(), "ducklm-catalogue-"));
  dirs.push(dir);
  writeFileSync(join(dir, "models-catalogue.json"), typeof catalogue === "string" ? catalogue : JSON.stringify(catalogue));
  return dir;
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe("the bundled model catalogue", () => {
  it("pins every file of the starter preset to a commit, an exact size and a SHA-256", () => {
    const catalogue = loadCatalogue();
    const plan = presetPlan(catalogue, "starter", "/nonexistent");
    expect(plan.length).toBeGreaterThan(0);
    for (const { model } of plan) {
      expect(model.source).toMatch(/^hf:[^/]+\/[^/@]+@[0-9a-f]{40}\//);
      expect(model.sha256).toMatch(/^[0-9a-f]{64}$/);
      expect(model.bytes).toBeGreaterThan(0);
    }
  });
});

describe("a catalogue of the user's own", () => {
  it("replaces bundled models of the same name and adds its own", () => {
    const dir = configDirWith({
      models: { "nomic-embed-text-v1.5": { source: "https://mirror.example/nomic.gguf", bytes: 5, license: "Apache-2.0", description: "our mirror" }, ours: { source: "hf:us/ours/ours.gguf", approx_bytes: 9, license: "MIT", description: "ours" } },
      presets: { team: { description: "ours", roles: { thinker: "ours", embeddings: "nomic-embed-text-v1.5" } } },
    });
    const catalogue = loadCatalogue(dir);
    expect(catalogueModel(catalogue, "nomic-embed-text-v1.5")).toMatchObject({ source: "https://mirror.example/nomic.gguf", file: "nomic.gguf" });
    expect(catalogueModel(catalogue, "qwen2.5-1.5b-instruct")?.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(presetPlan(catalogue, "team", dir).map((entry) => entry.model.name)).toEqual(["ours", "nomic-embed-text-v1.5"]);
    expect(Object.keys(catalogue.presets)).toEqual(expect.arrayContaining(["starter", "gpu", "team"]));
  });

  it("is refused with the file and the field named when it is not valid", () => {
    expect(() => loadCatalogue(configDirWith("{ not json"))).toThrow(/models-catalogue\.json: not readable JSON/);
    expect(() => loadCatalogue(configDirWith({ models: { x: { source: "hf:a/b/c.gguf", license: "MIT", description: "no size" } }, presets: {} }))).toThrow(/models\.x: give the file's size/);
    expect(() => loadCatalogue(configDirWith({ models: {}, presets: { p: { description: "", roles: { thinker: "missing" } } } }))).toThrow(/preset p names missing, which is not in the catalogue/);
  });
});

describe("hf: sources", () => {
  it("resolve to the hub's download URL, on main or on the pinned revision", () => {
    expect(resolveModelSource("hf:a/b/dir/c.gguf", {}).href).toBe("https://huggingface.co/a/b/resolve/main/dir/c.gguf");
    expect(resolveModelSource("hf:a/b@0123abc/c.gguf", { HF_ENDPOINT: "http://127.0.0.1:9/" }).href).toBe("http://127.0.0.1:9/a/b/resolve/0123abc/c.gguf");
  });

  it("refuse a revision that could leave the repository's path", () => {
    for (const bad of ["hf:a/b@../../x/c.gguf", "hf:a/b/../../x/c.gguf", "hf:a/b@r@s/c.gguf", "hf:a/b@/c.gguf", "hf:a/b@%2e%2e/c.gguf"]) {
      expect(() => resolveModelSource(bad, {})).toThrow(/is not of the form hf:user\/repo\/file\.gguf/);
    }
  });
});
