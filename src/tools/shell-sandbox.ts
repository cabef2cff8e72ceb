import { spawnSync } from "node:child_process";
import { existsSync, lstatSync, readdirSync, realpathSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { Logger } from "pino";
import { DuckError, ErrorCode } from "../errors/duck-error.js";
import { pointedRepositories, workspaceRepositoryPaths } from "../permissions/git-repository.js";
import { SANDBOX_PROXY_PORT, startNetworkProxy, type NetworkProxy } from "./network-proxy.js";

export interface SandboxLaunch {
  file: string;
  args: string[];
  /** Variables the command gets besides DuckLM's scrubbed environment (the proxy's address). */
  env: Record<string, string>;
}

export interface ShellLaunchOptions {
  workspace: string;
  /** The command may use the network (through the filtering proxy when confined). */
  network: boolean;
  /** Folders a confined command may write besides the workspace. */
  extraWritable?: readonly string[];
  /** Folders a confined command may read although they are hidden otherwise (the sudo relay's socket). */
  extraReadable?: readonly string[];
}

/** How a shell command is started: confined by bubblewrap, or as a plain `bash -c`. */
export interface ShellSandbox {
  readonly kind: "bwrap" | "none";
  /** What commands run under: confined, unconfined because no sandbox works here, or turned off. */
  readonly confinement: Confinement;
  /** What confinement there is, or why there is none. */
  readonly note: string;
  launch(command: string, options: ShellLaunchOptions): Promise<SandboxLaunch>;
  /** Stops what the sandbox started (the network proxy). */
  dispose(): Promise<void>;
}

/** How shell commands run: in the sandbox, without one (nothing runs unattended), or with confinement turned off. */
export type Confinement = "confined" | "none" | "off";

/** Commands are parsed as bash, so they run in bash (sh where a system has no bash). */
export const SHELL = existsSync("/bin/bash") ? "/bin/bash" : "/bin/sh";

export const unconfinedShell: ShellSandbox = {
  kind: "none",
  confinement: "none",
  note: "shell commands run unconfined",
  launch: async (command) => ({ file: SHELL, args: ["-c", command], env: {} }),
  dispose: async () => undefined,
};

// Sockets of services that would run a command for the caller outside the sandbox (systemd and
// D-Bus activation, container engines): hidden from every confined command.
const SERVICE_SOCKET_DIRS = [
  "/run/user", "/run/dbus", "/var/run/dbus", "/run/containerd", "/run/podman", "/run/systemd/private", "/run/incus", "/run/libvirt", "/var/run/libvirt",
  "/run/crio", "/run/k3s", "/run/buildkit", "/run/tailscale", "/var/run/tailscale", "/run/lxd", "/var/snap/lxd/common/lxd",
];
const SERVICE_SOCKET_FILES = ["/run/docker.sock", "/var/run/docker.sock", "/run/snapd.socket", "/var/lib/lxd/unix.socket", "/var/lib/incus/unix.socket", "/run/containerd/containerd.sock"];

function realOrNull(path: string): string | null {
  try {
    return realpathSync(path);
  } catch {
    return null;
  }
}

function isDirectory(path: string): boolean {
  return statSync(path, { throwIfNoEntry: false })?.isDirectory() ?? false;
}

/** Folders searched for repositories before giving up: bounded, since it is done before every command. */
const MAX_FOLDERS_SEARCHED = 4000;

/**
 * The `.git` folders (and `.git` files, which point git elsewhere) of the workspace and of
 * repositories inside it, down to `depth` levels, dependency folders included: read-only to confined
 * commands — config, hooks, `commondir` and all — and, being mount points, impossible to rename or
 * replace. What the user's own git later reads there, no task has written.
 */
export function gitFolders(workspace: string, depth = 4): string[] {
  const found: string[] = [];
  const queue: Array<[string, number]> = [[workspace, 0]];
  let searched = 0;
  // Breadth first, so that the bound leaves the shallow repositories, the likeliest, protected.
  while (queue.length > 0 && searched < MAX_FOLDERS_SEARCHED && found.length < 256) {
    const [dir, level] = queue.shift()!;
    searched += 1;
    let entries: import("node:fs").Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      continue;
    }
    for (const entry of entries) {
      const path = join(dir, entry.name);
      if (entry.name === ".git" && (entry.isDirectory() || entry.isFile())) found.push(path);
      else if (entry.isDirectory() && level < depth) queue.push([path, level + 1]);
    }
  }
  return found;
}

