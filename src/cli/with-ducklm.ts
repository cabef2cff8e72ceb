import { join } from "node:path";
import type { DuckLM } from "../runtime/ducklm.js";
import type { TaskStore } from "../state/task-store.js";
import { DuckError, ErrorCode, storageErrorOf } from "../errors/duck-error.js";

export interface GlobalOptions {
  home?: string;
  config?: string;
  workspace?: string;
}

const outputClosedListeners = new Set<() => void>();

/** Calls `listener` if standard output turns out to be a pipe whose reader has stopped; returns the way to stop listening. */
export function whenOutputCloses(listener: () => void): () => void {
  outputClosedListeners.add(listener);
  return () => outputClosedListeners.delete(listener);
}

/** Tells the listeners that standard output's reader has stopped (EPIPE); false when none listens. */
export function outputClosed(): boolean {
  if (outputClosedListeners.size === 0) return false;
  for (const listener of [...outputClosedListeners]) listener();
  return true;
}

/** Exit codes the CLI uses, documented in the README. */
export const ExitCode = { Ok: 0, TaskFailed: 1, BadInput: 2, AwaitingPermission: 3, Denied: 4, Cancelled: 130 } as const;

/**
 * What a command needs opened: models (for tasks and embeddings), integrations (for tasks), and the
 * check of permissions.json's examples (for anything that judges commands).
 */
export interface OpenSettings {
  models?: boolean;
  integrations?: boolean;
  judgesCommands?: boolean;
  /** A process that keeps running: its log rotates, and shows on the terminal. */
  longRunning?: boolean;
}

/** What a command that runs tasks needs: the models, the integrations' tools, the permission check. */
export const TASK_RUNNER: OpenSettings = { models: true, integrations: true, judgesCommands: true };

/** Errors that are not the caller's input but something that went wrong: exit 1, not 2. */
const FAILURES_NOT_INPUT = new Set<string>([
  ErrorCode.Internal,
  ErrorCode.StorageFailed,
  ErrorCode.DiskFull,
  ErrorCode.DatabaseCorrupt,
  ErrorCode.ModelDownloadFailed,
  ErrorCode.ModelServerFailed,
  ErrorCode.ModelLoadFailed,
  ErrorCode.ModelTimeout,
  ErrorCode.WebFetchFailed,
  ErrorCode.ServerNotRunning,
]);

/** Prints an error a person can act on and returns the exit code for it. */
export function reportError(raw: unknown): number {
  const error = storageErrorOf(raw) ?? raw;
  if (DuckError.isInstance(error)) {
    console.error(`error ${error.code}: ${error.message}`);
    return FAILURES_NOT_INPUT.has(error.code) ? 1 : ExitCode.BadInput;
  }
  console.error(`error: ${error instanceof Error ? error.message : String(error)}`);
  return 1;
}

/**
 * Opens DuckLM for one command, runs it and closes DuckLM, turning errors into exit codes. The
 * runtime is imported only here, when a command needs it, so that `--help` and `--version` stay fast.
 */
export async function withDuckLM(globals: GlobalOptions, action: (ducklm: DuckLM) => Promise<number> | number, settings: OpenSettings = { models: false }): Promise<void> {
  let code: number;
  let ducklm: DuckLM | undefined;
  try {
    const { createDuckLM } = await import("../runtime/create-ducklm.js");
    const logger = settings.longRunning
      ? await (await import("../runtime/service-logger.js")).createServiceLogger((await import("../config/load-config.js")).resolveHomeDir(globals.home))
      : undefined;
    ducklm = await createDuckLM({
      ...(logger ? { logger } : {}),
      ...(globals.home ? { home: globals.home } : {}),
      ...(globals.config ? { config: globals.config } : {}),
      ...(globals.workspace ? { workspace: globals.workspace } : {}),
      models: settings.models !== false,
      integrations: settings.integrations === true,
      checkPermissions: settings.judgesCommands === true,
      onWarning: (message) => console.error(`warning: ${message}`),
    });
    // Said wherever tasks run: a person must know when commands are not confined.
    const warning = ducklm.status().sandbox.warning;
    if (settings.integrations && warning) console.error(`warning: ${warning}`);
    code = await action(ducklm);
  } catch (error) {
    code = reportError(error);
  } finally {
    await ducklm?.close();
  }
  process.exitCode = code;
}

/**
 * Opens only the task store for a command that lists what is stored (`ducklm tasks`): no runtime, no
 * executors, no tools — a listing starts in a fraction of the time a task runner does.
 */
export async function withTaskStore(globals: GlobalOptions, action: (store: TaskStore) => number): Promise<void> {
  let close: (() => void) | null = null;
  try {
    const [{ loadConfig, resolveConfigDir, resolveHomeDir }, { openPostgresStores, openStores }, { createLogger }, { ensurePrivateDir }] = await Promise.all([
      import("../config/load-config.js"),
      import("../state/open-stores.js"),
      import("../runtime/logger.js"),
      import("../storage/private-files.js"),
    ]);
    const home = resolveHomeDir(globals.home);
    const config = loadConfig(resolveConfigDir(globals.config));
    ensurePrivateDir(home);
    const storeOptions = { logger: createLogger({ file: join(home, "logs", "ducklm.log") }), leaseTtlMs: config.runtime.task_leases.ttl_ms };
    const stores =
      config.runtime.storage.backend === "postgres"
        ? openPostgresStores((await import("../runtime/postgres-url.js")).postgresUrlOf(config, process.env), storeOptions)
        : openStores(join(home, "ducklm.sqlite3"), { ...storeOptions, synchronous: config.runtime.storage.synchronous });
    close = () => stores.database.close();
    process.exitCode = action(stores.tasks);
  } catch (error) {
    process.exitCode = reportError(error);
  } finally {
    close?.();
  }
}

/** Runs a command that needs no runtime, turning errors into exit codes. */
export async function runPlain(action: () => Promise<number> | number): Promise<void> {
  try {
    process.exitCode = await action();
  } catch (error) {
    process.exitCode = reportError(error);
  }
}
