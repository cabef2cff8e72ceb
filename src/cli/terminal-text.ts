// ESC-introduced sequences (CSI, OSC, DCS and single-character escapes) and the remaining C0/C1
// control characters, except newline and tab.
// eslint-disable-next-line no-control-regex -- matching control characters is the point.
const ESCAPES = /\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[PX^_][^\x1b]*(?:\x1b\\)?|[@-Z\\-_])|[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]/g;

/**
 * Text from a task (a command, its output, a model's words) made safe to print: escape sequences
 * could move the cursor, rewrite the prompt the user is answering, set the window title or change
 * the clipboard. Shown as `�` so that something was there stays visible.
 */
export function safeForTerminal(text: string): string {
  return text.replace(/\r\n/g, "\n").replace(ESCAPES, "\uFFFD");
}