/**
 * The folders between the workspace and a hidden path inside it. Bound onto themselves they become
 * mount points, which cannot be renamed: `mv data elsewhere` would otherwise move DuckLM's home out
 * from under its hiding place.
 */
function pinnedAncestors(workspace: string, hidden: string): string[] {
  const pinned: string[] = [];
  for (let dir = dirname(hidden); dir.length > workspace.length && dir.startsWith(`${workspace}/`); dir = dirname(dir)) pinned.unshift(dir);
  return pinned;
}

export interface BubblewrapOptions {
  /** DuckLM's home, config and plugin folders: hidden from every command. */
  hiddenPaths: readonly string[];
  /**
   * What commands may read but never change, even inside the workspace: DuckLM's program (its build,
   * sources, packages, page and bundled config), which holds no secret.
   */
  readOnlyPaths?: readonly string[];
  /** Commands given the network may reach private (LAN) addresses. Defaults to false. */
  allowPrivateNetwork?: boolean;
  /** Which addresses commands given the network may reach, instead of public ones only (tests). */
  allowAddress?: (address: string) => boolean;
  binary?: string;
  logger?: Logger;
}

/**
 * bubblewrap: the whole filesystem read-only, the workspace writable (its `.git` config and hooks
 * read-only), DuckLM's own state and service sockets hidden, a private /tmp, /dev and /proc, no
 * capabilities, a new session (no terminal injection), and no network: a command given the network
 * reaches it only through a proxy that refuses this machine, so DuckLM's API stays out of reach.
 */
