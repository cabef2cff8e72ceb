import { isAbsolute, relative, resolve, sep } from "node:path";
import type { ToolCall } from "../contracts/index.js";
import { CODE_APPLY_TOOL } from "./permission-policy.js";

/**
 * Which of the workspace's run-later entries (`.git`, `.envrc`, `.vscode`…, which the user's own tools
 * run outside any sandbox) a call sets out to write: a file tool's path in one, a `git init` or a
 * `git clone … .` at the workspace's top. The sandbox keeps them read-only to every command; a call
 * that writes one is an escalation, asked every time, and given the write once allowed.
 */
export function runLaterWrites(call: ToolCall, commands: readonly string[], workspace: string, entries: readonly string[]): string[] {
  const names = new Set(entries.map((entry) => entry.replace(/\/+$/, "")));
  const found = new Set<string>();
  const topName = (path: string) => {
    const inside = relative(workspace, isAbsolute(path) ? path : resolve(workspace, path));
    if (inside === "" || inside.startsWith("..")) return;
    // An entry may lie in a folder (`.config/lefthook.yml`): the path is it, or lies in it.
    for (const name of names) if (inside === name || inside.startsWith(`${name}${sep}`)) found.add(name);
  };
  const args = call.arguments;
  if (call.tool === "file_write" && typeof args.path === "string") topName(args.path);
  if (call.tool === CODE_APPLY_TOOL && Array.isArray(args.files)) {
    for (const file of args.files as Array<{ path?: unknown }>) if (typeof file?.path === "string") topName(file.path);
  }
  if (names.has(".git")) {
    for (const command of commands) {
      const [program, subcommand, ...rest] = command.trim().split(/\s+/);
      if (program !== "git" || (subcommand !== "init" && subcommand !== "clone")) continue;
      const operands = rest.filter((word) => !word.startsWith("-"));
      // `git init` makes the repository where it runs, or in the folder it names; `git clone` in the folder it names after the URL.
      const target = subcommand === "init" ? (operands[0] ?? ".") : operands[1];
      if (target !== undefined && resolve(workspace, target) === resolve(workspace)) found.add(".git");
    }
  }
  return [...found].sort();
}
