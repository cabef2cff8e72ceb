import type { z } from "zod";
import type { CommandCategory, ToolEffect } from "../contracts/index.js";
import type { ShellSandbox } from "./shell-sandbox.js";

export interface ToolContext {
  /** Aborted on step timeout, task cancel or shutdown. */
  signal: AbortSignal;
  /** The task's workspace: relative paths resolve here and nothing outside it is touched. */
  workspace: string;
  /** The step's time limit in milliseconds (the signal fires at it too). */
  timeoutMs: number;
  /** Bytes of output kept per stream. */
  outputCapBytes: number;
  /** Largest file a read returns. */
  fileReadMaxBytes: number;
  /** The task the call belongs to. */
  taskId: string;
  /** The plan step and attempt the call belongs to. */
  stepId?: string;
  attempt?: number;
  /** Variables added to a command's scrubbed environment (the askpass session). */
  extraEnv?: Record<string, string>;
  /** Values that must never appear in a result: replaced before the result is stored or shown. */
  redact?: readonly string[];
  /** How shell commands are started (confined or not). Defaults to an unconfined `bash -c`. */
  sandbox?: ShellSandbox;
  /** Folders a confined command may write besides the workspace. */
  extraWritable?: readonly string[];
  /** Folders a confined command may read although they are hidden otherwise (the sudo relay's shim). */
  extraReadable?: readonly string[];
  /** The sudo relay's socket, which a confined command reaches through its sandbox's channel. */
  sudoRelaySocket?: string;
  /** Run-later files of the workspace (`.git`, `.envrc`…) this command may write: the user approved it. */
  writableRunLater?: readonly string[];
  /** The command may use the network (it needs it and the user allowed it). Defaults to false. */
  network?: boolean;
  /**
   * Whether the call may send a request it did not name (a redirect) to a URL: null if it may, else
   * why not — the host policy, as it was applied to the call's own destinations.
   */
  mayGoTo?: (url: string) => string | null;
  /** DuckLM's own state (home, config, plugins): file tools refuse it, as they refuse `.git` internals. */
  protectedPaths?: readonly string[];
  /** DuckLM's own program (its code, packages, bundled config, web page): file tools may read it, never write it. */
  readOnlyPaths?: readonly string[];
}

export interface ToolOutput {
  ok: boolean;
  /** Text for people and models. */
  output: string;
  data?: unknown;
  error?: { code: string; message: string };
  exit_code?: number | null;
  truncated?: boolean;
}

/** A tool the models can call. Its input schema is shown to models as JSON schema and checked here. */
export interface ToolDefinition<Input = unknown> {
  name: string;
  description: string;
  inputSchema: z.ZodType<Input>;
  /** The input schema shown to models when it comes as JSON schema already (MCP tools). */
  jsonSchema?: unknown;
  /** read-only tools may be re-run after a crash; side-effecting ones never silently. */
  effect: ToolEffect;
  /**
   * How the PermissionService treats calls (for tools that are not shell_exec): "unknown" asks unless
   * an approval is remembered, "no_always" always asks, "hard_stop" refuses. Unset: workspace tools run.
   */
  permission?: CommandCategory;
  /**
   * Where a call sends its request, as URLs (a fetch's address, a search instance, an MCP server's),
   * for a tool that reaches off this machine: the host policy decides (permissions.json `hosts`).
   */
  outbound?: (args: Record<string, unknown>) => string[];
  execute(input: Input, context: ToolContext): Promise<ToolOutput>;
}

// The registry stores tools of many input types; `defineTool` keeps each definition typed.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyToolDefinition = ToolDefinition<any>;

export function defineTool<Input>(definition: ToolDefinition<Input>): ToolDefinition<Input> {
  return definition;
}
