import type { TaskProjection } from "../state/task-projection.js";

/** Shortest piece of a read text that counts as carried out: shorter ones ("index", "https") are everywhere. */
const MIN_PIECE_CHARS = 8;

/** Most characters of what a task read that are searched for; beyond that, a leak is not looked for. */
const SEARCHED_READ_CHARS = 256 * 1024;

/** Tools whose output came from the internet already: sending it back out reveals nothing of this machine. */
const FROM_THE_INTERNET = new Set(["web_fetch", "web_search"]);

/**
 * Whether a piece of text looks like something worth keeping private (a key, a token, a password, an
 * id) rather than a word of prose or code: a digit in it, or a length no word has. "JavaScript" or
 * "function" in both a file and an address is no leak; "sk-live-4f9a…" is.
 */
function secretLike(piece: string): boolean {
  return piece.length >= MIN_PIECE_CHARS && (/\d/.test(piece) || piece.length >= 16);
}

const SEPARATORS = /[\s/?&=#:;,.@+%"'<>()[\]{}|\\^`*!$~]+/;
const alphanumeric = (text: string) => text.replace(/[^0-9a-z]/g, "");

/** The ways a model may spell a piece it carries out: as it is, base64 (any alignment, either alphabet), hex, reversed. */
function spellings(piece: string): string[] {
  const lower = piece.toLowerCase();
  const bytes = Buffer.from(piece);
  const forms = [lower, bytes.toString("hex"), [...lower].reverse().join("")];
  for (let shift = 0; shift < 3; shift += 1) {
    // Preceded by `shift` other bytes, the piece's own characters start after the group they share.
    const encoded = Buffer.concat([Buffer.alloc(shift), bytes]).toString("base64").replace(/=+$/, "");
    const own = encoded.slice(shift === 0 ? 0 : shift + 1, encoded.length - 2);
    if (own.length >= MIN_PIECE_CHARS) forms.push(own.toLowerCase(), own.replace(/\+/g, "-").replace(/\//g, "_").toLowerCase());
  }
  return forms;
}

/** What a task read here so far: the outputs of its tools that do not come from the internet, and the memory it recalled. */
function localReads(projection: TaskProjection): Array<{ step: string; text: string }> {
  const reads: Array<{ step: string; text: string }> = [];
  for (const record of projection.iterations ?? []) {
    for (const step of record.steps) if (step.tool && !FROM_THE_INTERNET.has(step.tool) && step.output) reads.push({ step: `${step.id} of decision ${record.iteration}`, text: step.output });
  }
  for (const step of Object.values(projection.steps)) {
    const tool = step.result?.tool ?? null;
    if (tool && !FROM_THE_INTERNET.has(tool) && step.result?.output) reads.push({ step: step.step.id, text: step.result.output });
  }
  for (const hit of projection.recalled ?? []) reads.push({ step: "the recalled memory", text: hit.entry.text });
  let left = SEARCHED_READ_CHARS;
  return reads.flatMap((read) => {
    if (left <= 0) return [];
    const text = read.text.slice(0, left);
    left -= text.length;
    return [{ ...read, text }];
  });
}

function decoded(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, " "));
  } catch {
    // A malformed escape: the text as it stands is what is searched.
    return text;
  }
}

/** A piece shown in a question without spelling a secret out again. */
const shortened = (piece: string) => (piece.length > 12 ? `${piece.slice(0, 6)}…${piece.slice(-3)}` : `${piece.slice(0, 4)}…`);

/**
 * Whether texts a call sends off the machine (an address, a query) carry something the task read here
 * (a file, a command's output, memory) that the task's own words do not hold: a secret-looking piece of
 * what it read found in the text as it is, percent-decoded, without its separators (split into short
 * parts), in any case (a host name is lowercased), base64, hex or reversed; or a secret-looking part of
 * the text found in what it read. An address the task read whole (a link in a file) is sent as read.
 * Returns what was found, shortened, and where it was read, or null.
 */
export function outboundLeak(outbound: readonly string[], projection: TaskProjection): { piece: string; step: string } | null {
  const reads = localReads(projection);
  if (reads.length === 0) return null;
  const ownWords = projection.text.toLowerCase();
  for (const text of outbound) {
    const isLink = /^https?:\/\//i.test(text);
    if (isLink && reads.some((read) => read.text.includes(text))) continue;
    const plain = decoded(text).toLowerCase();
    const plainJoined = alphanumeric(plain);
    // Its parts, found in what was read.
    for (const part of new Set([...text.split(SEPARATORS), ...plain.split(SEPARATORS)])) {
      if (!secretLike(part) || ownWords.includes(part.toLowerCase())) continue;
      const found = reads.find((read) => read.text.toLowerCase().includes(part.toLowerCase()));
      if (found) return { piece: shortened(part), step: found.step };
    }
    // What was read, found in it, however it is spelled.
    for (const read of reads) {
      for (const piece of new Set(read.text.split(SEPARATORS))) {
        if (!secretLike(piece) || ownWords.includes(piece.toLowerCase())) continue;
        const joined = alphanumeric(piece.toLowerCase());
        if (spellings(piece).some((form) => plain.includes(form)) || (joined.length >= MIN_PIECE_CHARS && plainJoined.includes(joined))) return { piece: shortened(piece), step: read.step };
      }
    }
  }
  return null;
}
