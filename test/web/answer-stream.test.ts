import { describe, expect, it } from "vitest";
import { modelWorkText, partialAnswer } from "../../web/answer-stream.js";

describe("partialAnswer", () => {
  const directive = JSON.stringify({ kind: "respond", answer: 'Line one\nsays "hi" \\ and \u00e9\u2603 done' });

  it("decodes every prefix of a respond directive to a prefix of its answer", () => {
    const full = JSON.parse(directive).answer as string;
    let previous = "";
    for (let end = 0; end <= directive.length; end += 1) {
      const shown = partialAnswer(directive.slice(0, end));
      if (shown === null) {
        expect(previous).toBe("");
        continue;
      }
      expect(full.startsWith(shown)).toBe(true);
      expect(shown.length).toBeGreaterThanOrEqual(previous.length);
      previous = shown;
    }
    expect(previous).toBe(full);
  });

  it("keeps \\u escapes and other non-ASCII text the model writes as escapes", () => {
    expect(partialAnswer('{"kind":"respond","answer":"caf\\u00e9 \\u26')).toBe("caf\u00e9 ");
    expect(partialAnswer('{"kind":"respond","answer":"caf\\u00e9 \\u2603!"}')).toBe("caf\u00e9 \u2603!");
  });

  it("ignores directives that do not answer", () => {
    expect(partialAnswer('{"kind":"tool","tool":"file_read","arguments":{"answer":"no"}')).toBeNull();
    expect(partialAnswer('{"kind":"resp')).toBeNull();
    expect(partialAnswer('{"kind":"respond","ans')).toBeNull();
  });

  it("tolerates whitespace the grammar allows between tokens", () => {
    expect(partialAnswer('{ "kind" : "respond" , "answer" : "a b')).toBe("a b");
  });
});

describe("a task's model work under its answer", () => {
  it("says calls, tokens and time in a few words, and nothing for a task that made no call", () => {
    expect(modelWorkText({ calls: 3, evaluated_tokens: 900, generated_tokens: 200, cached_tokens: 2400, duration_ms: 6240 })).toBe("3 calls · 1.1k tokens (2.4k cached) · 6.2 s");
    expect(modelWorkText({ calls: 1, evaluated_tokens: 40, generated_tokens: 5, cached_tokens: 0, duration_ms: 90 })).toBe("1 call · 45 tokens · 0.1 s");
    expect(modelWorkText(undefined)).toBe("");
  });
});
