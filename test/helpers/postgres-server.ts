import { execFileSync, type ExecFileSyncOptions } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { SyncPostgres } from "../../src/storage/postgres/sync-postgres.js";

/**
 * A throwaway PostgreSQL cluster for one test file: initdb in a temporary folder, a server on a free
 * loopback port, stopped and deleted at the end. `npm test` needs no running service, only Debian's
 * `postgresql` package (which .ci/run installs).
 */
export interface TestPostgres {
  /** The connection string of a database on this server. */
  url(database?: string): string;
  /** A new empty database, and its connection string. */
  createDatabase(): string;
  /** Stops the server at once (as a crash would) and deletes its files. */
  stop(): void;
}

/** Where Debian keeps the server programs, which are not on PATH. */
function serverBinDir(): string {
  const onPath = (() => {
    try {
      return execFileSync("sh", ["-c", "command -v initdb"], { encoding: "utf8" }).trim();
    } catch {
      return "";
    }
  })();
  if (onPath) return join(onPath, "..");
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root) ? readdirSync(root).filter((name) => existsSync(join(root, name, "bin", "initdb"))).sort((a, b) => Number(b) - Number(a)) : [];
  if (versions.length === 0) throw new Error("PostgreSQL's server programs (initdb, pg_ctl) were not found: install Debian's postgresql package (.ci/run does)");
  return join(root, versions[0]!, "bin");
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

let databases = 0;

export interface TestPostgresOptions {
  /** Another folder the server puts its Unix socket in, besides its own temporary one (made postgres's when run as root). */
  socketDir?: string;
}

export async function startTestPostgres(options: TestPostgresOptions = {}): Promise<TestPostgres> {
  const bin = serverBinDir();
  const dir = mkdtempSync(join(tmpdir(), "ducklm-pg-"));
  const data = join(dir, "data");
  const port = await freePort();
  // PostgreSQL refuses to run as root: as root, the cluster belongs to the postgres user.
  const asRoot = userInfo().uid === 0;
  if (asRoot) {
    const [uid, gid] = [Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim()), Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim())];
    for (const folder of [dir, ...(options.socketDir ? [options.socketDir] : [])]) chownSync(folder, uid, gid);
  }
  const run = (program: string, args: string[], options: ExecFileSyncOptions = {}) => {
    const command = asRoot ? ["runuser", ["-u", "postgres", "--", join(bin, program), ...args]] as const : [join(bin, program), args] as const;
    return execFileSync(command[0], command[1], { stdio: ["ignore", "pipe", "pipe"], ...options });
  };
  run("initdb", ["-D", data, "-U", "ducklm", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync", "--no-instructions"]);
  // Durability settings off: these tests kill DuckLM's processes, never the server, and run faster so.
  const settings = `-p ${port} -c listen_addresses=127.0.0.1 -k ${[dir, ...(options.socketDir ? [options.socketDir] : [])].join(",")} -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200`;
  run("pg_ctl", ["-D", data, "-o", settings, "-l", join(dir, "server.log"), "-w", "-t", "60", "start"]);
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    try {
      run("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  process.once("exit", stop);
  const url = (database = "postgres") => `postgresql://ducklm@127.0.0.1:${port}/${database}`;
  return {
    url,
    createDatabase() {
      const name = `ducklm_test_${process.pid}_${++databases}`;
      const admin = new SyncPostgres(url());
      try {
        admin.query(`CREATE DATABASE ${name}`);
      } finally {
        admin.close();
      }
      return url(name);
    },
    stop,
  };
}
