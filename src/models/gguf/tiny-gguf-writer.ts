import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { seededRandom } from "../../utils/seeded-random.js";

// GGUF v3 metadata value types.
const GGUF_UINT32 = 4;
const GGUF_INT32 = 5;
const GGUF_FLOAT32 = 6;
const GGUF_STRING = 8;
const GGUF_ARRAY = 9;
const GGML_TYPE_F32 = 0;
const ALIGNMENT = 32;

type MetadataValue =
  | { type: "u32"; value: number }
  | { type: "i32"; value: number }
  | { type: "f32"; value: number }
  | { type: "string"; value: string }
  | { type: "string[]"; value: string[] }
  | { type: "i32[]"; value: number[] }
  | { type: "f32[]"; value: number[] };

interface Tensor {
  name: string;
  /** ggml order: the first dimension varies fastest. */
  dims: number[];
  data: Float32Array;
}

/** Appends little-endian values to a growing list of buffers. */
class ByteWriter {
  private readonly parts: Buffer[] = [];
  length = 0;
  push(buffer: Buffer): void {
    this.parts.push(buffer);
    this.length += buffer.length;
  }
  u32(value: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(value);
    this.push(b);
  }
  i32(value: number): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(value);
    this.push(b);
  }
  u64(value: number): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(value));
    this.push(b);
  }
  f32(value: number): void {
    const b = Buffer.alloc(4);
    b.writeFloatLE(value);
    this.push(b);
  }
  string(value: string): void {
    const bytes = Buffer.from(value, "utf8");
    this.u64(bytes.length);
    this.push(bytes);
  }
  pad(alignment: number): void {
    const rest = this.length % alignment;
    if (rest !== 0) this.push(Buffer.alloc(alignment - rest));
  }
  toBuffer(): Buffer {
    return Buffer.concat(this.parts);
  }
}

function writeValue(out: ByteWriter, value: MetadataValue): void {
  switch (value.type) {
    case "u32":
      out.u32(GGUF_UINT32);
      out.u32(value.value);
      return;
    case "i32":
      out.u32(GGUF_INT32);
      out.i32(value.value);
      return;
    case "f32":
      out.u32(GGUF_FLOAT32);
      out.f32(value.value);
      return;
    case "string":
      out.u32(GGUF_STRING);
      out.string(value.value);
      return;
    case "string[]":
      out.u32(GGUF_ARRAY);
      out.u32(GGUF_STRING);
      out.u64(value.value.length);
      for (const item of value.value) out.string(item);
      return;
    case "i32[]":
      out.u32(GGUF_ARRAY);
      out.u32(GGUF_INT32);
      out.u64(value.value.length);
      for (const item of value.value) out.i32(item);
      return;
    case "f32[]":
      out.u32(GGUF_ARRAY);
      out.u32(GGUF_FLOAT32);
      out.u64(value.value.length);
      for (const item of value.value) out.f32(item);
      return;
  }
}

/** Serialises metadata and F32 tensors as a GGUF v3 file. */
export function encodeGguf(metadata: Record<string, MetadataValue>, tensors: readonly Tensor[]): Buffer {
  const out = new ByteWriter();
  out.push(Buffer.from("GGUF", "ascii"));
  out.u32(3);
  out.u64(tensors.length);
  out.u64(Object.keys(metadata).length);
  for (const [key, value] of Object.entries(metadata)) {
    out.string(key);
    writeValue(out, value);
  }
  let offset = 0;
  const offsets: number[] = [];
  for (const tensor of tensors) {
    out.string(tensor.name);
    out.u32(tensor.dims.length);
    for (const dim of tensor.dims) out.u64(dim);
    out.u32(GGML_TYPE_F32);
    out.u64(offset);
    offsets.push(offset);
    offset += Math.ceil(tensor.data.byteLength / ALIGNMENT) * ALIGNMENT;
  }
  out.pad(ALIGNMENT);
  for (const tensor of tensors) {
    out.push(Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength));
    out.pad(ALIGNMENT);
  }
  return out.toBuffer();
}

/** GPT-2's reversible map from bytes to printable characters, so every byte is one vocabulary token. */
export function byteToUnicode(): string[] {
  const printable: number[] = [];
  for (let b = 33; b <= 126; b += 1) printable.push(b);
  for (let b = 161; b <= 172; b += 1) printable.push(b);
  for (let b = 174; b <= 255; b += 1) printable.push(b);
  const map = new Array<string>(256);
  let extra = 0;
  for (let b = 0; b < 256; b += 1) {
    map[b] = printable.includes(b) ? String.fromCharCode(b) : String.fromCharCode(256 + extra++);
  }
  return map;
}

export interface TinyModelOptions {
  /** Seed of the random weights. Defaults to 1. */
  seed?: number;
  /** Hidden size. Defaults to 64. */
  embeddingLength?: number;
  /** Transformer blocks. Defaults to 2. */
  blockCount?: number;
  /** Feed-forward size. Defaults to twice the hidden size. */
  feedForwardLength?: number;
  /** Attention heads. Defaults to 4. */
  headCount?: number;
  /** Context length the model declares. Defaults to 2048. */
  contextLength?: number;
  /** Model name in the metadata. */
  name?: string;
  /**
   * Answers that never end by themselves (the end-of-text token can never win), for tests of
   * cancellation and time limits that need a generation still running when they strike.
   */
  endless?: boolean;
}

