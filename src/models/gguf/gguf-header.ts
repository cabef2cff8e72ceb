import { closeSync, openSync, readSync, statSync } from "node:fs";

/** GGUF versions llama.cpp reads. */
const READABLE_VERSIONS = new Set([2, 3]);

/**
 * Why a file that exists cannot be a GGUF model, read from its first bytes, or null when its header
 * looks right (a file cut short past its header is found only when llama.cpp loads it). Missing files
 * are not this function's: it returns null for them.
 */
export function ggufFileProblem(path: string): string | null {
  const info = statSync(path, { throwIfNoEntry: false });
  if (!info) return null;
  if (info.isDirectory()) return "is a folder, not a model file";
  if (!info.isFile()) return "is not a regular file";
  if (info.size === 0) return "is empty (a download that never started?)";
  const header = Buffer.alloc(Math.min(24, info.size));
  const handle = openSync(path, "r");
  try {
    readSync(handle, header, 0, header.length, 0);
  } finally {
    closeSync(handle);
  }
  if (header.toString("latin1", 0, 4) !== "GGUF") {
    const start = header.toString("utf8").trimStart().toLowerCase();
    if (start.startsWith("<")) return "is an HTML or XML page, not a GGUF model (a download saved a web page instead of the file?)";
    const shown = [...header.subarray(0, 8)].map((byte) => byte.toString(16).padStart(2, "0")).join(" ");
    return `is not a GGUF model file (it starts with bytes ${shown}, not "GGUF")`;
  }
  if (header.length < 24) return "is cut short: it ends inside its GGUF header";
  const version = header.readUInt32LE(4);
  if (!READABLE_VERSIONS.has(version)) return `is GGUF version ${version}, which this llama.cpp cannot read (it reads versions 2 and 3)`;
  if (header.readBigUInt64LE(8) === 0n) return "is a GGUF file with no tensors: not a model";
  return null;
}

/**
 * Bytes per block and elements per block of the ggml tensor types whose layout is fixed and common
 * (llama.cpp's ggml type traits), by type number. A type not listed is checked by its offset only.
 */
const TENSOR_BLOCKS: ReadonlyMap<number, { bytes: number; elements: number }> = new Map([
  [0, { bytes: 4, elements: 1 }], // F32
  [1, { bytes: 2, elements: 1 }], // F16
  [2, { bytes: 18, elements: 32 }], // Q4_0
  [3, { bytes: 20, elements: 32 }], // Q4_1
  [6, { bytes: 22, elements: 32 }], // Q5_0
  [7, { bytes: 24, elements: 32 }], // Q5_1
  [8, { bytes: 34, elements: 32 }], // Q8_0
  [10, { bytes: 84, elements: 256 }], // Q2_K
  [11, { bytes: 110, elements: 256 }], // Q3_K
  [12, { bytes: 144, elements: 256 }], // Q4_K
  [13, { bytes: 176, elements: 256 }], // Q5_K
  [14, { bytes: 210, elements: 256 }], // Q6_K
  [30, { bytes: 2, elements: 1 }], // BF16
]);

/**
 * Why a file cannot be a whole GGUF model, read from its header, metadata and tensor table, or null
 * when they hold together: the header as `ggufFileProblem` reads it, then metadata and tensor
 * descriptions that can be read to their end (node-llama-cpp's GGUF reader), and tensor data that the
 * file is long enough to hold. Finds a download cut short or a file damaged inside, which the first
 * bytes alone do not show. Reads only the file's first part; imports node-llama-cpp (no native code).
 */
export async function ggufModelProblem(path: string): Promise<string | null> {
  const quick = ggufFileProblem(path);
  const info = statSync(path, { throwIfNoEntry: false });
  if (quick !== null || !info) return quick;
  const { readGgufFileInfo } = await import("node-llama-cpp");
  let parsed: Awaited<ReturnType<typeof readGgufFileInfo>>;
  try {
    parsed = await readGgufFileInfo(path, { sourceType: "filesystem", logWarnings: false, spliceSplitFiles: false });
  } catch (error) {
    const reason = error instanceof Error ? error.message.split("\n")[0]!.slice(0, 200) : String(error);
    return `is cut short or damaged: its GGUF metadata cannot be read (${reason}); download it again`;
  }
  const tensors = parsed.tensorInfo ?? [];
  if (tensors.length === 0) return "is a GGUF file with no tensors: not a model";
  if (parsed.infoEndOffset !== undefined && parsed.infoEndOffset > info.size) return "is cut short: it ends inside its GGUF metadata; download it again";
  let needed = 0;
  for (const tensor of tensors) {
    const start = Number(tensor.fileOffset);
    const block = TENSOR_BLOCKS.get(tensor.ggmlType);
    const elements = tensor.dimensions.reduce<number>((product, dimension) => product * Number(dimension), 1);
    const end = block ? start + Math.ceil(elements / block.elements) * block.bytes : start + 1;
    needed = Math.max(needed, end);
  }
  if (needed > info.size) return `is cut short: it holds ${info.size} bytes, and its tensors need ${needed}; download it again`;
  return null;
}

/**
 * The width of the vectors a GGUF model gives (its `<architecture>.embedding_length`), read from its
 * metadata, or null when the file does not say. For an embedding model, the dimension memory search
 * stores.
 */
export async function ggufEmbeddingLength(path: string): Promise<number | null> {
  if (ggufFileProblem(path) !== null) return null;
  const { readGgufFileInfo } = await import("node-llama-cpp");
  try {
    const parsed = await readGgufFileInfo(path, { sourceType: "filesystem", logWarnings: false, spliceSplitFiles: false, readTensorInfo: false });
    const length = (parsed.architectureMetadata as { embedding_length?: unknown } | undefined)?.embedding_length;
    return typeof length === "number" && Number.isInteger(length) && length > 0 ? length : null;
  } catch {
    return null;
  }
}
