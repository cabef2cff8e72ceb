// The answer of a `respond` directive, read from the directive's JSON while the model is still
// writing it, so that the chat can show the answer token by token. The grammar writes the properties
// in the schema's order (`kind` first), so a prefix is enough to know what is being written.

const ESCAPES = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };

/**
 * The answer text decoded so far from a prefix of a directive's JSON, or null when the prefix is not
 * (yet) a `respond` directive with an answer. An escape cut off at the end is left for the next call.
 * @param {string} prefix
 * @returns {string | null}
 */
export function partialAnswer(prefix) {
  if (!/^\s*\{\s*"kind"\s*:\s*"respond"/.test(prefix)) return null;
  const start = /"answer"\s*:\s*"/.exec(prefix);
  if (!start) return null;
  let text = "";
  for (let i = start.index + start[0].length; i < prefix.length; i += 1) {
    const char = prefix[i];
    if (char === '"') break;
    if (char !== "\\") {
      text += char;
      continue;
    }
    const code = prefix[i + 1];
    if (code === undefined) break;
    if (code === "u") {
      const hex = prefix.slice(i + 2, i + 6);
      if (!/^[0-9a-fA-F]{4}$/.test(hex)) break;
      text += String.fromCharCode(Number.parseInt(hex, 16));
      i += 5;
      continue;
    }
    text += ESCAPES[code] ?? code;
    i += 1;
  }
  return text;
}

/**
 * A task's model work in a few words, for the line under its answer: "3 calls · 1.1k tokens · 6.2 s"
 * (tokens evaluated and generated; a cache's share when it served any).
 * @param {{ calls: number, evaluated_tokens: number, generated_tokens: number, cached_tokens: number, duration_ms: number } | undefined} work
 * @returns {string}
 */
export function modelWorkText(work) {
  if (!work || !work.calls) return "";
  /** @param {number} count */
  const tokens = (count) => (count >= 1000 ? `${(count / 1000).toFixed(1)}k` : String(count));
  const cached = work.cached_tokens > 0 ? ` (${tokens(work.cached_tokens)} cached)` : "";
  return `${work.calls} call${work.calls === 1 ? "" : "s"} · ${tokens(work.evaluated_tokens + work.generated_tokens)} tokens${cached} · ${(work.duration_ms / 1000).toFixed(1)} s`;
}
