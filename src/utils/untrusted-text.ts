// What a tool returned, or a model wrote, placed into a prompt: made unable to pass for the prompt's own text.

/**
 * Characters a terminal or a bidirectional renderer acts on, line and paragraph separators, and the
 * invisible ones (zero-width, byte-order mark), shown as escapes so no output can hide text or fake layout.
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL_CHARACTERS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;

export function visibleControls(text: string): string {
  return text.replace(CONTROL_CHARACTERS, (character) => `\\u${character.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** What a tool returned, as quoted lines: nothing in it can pass for a heading or a record of the prompt's own. */
export function quotedOutput(text: string): string {
  return visibleControls(text)
    .split("\n")
    .map((line) => `  │ ${line}`)
    .join("\n");
}

/** A text on one line: its line breaks as spaces, its controls as escapes (a title, a reason, an error). */
export function oneLine(text: string): string {
  return visibleControls(text).replace(/\n/g, " ");
}
