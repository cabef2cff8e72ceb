import type { Command } from "commander";
import { runPlain, type GlobalOptions } from "../with-ducklm.js";

/** `ducklm doctor`: what DuckLM needs on this machine, and what to do about each gap. */
export function registerDoctor(program: Command): void {
  program
    .command("doctor")
    .description("check node, config, database, shell parser, confinement, models and plugins")
    .action(async () =>
      runPlain(async () => {
        const { doctorCommand } = await import("../doctor-checks.js");
        return doctorCommand(program.opts<GlobalOptions>());
      }),
    );
}
