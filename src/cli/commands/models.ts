import type { Command } from "commander";
import { runPlain, type GlobalOptions } from "../with-ducklm.js";

/** `ducklm models list|pull|bench`: local GGUF models and model servers by role. */
export function registerModels(program: Command): void {
  const globals = () => program.opts<GlobalOptions>();
  const actions = () => import("../model-actions.js");
  const models = program.command("models").description("local GGUF models: list, download, measure");
  models
    .command("list")
    .description("roles, their files, present or missing, size, and which model serves each")
    .option("--json", "one JSON object per line")
    .action(async (options: { json?: boolean }) => runPlain(async () => (await actions()).modelsListCommand(globals(), options)));
  models
    .command("pull")
    .description("download a GGUF file (resumable, hash checked while it arrives) into <home>/models and optionally assign it to a role")
    .argument("<source>", "a catalogue name (see `ducklm setup --dry-run`), an http(s) URL or hf:user/repo/file.gguf")
    .option("--role <role>", "point this role at the file in config/models.json")
    .option("--sha256 <hex>", "refuse the file unless its SHA-256 matches")
    .option("--size <bytes>", "refuse the file unless it has this size")
    .action(async (source: string, options: { role?: string; sha256?: string; size?: string }) => runPlain(async () => (await actions()).modelsPullCommand(globals(), source, options)));
  models
    .command("bench")
    .description("prompt and generation tokens per second of a role's model")
    .argument("<role>", "thinker, json_compiler, critic, coder, sys_util")
    .option("--tokens <n>", "tokens to generate", "128")
    .action(async (role: string, options: { tokens?: string }) => runPlain(async () => (await actions()).modelsBenchCommand(globals(), role, options)));
  program
    .command("setup")
    .description("download a preset of models from the catalogue and assign them to their roles")
    .option("--preset <name>", "starter (one small model for every role, CPU) or gpu (7B models)", "starter")
    .option("--dry-run", "list the files, sizes and hashes, download nothing")
    .option("--yes", "download without asking")
    .action(async (options: { preset?: string; dryRun?: boolean; yes?: boolean }) => runPlain(async () => (await actions()).setupCommand(globals(), options)));
}
