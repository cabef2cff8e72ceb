import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fixtureModel } from "../../../test/helpers/fixture-models.js";
import { makeTempDir } from "../../../test/helpers/test-runtime.js";
import { ModelsConfigSchema } from "../../config/config-schemas.js";
import { resolveRoles, resolveRolesChecked } from "../model-roles.js";
import { ggufFileProblem, ggufModelProblem } from "./gguf-header.js";

describe("ggufFileProblem", () => {
  const dir = makeTempDir("ducklm-gguf-");
  const file = (name: string, content: string | Buffer) => {
    const path = join(dir, name);
    writeFileSync(path, content);
    return path;
  };

  it("accepts a real GGUF model and says what is wrong with files that are not one", () => {
    const model = fixtureModel("tiny-chat", { seed: 1, contextLength: 32768, name: "ducklm-tiny-chat" });
    expect(ggufFileProblem(model)).toBeNull();
    expect(ggufFileProblem(join(dir, "missing.gguf"))).toBeNull();
    mkdirSync(join(dir, "folder.gguf"));
    expect(ggufFileProblem(join(dir, "folder.gguf"))).toBe("is a folder, not a model file");
    expect(ggufFileProblem(file("empty.gguf", ""))).toMatch(/^is empty/);
    expect(ggufFileProblem(file("page.gguf", "\n  <!DOCTYPE html><html><body>Sign in to download</body></html>"))).toMatch(/HTML or XML page/);
    expect(ggufFileProblem(file("notes.gguf", "just some notes"))).toMatch(/^is not a GGUF model file \(it starts with bytes 6a 75 73 74/);
    const header = readFileSync(model).subarray(0, 24);
    expect(ggufFileProblem(file("cut.gguf", header.subarray(0, 10)))).toBe("is cut short: it ends inside its GGUF header");
    const future = Buffer.from(header);
    future.writeUInt32LE(99, 4);
    expect(ggufFileProblem(file("future.gguf", future))).toMatch(/GGUF version 99/);
  });

  it("treats a broken file as no model: the role falls back, and says why", () => {
    const model = fixtureModel("tiny-chat", { seed: 1, contextLength: 32768, name: "ducklm-tiny-chat" });
    const page = file("compiler-page.gguf", "<html>not a model</html>");
    const config = ModelsConfigSchema.parse({ roles: { thinker: { file: model }, json_compiler: { file: page } } });
    const roles = resolveRoles(config, dir);
    expect(roles.get("json_compiler")).toMatchObject({ present: false, problem: expect.stringMatching(/HTML/), servedBy: "thinker" });
    expect(roles.get("thinker")).toMatchObject({ present: true, problem: null, servedBy: "thinker" });
  });

  it("reads a file through to its tensors: a model cut short or damaged inside is broken, though its first bytes look right", async () => {
    const model = fixtureModel("tiny-chat", { seed: 1, contextLength: 32768, name: "ducklm-tiny-chat" });
    const whole = readFileSync(model);
    expect(await ggufModelProblem(model)).toBeNull();
    // Cut inside the metadata, and cut inside the tensor data: both pass the first bytes.
    const inMetadata = file("cut-metadata.gguf", whole.subarray(0, 4096));
    expect(ggufFileProblem(inMetadata)).toBeNull();
    expect(await ggufModelProblem(inMetadata)).toMatch(/^is cut short/);
    const inData = file("cut-data.gguf", whole.subarray(0, whole.length - 100));
    expect(ggufFileProblem(inData)).toBeNull();
    expect(await ggufModelProblem(inData)).toBe(`is cut short: it holds ${whole.length - 100} bytes, and its tensors need ${whole.length}; download it again`);
    // Metadata that says it holds more entries than any file could.
    const damaged = Buffer.from(whole);
    damaged.fill(0xff, 16, 24);
    expect(ggufFileProblem(file("damaged.gguf", damaged))).toBeNull();
    expect(await ggufModelProblem(join(dir, "damaged.gguf"))).toMatch(/^is cut short or damaged|^is cut short/);
    // The same judgement for roles, where it can be afforded (models list, doctor).
    const config = ModelsConfigSchema.parse({ roles: { thinker: { file: model }, critic: { file: inData } } });
    expect(resolveRoles(config, dir).get("critic")).toMatchObject({ present: true, problem: null });
    expect((await resolveRolesChecked(config, dir)).get("critic")).toMatchObject({ present: false, problem: expect.stringMatching(/^is cut short/), servedBy: "thinker" });
  });
});
