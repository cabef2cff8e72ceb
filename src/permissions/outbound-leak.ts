import type { TaskProjection } from "../state/task-projection.js";

/** Shortest piece of a read text that counts as carried out: shorter ones ("index", "https") are everywhere. */
const MIN_PIECE_CHARS = 8;

/** Most characters of one tool's output searched; beyond that, a leak is not looked for. */
const SEARCHED_OUTPUT_CHARS = 1_000_000;

/** Tools whose output came from the internet already: sending it back out reveals nothing of this machine. */
const FROM_THE_INTERNET = new Set(["web_fetch", "web_search"]);

/**
 * The pieces of an outbound text (an address, a query) as a receiver could read them back: split at
 * the characters that separate a URL's parts, each piece also percent-decoded, base64 or hex
 * as they stand (a model copies what it saw, encoded or not).
 */
function piecesOf(text: string): string[] {
  let decoded = text;
  try {
    decoded = decodeURIComponent(text.replace(/\+/g, " "));
  } catch {
    // A malformed escape: the text as it stands is what is searched.
  }
  const pieces = new Set<string>();
  for (const source of [text, decoded]) for (const piece of source.split(/[\s/?&=#:;,.@+%"'<>()[\]{}|\\^`]+/)) if (piece.length >= MIN_PIECE_CHARS) pieces.add(piece);
  return [...pieces];
}

/** What a task read here so far: the outputs of its tools that do not come from the internet. */
function localReads(projection: TaskProjection): Array<{ step: string; text: string }> {
  const reads: Array<{ step: string; text: string }> = [];
  for (const record of projection.iterations ?? []) {
    for (const step of record.steps) if (step.tool && !FROM_THE_INTERNET.has(step.tool) && step.output) reads.push({ step: `${step.id} of decision ${record.iteration}`, text: step.output });
  }
  for (const step of Object.values(projection.steps)) {
    const tool = step.result?.tool ?? null;
    if (tool && !FROM_THE_INTERNET.has(tool) && step.result?.output) reads.push({ step: step.step.id, text: step.result.output.slice(0, SEARCHED_OUTPUT_CHARS) });
  }
  return reads;
}

/**
 * Whether texts a call sends off the machine carry something the task read here (a file, a command's
 * output, memory): a piece of eight or more characters found in such an output and not in the task's
 * own words. Returns what was found and where, shortened, or null.
 */
export function outboundLeak(outbound: readonly string[], projection: TaskProjection): { piece: string; step: string } | null {
  const reads = localReads(projection);
  if (reads.length === 0) return null;
  for (const text of outbound) {
    for (const piece of piecesOf(text)) {
      // What the user wrote in the task is theirs to send.
      if (projection.text.includes(piece)) continue;
      const found = reads.find((read) => read.text.includes(piece));
      if (found) return { piece: piece.length > 12 ? `${piece.slice(0, 6)}…${piece.slice(-3)}` : `${piece.slice(0, 4)}…`, step: found.step };
    }
  }
  return null;
}