/**
 * Builds a random-weight llama-architecture model with a byte-level BPE vocabulary (256 byte tokens
 * plus BOS and EOS). Its text is noise; it exists so that the real inference path can be tested on a
 * machine where no weights can be downloaded.
 */
export function buildTinyLlamaGguf(options: TinyModelOptions = {}): Buffer {
  const embd = options.embeddingLength ?? 64;
  const blocks = options.blockCount ?? 2;
  const ff = options.feedForwardLength ?? embd * 2;
  const heads = options.headCount ?? 4;
  const random = seededRandom(options.seed ?? 1);
  const bytes = byteToUnicode();
  const tokens = [...bytes, "<|startoftext|>", "<|endoftext|>"];
  const vocab = tokens.length;
  const bos = vocab - 2;
  const eos = vocab - 1;
  const tokenTypes = tokens.map((_, id) => (id >= 256 ? 3 : 1));
  const scale = 1 / Math.sqrt(embd);
  const weights = (count: number, spread = scale) => {
    const data = new Float32Array(count);
    for (let i = 0; i < count; i += 1) data[i] = (random() * 2 - 1) * spread;
    return data;
  };
  const ones = (count: number) => new Float32Array(count).fill(1);
  const tensors: Tensor[] = [
    { name: "token_embd.weight", dims: [embd, vocab], data: weights(embd * vocab, 1) },
    { name: "output_norm.weight", dims: [embd], data: ones(embd) },
    { name: "output.weight", dims: [embd, vocab], data: weights(embd * vocab) },
  ];
  if (options.endless) silenceEndOfText(tensors, embd, eos);
  for (let i = 0; i < blocks; i += 1) {
    tensors.push(
      { name: `blk.${i}.attn_norm.weight`, dims: [embd], data: ones(embd) },
      { name: `blk.${i}.attn_q.weight`, dims: [embd, embd], data: weights(embd * embd) },
      { name: `blk.${i}.attn_k.weight`, dims: [embd, embd], data: weights(embd * embd) },
      { name: `blk.${i}.attn_v.weight`, dims: [embd, embd], data: weights(embd * embd) },
      { name: `blk.${i}.attn_output.weight`, dims: [embd, embd], data: weights(embd * embd) },
      { name: `blk.${i}.ffn_norm.weight`, dims: [embd], data: ones(embd) },
      { name: `blk.${i}.ffn_gate.weight`, dims: [embd, ff], data: weights(embd * ff) },
      { name: `blk.${i}.ffn_down.weight`, dims: [ff, embd], data: weights(ff * embd, 1 / Math.sqrt(ff)) },
      { name: `blk.${i}.ffn_up.weight`, dims: [embd, ff], data: weights(embd * ff) },
    );
    if (options.endless) {
      // Dimension 0 of the residual stream stays the constant the embeddings put there.
      tensors.find((tensor) => tensor.name === `blk.${i}.attn_output.weight`)!.data.fill(0, 0, embd);
      tensors.find((tensor) => tensor.name === `blk.${i}.ffn_down.weight`)!.data.fill(0, 0, ff);
    }
  }
  const metadata: Record<string, MetadataValue> = {
    "general.architecture": { type: "string", value: "llama" },
    "general.name": { type: "string", value: options.name ?? "ducklm-tiny" },
    "general.alignment": { type: "u32", value: ALIGNMENT },
    "llama.context_length": { type: "u32", value: options.contextLength ?? 2048 },
    "llama.embedding_length": { type: "u32", value: embd },
    "llama.block_count": { type: "u32", value: blocks },
    "llama.feed_forward_length": { type: "u32", value: ff },
    "llama.attention.head_count": { type: "u32", value: heads },
    "llama.attention.head_count_kv": { type: "u32", value: heads },
    "llama.rope.dimension_count": { type: "u32", value: embd / heads },
    "llama.attention.layer_norm_rms_epsilon": { type: "f32", value: 1e-5 },
    "llama.vocab_size": { type: "u32", value: vocab },
    "tokenizer.ggml.model": { type: "string", value: "gpt2" },
    "tokenizer.ggml.pre": { type: "string", value: "default" },
    "tokenizer.ggml.tokens": { type: "string[]", value: tokens },
    "tokenizer.ggml.token_type": { type: "i32[]", value: tokenTypes },
    "tokenizer.ggml.merges": { type: "string[]", value: [] },
    "tokenizer.ggml.bos_token_id": { type: "u32", value: bos },
    "tokenizer.ggml.eos_token_id": { type: "u32", value: eos },
  };
  return encodeGguf(metadata, tensors);
}

/**
 * Every token embedding carries a large constant in dimension 0, which no block changes, so the final
 * normalised state is always positive there; the end-of-text token's output row reads only that
 * dimension, with a large negative weight, so its logit stays far below every other token's.
 */
function silenceEndOfText(tensors: Tensor[], embd: number, eos: number): void {
  const embeddings = tensors.find((tensor) => tensor.name === "token_embd.weight")!.data;
  for (let row = 0; row < embeddings.length / embd; row += 1) embeddings[row * embd] = 8;
  const output = tensors.find((tensor) => tensor.name === "output.weight")!.data;
  output.fill(0, eos * embd, (eos + 1) * embd);
  output[eos * embd] = -50;
}

/** Writes a tiny model to `file` (creating its folder) and returns the file's size. */
export function writeTinyLlamaGguf(file: string, options: TinyModelOptions = {}): number {
  const buffer = buildTinyLlamaGguf(options);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, buffer);
  return buffer.length;
}
