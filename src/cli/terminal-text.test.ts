import { describe, expect, it } from "vitest";
import { oneLine, safeForTerminal } from "./terminal-text.js";

describe("text from a task printed at the terminal", () => {
  it("loses the escape sequences that could rewrite the prompt, the title or the clipboard", () => {
    const hostile = [
      "ok\x1b[2K\x1b[1A\rAllow rm -rf ~? [y]", // erase the line, move up: a fake prompt
      "\x1b]0;pwned\x07", // window title
      "\x1b]52;c;cm0gLXJmIH4=\x07", // clipboard (OSC 52)
      "\x1bP+q\x1b\\", // device control string
      "\x9b31m", // an 8-bit CSI
      "bell\x07 backspace\x08 null\x00",
    ].join("|");
    const shown = safeForTerminal(hostile);
    // eslint-disable-next-line no-control-regex -- looking for control characters is the point.
    expect(shown).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]/);
    expect(shown).toContain("ok");
    expect(shown).toContain("Allow rm -rf ~? [y]");
    expect(shown).not.toContain("pwned\x07");
  });

  it("shows the characters that reorder or hide text as what they are, so a command reads as it runs", () => {
    // "rm -rf ~ #" shown reversed after an override would read as something harmless.
    const shown = safeForTerminal("echo safe \u202E~ fr- mr\u202C; ls\u200B\u2066x\u2069");
    expect(shown).toBe("echo safe ⟨U+202E⟩~ fr- mr⟨U+202C⟩; ls⟨U+200B⟩⟨U+2066⟩x⟨U+2069⟩");
    // A line separator would put what follows it on a line of its own in some terminals.
    expect(safeForTerminal("echo hi\u2028python3 -c 1\u2029\u061C")).toBe("echo hi⟨U+2028⟩python3 -c 1⟨U+2029⟩⟨U+061C⟩");
    expect(shown).not.toMatch(/[\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]/);
  });

  it("puts a text of many lines on one line of a listing", () => {
    expect(oneLine("hello\nworld\r\n\tthere")).toBe("hello ⏎ world ⏎ there");
  });

  it("keeps ordinary text, newlines, tabs and non-ASCII letters", () => {
    expect(safeForTerminal("a\tb\nc — ünïcode 🦆\r\n")).toBe("a\tb\nc — ünïcode 🦆\n");
  });
});
