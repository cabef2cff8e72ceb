import { spawnSync } from "node:child_process";

export interface SandboxLaunch {
  file: string;
  args: string[];
}

/** How a shell command is started: confined by bubblewrap, or as a plain `/bin/sh -c`. */
export interface ShellSandbox {
  readonly kind: "bwrap" | "none";
  /** Why there is no confinement, when there is none. */
  readonly note: string;
  launch(command: string, workspace: string, extraWritable: readonly string[]): SandboxLaunch;
}

export const unconfinedShell: ShellSandbox = {
  kind: "none",
  note: "shell commands run unconfined",
  launch: (command) => ({ file: "/bin/sh", args: ["-c", command] }),
};

/**
 * bubblewrap: the whole filesystem read-only, the workspace (and any extra folder, such as the askpass
 * socket's) writable, a private /tmp, /dev and /proc of its own, killed with its parent.
 */
export function bubblewrapShell(options: { network: boolean; binary?: string }): ShellSandbox {
  const binary = options.binary ?? "bwrap";
  return {
    kind: "bwrap",
    note: "shell commands can write only inside the workspace (bubblewrap)",
    launch(command, workspace, extraWritable) {
      const args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"];
      for (const path of [workspace, ...extraWritable]) args.push("--bind", path, path);
      args.push("--chdir", workspace, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts");
      if (!options.network) args.push("--unshare-net");
      args.push("/bin/sh", "-c", command);
      return { file: binary, args };
    },
  };
}

/** Whether bubblewrap is installed and can start a confined process here (it cannot in some containers). */
export function probeBubblewrap(binary = "bwrap"): { usable: boolean; reason: string } {
  const probe = spawnSync(binary, ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--die-with-parent", "/bin/true"], {
    timeout: 5_000,
    stdio: ["ignore", "ignore", "pipe"],
    encoding: "utf8",
  });
  if (probe.error) return { usable: false, reason: `bubblewrap is not installed (${(probe.error as NodeJS.ErrnoException).code ?? probe.error.message})` };
  if (probe.status !== 0) return { usable: false, reason: `bubblewrap cannot run here: ${probe.stderr.trim() || `exit ${probe.status}`}` };
  return { usable: true, reason: "bubblewrap works" };
}

/** The sandbox runtime.json asks for: `auto` uses bubblewrap when it works, `bwrap` insists, `off` never. */
export function chooseShellSandbox(mode: "auto" | "bwrap" | "off", network: boolean): { sandbox: ShellSandbox; warning: string | null } {
  if (mode === "off") return { sandbox: { ...unconfinedShell, note: "confinement is off (runtime.json sandbox.mode)" }, warning: "shell commands are not confined: runtime.json sets sandbox.mode off" };
  const probe = probeBubblewrap();
  if (probe.usable) return { sandbox: bubblewrapShell({ network }), warning: null };
  const note = `shell commands are not confined: ${probe.reason}`;
  if (mode === "bwrap") throw new Error(`runtime.json sandbox.mode is bwrap, but ${probe.reason}`);
  return { sandbox: { ...unconfinedShell, note }, warning: `${note}; install bubblewrap (apt-get install bubblewrap) to confine writes to the workspace` };
}
