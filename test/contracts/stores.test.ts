import { join } from "node:path";
import pino from "pino";
import { afterAll, beforeAll } from "vitest";
import { openPostgresStores, openStores, type DuckStores } from "../../src/state/open-stores.js";
import { startTestPostgres, type TestPostgres } from "../helpers/postgres-server.js";
import { makeTempDir } from "../helpers/test-runtime.js";
import { describeStoreContract, type StoreBackend } from "./store-contract.js";

const logger = pino({ level: "silent" });

function backendOn(name: string, durable: boolean, file: () => string): StoreBackend {
  return {
    name,
    durable,
    open(clock) {
      const path = file();
      let current: DuckStores = openStores(path, { logger, clock });
      const others: DuckStores[] = [];
      return {
        stores: current,
        close: () => {
          for (const other of others) other.database.close();
          current.database.close();
        },
        reopen() {
          current.database.close();
          current = openStores(path, { logger, clock });
          return current;
        },
        ...(durable ? { second: () => others[others.push(openStores(path, { logger, clock })) - 1]! } : {}),
      };
    },
  };
}

describeStoreContract(backendOn("SQLite file", true, () => join(makeTempDir("ducklm-stores-"), "ducklm.sqlite3")));
describeStoreContract(backendOn("SQLite :memory:", false, () => ":memory:"));

let postgres: TestPostgres;
beforeAll(async () => {
  postgres = await startTestPostgres();
}, 60_000);
afterAll(() => postgres?.stop());

describeStoreContract({
  name: "PostgreSQL",
  durable: true,
  open(clock) {
    const url = postgres.createDatabase();
    let current: DuckStores = openPostgresStores(url, { logger, clock });
    const others: DuckStores[] = [];
    return {
      stores: current,
      close: () => {
        for (const other of others) other.database.close();
        current.database.close();
      },
      reopen() {
        current.database.close();
        current = openPostgresStores(url, { logger, clock });
        return current;
      },
      second: () => others[others.push(openPostgresStores(url, { logger, clock })) - 1]!,
    };
  },
});
