import { createRuntime, type Runtime } from "../runtime/create-runtime.js";
import { DuckError } from "../errors/duck-error.js";

export interface GlobalOptions {
  home?: string;
  config?: string;
  workspace?: string;
}

/** Exit codes the CLI uses, documented in the README. */
export const ExitCode = { Ok: 0, TaskFailed: 1, BadInput: 2, AwaitingPermission: 3, Cancelled: 130 } as const;

export function openRuntime(options: GlobalOptions): Runtime {
  return createRuntime({
    ...(options.home ? { home: options.home } : {}),
    ...(options.config ? { configDir: options.config } : {}),
    ...(options.workspace ? { workspace: options.workspace } : {}),
  });
}

/** Prints an error a person can act on and returns the exit code for it. */
export function reportError(error: unknown): number {
  if (DuckError.isInstance(error)) {
    console.error(`error ${error.code}: ${error.message}`);
    return error.code === "DUCK_ERR_INTERNAL" || error.code === "DUCK_ERR_STORAGE" ? 1 : ExitCode.BadInput;
  }
  console.error(`error: ${error instanceof Error ? error.message : String(error)}`);
  return 1;
}
