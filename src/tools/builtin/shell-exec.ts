import { spawn } from "node:child_process";
import { z } from "zod";
import { DuckError, ErrorCode } from "../../errors/duck-error.js";
import { unconfinedShell } from "../shell-sandbox.js";
import { defineTool } from "../tool-definition.js";

export const ShellExecInputSchema = z.object({
  command: z.string().min(1).max(100_000).describe("A POSIX shell command, run in the workspace"),
  write_outside: z.array(z.string().min(1).max(4096)).max(8).optional().describe("Absolute folders outside the workspace the command must write (asked)"),
});

/** Collects a stream's bytes up to a cap and remembers whether anything was cut. */
class CappedBuffer {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  truncatedBytes = 0;
  constructor(private readonly cap: number) {}
  push(chunk: Buffer): void {
    const room = this.cap - this.size;
    if (room <= 0) {
      this.truncatedBytes += chunk.length;
      return;
    }
    const kept = chunk.length > room ? chunk.subarray(0, room) : chunk;
    this.chunks.push(kept);
    this.size += kept.length;
    this.truncatedBytes += chunk.length - kept.length;
  }
  text(): string {
    return Buffer.concat(this.chunks).toString("utf8");
  }
}

export const shellExecTool = defineTool({
  name: "shell_exec",
  description: "Run a shell command in the workspace and return its output and exit code.",
  inputSchema: ShellExecInputSchema,
  effect: "side-effecting",
  async execute(input, context) {
    const launch = await (context.sandbox ?? unconfinedShell).launch(input.command, {
      workspace: context.workspace,
      network: context.network ?? false,
      ...(context.extraWritable ? { extraWritable: context.extraWritable } : {}),
      ...(context.extraReadable ? { extraReadable: context.extraReadable } : {}),
      ...(context.sudoRelaySocket ? { sudoRelaySocket: context.sudoRelaySocket } : {}),
      ...(context.writableRunLater ? { writableRunLater: context.writableRunLater } : {}),
      timeLimitMs: context.timeoutMs,
    });
    return new Promise((resolvePromise) => {
      // Own process group, so a timeout or cancel kills everything the command started.
      const child = spawn(launch.file, launch.args, {
        cwd: context.workspace,
        detached: true,
        env: { ...launch.env, ...(context.extraEnv ?? {}) },
        stdio: ["ignore", "pipe", "pipe", ...(launch.extraStdio ?? [])],
      });
      launch.attach?.(child);
      const stdout = new CappedBuffer(context.outputCapBytes);
      const stderr = new CappedBuffer(context.outputCapBytes);
      child.stdout!.on("data", (chunk: Buffer) => stdout.push(chunk));
      child.stderr!.on("data", (chunk: Buffer) => stderr.push(chunk));
      let stoppedBy: string | null = null;
      // Stopped by a person (Ctrl-C, Stop, the cancel API) says so; a time limit or a shutdown is a timeout.
      let stoppedCode: typeof ErrorCode.ToolTimeout | typeof ErrorCode.Cancelled = ErrorCode.ToolTimeout;
      const killGroup = () => {
        stoppedBy = String(context.signal.reason instanceof Error ? context.signal.reason.message : context.signal.reason ?? "cancelled");
        if (DuckError.isInstance(context.signal.reason) && context.signal.reason.code === ErrorCode.Cancelled) stoppedCode = ErrorCode.Cancelled;
        try {
          if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
        } catch {
          // Already gone.
        }
      };
      if (context.signal.aborted) killGroup();
      else context.signal.addEventListener("abort", killGroup, { once: true });
      child.on("error", (error) => {
        context.signal.removeEventListener("abort", killGroup);
        resolvePromise({ ok: false, output: "", exit_code: null, error: { code: ErrorCode.ToolFailed, message: error.message } });
      });
      child.on("close", (code, signal) => {
        context.signal.removeEventListener("abort", killGroup);
        const truncated = stdout.truncatedBytes > 0 || stderr.truncatedBytes > 0;
        let output = stdout.text();
        const errText = stderr.text();
        if (errText) output += (output && !output.endsWith("\n") ? "\n" : "") + errText;
        if (truncated) output += `\n[shell_exec: output cut, ${stdout.truncatedBytes + stderr.truncatedBytes} bytes not kept]`;
        for (const note of launch.afterExit?.() ?? []) output += `${output && !output.endsWith("\n") ? "\n" : ""}${note}\n`;
        const data = { command: input.command, stdout: stdout.text(), stderr: errText, exit_code: code, signal };
        if (stoppedBy !== null) {
          resolvePromise({ ok: false, output, exit_code: code, truncated, data, error: { code: stoppedCode, message: `command stopped: ${stoppedBy}` } });
          return;
        }
        const ok = code === 0;
        resolvePromise({
          ok,
          output,
          exit_code: code,
          truncated,
          data,
          ...(ok ? {} : { error: { code: ErrorCode.ToolFailed, message: `command exited with ${code ?? signal}` } }),
        });
      });
    });
  },
});
