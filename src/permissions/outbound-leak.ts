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
  const forms: string[] = [];
  for (const text of [piece, [...piece].reverse().join("")]) {
    const bytes = Buffer.from(text);
    forms.push(text.toLowerCase(), bytes.toString("hex"), rot13(text.toLowerCase()));
    for (let shift = 0; shift < 3; shift += 1) {
      // Preceded by `shift` other bytes, the piece's own characters start after the group they share.
      const encoded = Buffer.concat([Buffer.alloc(shift), bytes]).toString("base64").replace(/=+$/, "");
      const own = encoded.slice(shift === 0 ? 0 : shift + 1, encoded.length - 2);
      if (own.length >= MIN_PIECE_CHARS) forms.push(own.toLowerCase());
    }
  }
  return forms;
}

const rot13 = (text: string) => text.replace(/[a-z]/g, (letter) => String.fromCharCode(((letter.charCodeAt(0) - 97 + 13) % 26) + 97));

/** The character codes of a piece in decimal, one after another (what `115.107.45…` gives once its separators go). */
const decimalCodes = (piece: string) => [...piece].map((character) => character.charCodeAt(0)).join("");

/**
 * Whether `needle` appears in `haystack` with other characters between its own, within a stretch at
 * most about twice its length: a secret with a letter slipped in after every character or few.
 */
function spreadWithin(haystack: string, needle: string): boolean {
  const reach = needle.length * 2 + 2;
  for (let start = haystack.indexOf(needle[0]!); start !== -1; start = haystack.indexOf(needle[0]!, start + 1)) {
    let at = start;
    let matched = 1;
    while (matched < needle.length) {
      at = haystack.indexOf(needle[matched]!, at + 1);
      if (at === -1 || at - start >= reach) break;
      matched += 1;
    }
    if (matched === needle.length) return true;
    if (at === -1) return false;
  }
  return false;
}

/** What the task's earlier calls of internet tools sent (their arguments, as the projection keeps them). */
function sentOut(projection: TaskProjection): string[] {
  const calls: string[] = [];
  for (const record of projection.iterations ?? []) for (const step of record.steps) if (step.tool && FROM_THE_INTERNET.has(step.tool) && step.arguments) calls.push(step.arguments);
  for (const step of Object.values(projection.steps)) if (step.result && FROM_THE_INTERNET.has(step.result.tool) && step.called_with) calls.push(step.called_with);
  // The address or query each call carried (a long call's record is cut: its first field is what is read).
  return calls.flatMap((json) => [...json.matchAll(/"(?:url|query)":"((?:[^"\\]|\\.)*)/g)].map((match) => match[1]!));
}

/**
 * The part of an outbound text that a sender chooses freely: an address's path, query and fragment
 * and the labels before its site's name; a query whole. Joined over several calls, it is what they
 * sent between them.
 */
function chosenPart(text: string): string {
  if (!URL.canParse(text)) return text;
  const url = new URL(text);
  return `${url.hostname.split(".").slice(0, -2).join(".")} ${url.username} ${url.password} ${url.pathname}${url.search}${url.hash}`;
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

/** Percent-decoded until nothing changes (an escape of an escape, `%2573`, included). */
function decoded(text: string): string {
  let current = text;
  for (let round = 0; round < 5; round += 1) {
    let next: string;
    try {
      next = decodeURIComponent(current.replace(/\+/g, " "));
    } catch {
      // A malformed escape: the text as it stands is what is searched.
      return current;
    }
    if (next === current) return current;
    current = next;
  }
  return current;
}

/** A piece shown in a question without spelling a secret out again. */
const shortened = (piece: string) => (piece.length > 12 ? `${piece.slice(0, 6)}…${piece.slice(-3)}` : `${piece.slice(0, 4)}…`);

/**
 * Whether texts a call sends off the machine (an address, a query) carry something the task read here
 * (a file, a command's output, memory) that the task's own words do not hold: a secret-looking piece of
 * what it read found in the text as it is, percent-decoded, without its separators (split into short
 * parts, or with characters slipped in between), in any case (a host name is lowercased), base64, hex,
 * ROT13, decimal codes or reversed, in this call or spread over the task's earlier calls to the internet;
 * or a secret-looking part of the text found in what it read. Returns what was found, shortened, and
 * where it was read, or null.
 */
export function outboundLeak(outbound: readonly string[], projection: TaskProjection): { piece: string; step: string } | null {
  const reads = localReads(projection);
  if (reads.length === 0) return null;
  const sentBefore = sentOut(projection);
  const ownWords = projection.text.toLowerCase();
  // What this task sent out before counts too: a secret sent seven characters a fetch is still sent.
  const everything = decoded([...outbound, ...[...sentBefore, ...outbound].map(chosenPart)].join(" ")).toLowerCase();
  const everythingJoined = alphanumeric(everything);
  const everythingDigits = everything.replace(/\D/g, "");
  for (const text of outbound) {
    const plain = decoded(text).toLowerCase();
    // Its parts, found in what was read.
    for (const part of new Set([...text.split(SEPARATORS), ...plain.split(SEPARATORS)])) {
      if (!secretLike(part) || ownWords.includes(part.toLowerCase())) continue;
      const found = reads.find((read) => read.text.toLowerCase().includes(part.toLowerCase()));
      if (found) return { piece: shortened(part), step: found.step };
    }
  }
  // What was read, found in what goes out, however it is spelled.
  let spread = 0;
  for (const read of reads) {
    for (const piece of new Set(read.text.split(SEPARATORS))) {
      if (!secretLike(piece) || ownWords.includes(piece.toLowerCase())) continue;
      const joined = alphanumeric(piece.toLowerCase());
      const forms = spellings(piece);
      const carried =
        forms.some((form) => everything.includes(form) || (form.length >= MIN_PIECE_CHARS && everythingJoined.includes(alphanumeric(form)))) ||
        (joined.length >= MIN_PIECE_CHARS && everythingJoined.includes(joined)) ||
        everythingDigits.includes(decimalCodes(piece)) ||
        // Looked for spread out only for the first pieces of what was read: it costs more than the rest.
        (joined.length >= MIN_SPREAD_CHARS && spread++ < MAX_SPREAD_SEARCHES && spreadWithin(everythingJoined, joined));
      if (carried) return { piece: shortened(piece), step: read.step };
    }
  }
  return null;
}

/** Shortest piece looked for spread out: shorter ones turn up, spread, in ordinary addresses by chance. */
const MIN_SPREAD_CHARS = 12;

/** Most pieces of what a task read looked for spread out in what it sends. */
const MAX_SPREAD_SEARCHES = 5000;
