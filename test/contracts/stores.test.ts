import { join } from "node:path";
import pino from "pino";
import { afterAll, beforeAll } from "vitest";
import { openPostgresStores, openStores, type DuckStores } from "../../src/state/open-stores.js";
import type { Clock } from "../../src/state/task-store.js";
import { startTestPostgres, type TestPostgres } from "../helpers/postgres-server.js";
import { makeTempDir } from "../helpers/test-runtime.js";
import { describeStoreContract, type StoreBackend } from "./store-contract.js";

const logger = pino({ level: "silent" });

/**
 * A backend whose `where()` names a fresh database and `openAt` opens the stores on one; a durable one
 * can open a second connection to the same database, as another process would.
 */
function backend(name: string, durable: boolean, where: () => string, openAt: (where: string, clock: Clock) => DuckStores): StoreBackend {
  return {
    name,
    durable,
    open(clock) {
      const location = where();
      let current = openAt(location, clock);
      const others: DuckStores[] = [];
      return {
        stores: current,
        close: () => {
          for (const other of others) other.database.close();
          current.database.close();
        },
        reopen() {
          current.database.close();
          current = openAt(location, clock);
          return current;
        },
        ...(durable ? { second: () => others[others.push(openAt(location, clock)) - 1]! } : {}),
      };
    },
  };
}

const onSqlite = (path: string, clock: Clock) => openStores(path, { logger, clock });
describeStoreContract(backend("SQLite file", true, () => join(makeTempDir("ducklm-stores-"), "ducklm.sqlite3"), onSqlite));
describeStoreContract(backend("SQLite :memory:", false, () => ":memory:", onSqlite));

let postgres: TestPostgres;
beforeAll(async () => {
  postgres = await startTestPostgres();
}, 60_000);
afterAll(() => postgres?.stop());

describeStoreContract(backend("PostgreSQL", true, () => postgres.createDatabase(), (url, clock) => openPostgresStores(url, { logger, clock })));
