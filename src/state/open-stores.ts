import type { Logger } from "pino";
import { EventBus } from "../events/event-bus.js";
import { EventStore } from "../events/event-store.js";
import { MemoryStore } from "../memory/memory-store.js";
import { ApprovalStore } from "../permissions/approval-store.js";
import { openDatabase, type DuckDatabase, type OpenDatabaseOptions } from "../storage/open-database.js";
import { notifyCommits } from "../storage/postgres/commit-notices.js";
import { openPostgresDatabase, type OpenPostgresOptions } from "../storage/postgres/open-postgres.js";
import { LoginStore } from "./login-store.js";
import { TaskLeases } from "./task-leases.js";
import { TaskStore, type Clock } from "./task-store.js";

/** Every store DuckLM keeps, on one database. */
export interface DuckStores {
  database: DuckDatabase;
  events: EventStore;
  bus: EventBus;
  tasks: TaskStore;
  memories: MemoryStore;
  approvals: ApprovalStore;
  logins: LoginStore;
  /** Which process drives which task (see TaskLeases). */
  leases: TaskLeases;
}

export interface StoreOptions {
  logger: Logger;
  clock?: Clock;
  leaseTtlMs?: number;
}

/** Opens the SQLite database (a file, or `:memory:`) and the stores on it. */
export function openStores(file: string, options: OpenDatabaseOptions & StoreOptions): DuckStores {
  return storesOn(openDatabase(file, options.synchronous ? { synchronous: options.synchronous } : {}), options);
}

/** Connects to a PostgreSQL database (see docs/decisions/0010) and opens the same stores on it. */
export function openPostgresStores(url: string, options: OpenPostgresOptions & StoreOptions): DuckStores {
  return storesOn(openPostgresDatabase(url, options), options);
}

/**
 * The one place stores are made, on either backend: the same classes and SQL, checked by the same
 * store suite (test/contracts).
 */
function storesOn(database: DuckDatabase, options: StoreOptions): DuckStores {
  const events = new EventStore(database.db);
  const bus = new EventBus((taskId, fromSeq, limit) => events.list(taskId, fromSeq, limit), options.logger);
  const tasks = new TaskStore(database.db, events, bus, options.clock);
  const leases = new TaskLeases(database.db, { ttlMs: options.leaseTtlMs ?? 30_000, ...(options.clock ? { clock: options.clock } : {}) });
  tasks.alsoInEachCommit((endsHere) => leases.writeNewClaims(endsHere));
  tasks.afterEachCommit(() => leases.committed());
  // Each commit checks the lease epoch of every task it writes: an owner paused past its lease writes nothing.
  tasks.writerFence = leases;
  // Other processes on the same PostgreSQL database hear of each commit (see commit-notices.ts).
  if (database.dialect === "postgres") tasks.alsoWithEachCommitsEvents(notifyCommits(database.db, leases.owner));
  return {
    database,
    events,
    bus,
    tasks,
    memories: new MemoryStore(database.db, options.clock),
    approvals: new ApprovalStore(database.db, options.clock),
    logins: new LoginStore(database.db, options.clock),
    leases,
  };
}
