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
