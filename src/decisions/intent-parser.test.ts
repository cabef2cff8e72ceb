import { describe, expect, it } from "vitest";
import { parseIntent } from "./intent-parser.js";

describe("parseIntent", () => {
  it.each([
    ["run `ls -la`", { tool: "shell_exec", arguments: { command: "ls -la" } }],
    ["Run: git status", { tool: "shell_exec", arguments: { command: "git status" } }],
    ["execute the command 'echo hi'", { tool: "shell_exec", arguments: { command: "echo hi" } }],
    ["read file README.md", { tool: "file_read", arguments: { path: "README.md" } }],
    ["show me the file src/app.ts", { tool: "file_read", arguments: { path: "src/app.ts" } }],
    ["write file notes.txt: hello there", { tool: "file_write", arguments: { path: "notes.txt", content: "hello there", mode: "overwrite" } }],
    ["write \"hi\" to file a.txt", { tool: "file_write", arguments: { path: "a.txt", content: "hi", mode: "overwrite" } }],
    ["remember that my editor is helix", { tool: "memory_insert", arguments: { text: "my editor is helix", kind: "fact" } }],
    ["What do you remember about my editor?", { tool: "memory_search", arguments: { query: "my editor" } }],
    ["list memories", { tool: "memory_list", arguments: {} }],
    ["fetch https://example.org/ducks?x=1", { tool: "web_fetch", arguments: { url: "https://example.org/ducks?x=1" } }],
    ["please open the page <http://example.org>", { tool: "web_fetch", arguments: { url: "http://example.org" } }],
    ["search the web for mallard migration", { tool: "web_search", arguments: { query: "mallard migration" } }],
  ])("reads %j", (text, expected) => {
    expect(parseIntent(text)).toMatchObject({ kind: "tool", ...expected });
  });

  it.each(["What is the weather like?", "Explain monads", "running late, sorry", "fetch the ducks from the pond", "get ftp://example.org/x"])("leaves %j to a model", (text) => {
    expect(parseIntent(text)).toBeNull();
  });
});
