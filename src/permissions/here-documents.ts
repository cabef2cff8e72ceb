import { randomBytes } from "node:crypto";
import type { Node } from "web-tree-sitter";
import { children, named } from "./shell-syntax.js";

/** A here-document taken out of a script: its operator, the start word as written, and its text. */
export interface HereDocument {
  operator: "<<" | "<<-";
  start: string;
  text: string;
}

/**
 * bash reads a here-document's body from the lines after the one that names it; what follows the
 * operator on that line (`| sh`, `&& rm -rf ~`, `> out`, `; next`) is the rest of the command line.
 * The grammar folds that rest into the here-document's node, in shapes that change with the
 * operator, so it is not read from there: each here-document is taken out of the text — its operator
 * and word replaced by a `<` redirection from a marker, its body and end line removed — and the text
 * that is left, which holds every command bash would run, is parsed again. The markers lead back to
 * the documents. Null when a here-document's end cannot be found (the text is then judged strictly).
 */
export function withoutHereDocuments(root: Node, source: string): { source: string; documents: Map<string, HereDocument> } | null {
  const found: Node[] = [];
  const collect = (node: Node) => {
    if (node.type === "heredoc_redirect") {
      found.push(node);
      return;
    }
    for (const child of named(node)) collect(child);
  };
  collect(root);
  if (found.length === 0) return { source, documents: new Map() };
  const tag = randomBytes(6).toString("hex");
  const documents = new Map<string, HereDocument>();
  const edits: Array<{ from: number; to: number; text: string }> = [];
  for (const node of found) {
    const operator = children(node).find((child) => !child.isNamed && (child.type === "<<" || child.type === "<<-"));
    const start = named(node).find((child) => child.type === "heredoc_start");
    const body = named(node).find((child) => child.type === "heredoc_body");
    const end = named(node).find((child) => child.type === "heredoc_end");
    if (!operator || !start || !end || end.isMissing || start.isMissing) return null;
    const marker = `__ducklm_heredoc_${tag}_${documents.size}__`;
    documents.set(marker, { operator: operator.type as "<<" | "<<-", start: start.text, text: body?.text ?? "" });
    edits.push({ from: operator.startIndex, to: start.endIndex, text: `<${marker}` });
    edits.push({ from: (body ?? end).startIndex, to: end.endIndex, text: "" });
  }
  edits.sort((a, b) => b.from - a.from);
  let rewritten = source;
  let limit = source.length;
  for (const edit of edits) {
    // Overlapping edits mean the grammar nested one document in another's text: not read.
    if (edit.to > limit) return null;
    rewritten = `${rewritten.slice(0, edit.from)}${edit.text}${rewritten.slice(edit.to)}`;
    limit = edit.from;
  }
  return { source: rewritten, documents };
}