export function bubblewrapShell(options: BubblewrapOptions): ShellSandbox {
  const binary = options.binary ?? "bwrap";
  let proxy: Promise<NetworkProxy> | null = null;
  // DuckLM's private folders (askpass, sudo relay, network proxy) live in the temporary folder too.
  const temporary = tmpdir() === "/tmp" ? [] : [tmpdir()];
  return {
    kind: "bwrap",
    confinement: "confined",
    note: "shell commands can write only inside the workspace, cannot see DuckLM's own files and have no network unless allowed (bubblewrap)",
    async launch(command, launch) {
      // Worked out at every launch: a path that appears or moves after start is hidden all the same.
      const hidden = [...new Set([...options.hiddenPaths, ...temporary].map((path) => realOrNull(path)).filter((path): path is string => path !== null))];
      const args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"];
      const hide = (path: string) => (isDirectory(path) ? args.push("--tmpfs", path) : args.push("--ro-bind", "/dev/null", path));
      // Later mounts cover earlier ones: a hidden folder that holds the workspace is hidden first, one
      // inside the workspace after the workspace is bound.
      const holdsWorkspace = (path: string) => launch.workspace === path || launch.workspace.startsWith(`${path}/`);
      for (const path of hidden.filter(holdsWorkspace)) hide(path);
      for (const path of [launch.workspace, ...(launch.extraWritable ?? [])]) args.push("--bind", path, path);
      const found = gitFolders(launch.workspace);
      const repositories = [...new Set([...found, ...found.flatMap((dotGit) => pointedRepositories(dotGit, launch.workspace)), ...workspaceRepositoryPaths(launch.workspace).filter((folder) => existsSync(folder))])];
      const inside = hidden.filter((candidate) => !holdsWorkspace(candidate));
      // Outside the workspace everything is read-only already; inside, such a folder is bound read-only.
      const readOnly = [...new Set((options.readOnlyPaths ?? []).map((path) => realOrNull(path)).filter((path): path is string => path !== null && path.startsWith(`${launch.workspace}/`)))];
      // A folder of the program that is not there (`dist` before a build, `src` of an installed
      // package) must not be made by a task either: the next start would run what it put there. A
      // throwaway tmpfs covers a missing folder, /dev/null a missing file (one named with an extension,
      // `.npmrc`); bubblewrap leaves the empty folder or file it mounts on.
      const absent = (options.readOnlyPaths ?? []).filter((path) => path.startsWith(`${launch.workspace}/`) && isDirectory(dirname(path)) && !lstatSync(path, { throwIfNoEntry: false }));
      // Pinned first, protected after: a pinned folder must not cover a read-only `.git` or a hidden
      // path within it. Folders holding a nested `.git` are pinned too, or renaming one (`mv sub x`)
      // would carry the read-only `.git` off and leave a writable copy in its place.
      const pinned = new Set([...inside, ...repositories, ...readOnly].flatMap((path) => pinnedAncestors(launch.workspace, path)));
      for (const ancestor of pinned) args.push("--bind", ancestor, ancestor);
      for (const path of [...repositories, ...readOnly]) args.push("--ro-bind", path, path);
      for (const path of absent) args.push(...(/\.[a-z]+$/.test(path) ? ["--ro-bind", "/dev/null", path] : ["--tmpfs", path]));
      for (const path of inside) hide(path);
      for (const path of SERVICE_SOCKET_DIRS) if (isDirectory(path) && realOrNull(path) === path) args.push("--tmpfs", path);
      for (const path of SERVICE_SOCKET_FILES) if (existsSync(path) && realOrNull(path) === path) args.push("--ro-bind", "/dev/null", path);
      for (const path of launch.extraReadable ?? []) args.push("--ro-bind", path, path);
      args.push("--chdir", launch.workspace, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--unshare-net");
      // As root, the sandbox would otherwise keep root's capabilities (remounting / among them).
      if (process.getuid?.() === 0) args.push("--cap-drop", "ALL");
      const env: Record<string, string> = { TMPDIR: "/tmp" };
      if (launch.network) {
        proxy ??= startNetworkProxy({
          allowPrivate: options.allowPrivateNetwork ?? false,
          ...(options.allowAddress ? { allowAddress: options.allowAddress } : {}),
          ...(options.logger ? { logger: options.logger } : {}),
        });
        const started = await proxy;
        args.push("--ro-bind", started.folder, started.folder);
        const address = `http://127.0.0.1:${SANDBOX_PROXY_PORT}`;
        for (const name of ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"]) env[name] = address;
        env.NO_PROXY = "";
        env.no_proxy = "";
        args.push(process.execPath, started.bridgePath, started.socketPath, String(SANDBOX_PROXY_PORT), SHELL, "-c", command);
      } else {
        args.push(SHELL, "-c", command);
      }
      return { file: binary, args, env };
    },
    async dispose() {
      const started = proxy;
      proxy = null;
      if (started) await (await started).close();
    },
  };
}

/** Whether bubblewrap is installed and can start a confined process here (it cannot in some containers). */
export function probeBubblewrap(binary = "bwrap"): { usable: boolean; reason: string } {
  const probe = spawnSync(binary, ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-net", "--die-with-parent", "/bin/true"], {
    timeout: 5_000,
    stdio: ["ignore", "ignore", "pipe"],
    encoding: "utf8",
  });
  if (probe.error) return { usable: false, reason: `bubblewrap is not installed (${(probe.error as NodeJS.ErrnoException).code ?? probe.error.message})` };
  if (probe.status !== 0) return { usable: false, reason: `bubblewrap cannot run here: ${probe.stderr.trim() || `exit ${probe.status}`}` };
  return { usable: true, reason: "bubblewrap works" };
}

export interface SandboxChoice {
  sandbox: ShellSandbox;
  /** Said at start, in `doctor` and in `/health` when commands are not confined. */
  warning: string | null;
}

/**
 * The sandbox runtime.json asks for. `auto` uses bubblewrap when it works; without it nothing runs
 * unattended (every command is asked). `bwrap` insists. `off` is the explicit, loud opt-out.
 */
export function chooseShellSandbox(mode: "auto" | "bwrap" | "off", options: BubblewrapOptions): SandboxChoice {
  if (mode === "off") {
    return {
      sandbox: { ...unconfinedShell, confinement: "off", note: "confinement is OFF (runtime.json sandbox.mode off): commands can read and write anything you can, DuckLM's own files and network included" },
      warning: "shell commands are NOT confined: runtime.json sets sandbox.mode off, so a command can read and write anything you can, including DuckLM's own files",
    };
  }
  const probe = probeBubblewrap(options.binary);
  if (probe.usable) return { sandbox: bubblewrapShell(options), warning: null };
  if (mode === "bwrap") throw new DuckError(ErrorCode.ConfigInvalid, `runtime.json sandbox.mode is bwrap, but ${probe.reason}`);
  const note = `shell commands cannot be confined: ${probe.reason}; every command is asked before it runs`;
  return { sandbox: { ...unconfinedShell, note }, warning: `${note}. Install bubblewrap (apt-get install bubblewrap) to confine commands to the workspace` };
}
