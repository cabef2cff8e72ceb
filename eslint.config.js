import js from "@eslint/js";
import tseslint from "typescript-eslint";
import globals from "globals";

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", "data/**", "web/vendor/**"] },
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
    files: ["src/cli/**", "bench/**", "test/**", "scripts/**", "bin/**"],
    rules: { "no-console": "off" },
  },
  {
    // Deciders return data: they must not reach storage, events, tools or the server.
    files: ["src/decisions/**", "src/context/**"],
    rules: {
      "no-restricted-imports": ["error", { patterns: [
        { group: ["**/storage/**", "**/events/event-store*", "**/events/event-bus*", "**/server/**", "**/runtime/**", "**/tools/builtin/**"], message: "Deciders return data; only the runtime performs effects." },
      ] }],
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
