// ESC-introduced sequences (CSI, OSC, DCS and single-character escapes) and the remaining C0/C1
// control characters, except newline and tab.
// eslint-disable-next-line no-control-regex -- matching control characters is the point.
const ESCAPES = /\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[PX^_][^\x1b]*(?:\x1b\\)?|[@-Z\\-_])|[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]/g;

// Characters that reorder the text around them (bidirectional overrides, isolates and marks), take
// no room at all, or break a line where the terminal may not (U+2028, U+2029): a command
// shown for approval could read otherwise than it runs ("Trojan Source").
const INVISIBLE = /[\u00AD\u061C\u180E\u200B-\u200F\u2028-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]/g;

/**
 * Text from a task (a command, its output, a model's words) made safe to print: escape sequences
 * could move the cursor, rewrite the prompt the user is answering, set the window title or change
 * the clipboard. Shown as `�` so that something was there stays visible; reordering and invisible
 * characters are shown as what they are (`⟨U+202E⟩`), as the web chat shows them.
 */
export function safeForTerminal(text: string): string {
  return text
    .replace(/\r\n/g, "\n")
    .replace(ESCAPES, "\uFFFD")
    .replace(INVISIBLE, (char) => `⟨U+${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}⟩`);
}

/** Text for one line of a listing: safe to print, its line breaks and tabs shown as spaces. */
export function oneLine(text: string): string {
  return safeForTerminal(text).replace(/\s*\n\s*/g, " ⏎ ").replace(/\t/g, " ");
}
