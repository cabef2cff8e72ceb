import js from "@eslint/js";
import tseslint from "typescript-eslint";
import globals from "globals";

export default tseslint.config(
  { ignores: ["dist/**", ".bench-build/**", "node_modules/**", "data/**", "web/vendor/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      // Library code logs through pino; only the CLI talks to the terminal.
      "no-console": "error",
    },
  },
  {
    files: ["web/**/*.js"],
    languageOptions: { globals: { ...globals.browser } },
  },
  {
    files: ["src/cli/**", "examples/**", "bench/**", "test/**", "scripts/**", "bin/**"],
    rules: { "no-console": "off" },
  },
  {
    // Deciders return data: they must not reach models, storage, events, tools, the network or the
    // file system. Types may be imported (a tool catalogue entry, a projection), code may not.
    files: ["src/decisions/**", "src/context/**"],
    rules: {
      "no-restricted-imports": ["error", {
        paths: ["node:fs", "node:fs/promises", "fs", "node:child_process", "child_process", "node:net", "node:http", "node:https", "node:dns"].map((name) => ({ name, message: "Deciders return data; only the runtime's executors perform effects." })),
        patterns: [
          { group: ["**/models/**", "**/storage/**", "**/state/**", "**/events/**", "**/server/**", "**/runtime/**", "**/tools/**", "**/memory/**", "**/integrations/**", "**/permissions/**"], allowTypeImports: true, message: "Deciders return data; only the runtime's executors perform effects." },
        ],
      }],
      "no-restricted-globals": ["error", { name: "fetch", message: "Deciders do not reach the network." }],
    },
  },
  {
    // Only the stores and the composition root hold the database.
    files: ["src/**"],
    ignores: ["src/state/**", "src/storage/**", "src/memory/**", "src/runtime/create-runtime.ts", "src/permissions/approval-store.ts", "src/decisions/**", "src/context/**", "**/*.test.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: [{ group: ["**/storage/open-database*", "better-sqlite3"], allowTypeImports: true, message: "Reach the database through a store, not directly." }] }],
    },
  },
  {
    files: ["src/contracts/**", "src/errors/**"],
    rules: {
      "no-restricted-imports": ["error", { patterns: [
        { group: ["../*", "!../contracts/*", "!../errors/*"], message: "contracts and errors import nothing else of ours." },
      ] }],
    },
  },
);
