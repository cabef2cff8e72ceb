// Writes the tiny random-weight GGUF models the tests use (test/.tmp/models), or one to a path:
//   npx tsx scripts/write-fixture-models.ts [OUT.gguf [SEED]]
import { writeTinyLlamaGguf } from "../src/models/gguf/tiny-gguf-writer.js";
import { fixtureModels } from "../test/helpers/fixture-models.js";

const [out, seed] = process.argv.slice(2);
if (out) {
  const bytes = writeTinyLlamaGguf(out, { seed: seed ? Number(seed) : 1 });
  console.log(`wrote ${out} (${bytes} bytes)`);
} else {
  const files = fixtureModels();
  console.log(`fixture models: ${files.chat}, ${files.embedding}`);
}
