import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresDatabase, translatePlaceholders } from "../../src/storage/postgres/postgres-database.js";
import { SyncPostgres } from "../../src/storage/postgres/sync-postgres.js";
import { startTestPostgres, type TestPostgres } from "../helpers/postgres-server.js";

let postgres: TestPostgres;
beforeAll(async () => {
  postgres = await startTestPostgres();
}, 60_000);
afterAll(() => postgres?.stop());

function freshDatabase(): PostgresDatabase {
  const db = new PostgresDatabase(postgres.createDatabase(), { applicationName: "ducklm-test-db" });
  db.exec("CREATE TABLE ducks (name TEXT PRIMARY KEY, age INTEGER)");
  return db;
}

describe("PostgresDatabase, the stores' synchronous connection to PostgreSQL", () => {
  it("numbers `?` and `@name` placeholders, leaving quoted text and comments alone", () => {
    expect(translatePlaceholders("SELECT * FROM t WHERE a = ? AND b = '?' AND c = @c -- what?\nAND d = @c AND e = ? /* or @that? */ AND \"x?\" = 1")).toEqual({
      text: "SELECT * FROM t WHERE a = $1 AND b = '?' AND c = $2 -- what?\nAND d = $2 AND e = $3 /* or @that? */ AND \"x?\" = 1",
      bindings: [0, "c", 1],
    });
  });

  it("commits nothing when a write failed inside a transaction, even if the caller caught the error", () => {
    const db = freshDatabase();
    try {
      db.prepare("INSERT INTO ducks (name, age) VALUES (?, ?)").run("huey", 1);
      const insert = db.prepare("INSERT INTO ducks (name, age) VALUES (?, ?)");
      const transaction = db.transaction(() => {
        insert.run("dewey", 2);
        insert.run("huey", 3); // a duplicate: fails when it reaches the server
        try {
          db.prepare("SELECT COUNT(*) AS n FROM ducks").get();
        } catch {
          // swallowed, as a reader that tolerates a damaged row might
        }
        return "done";
      });
      expect(() => transaction()).toThrow(/duplicate key/);
      expect(db.prepare("SELECT name FROM ducks ORDER BY name").all()).toEqual([{ name: "huey" }]);
    } finally {
      db.close();
    }
  });

  it("keeps the rest of a transaction when a savepoint inside it failed and was caught", () => {
    const db = freshDatabase();
    try {
      const insert = db.prepare("INSERT INTO ducks (name, age) VALUES (?, ?)");
      const inner = db.transaction(() => {
        insert.run("louie", 3);
        insert.run("louie", 4);
        return db.prepare("SELECT 1 AS one").get();
      });
      db.transaction(() => {
        insert.run("daisy", 5);
        expect(() => inner()).toThrow(/duplicate key/);
        insert.run("donald", 6);
      })();
      expect(db.prepare("SELECT name FROM ducks ORDER BY name").all()).toEqual([{ name: "daisy" }, { name: "donald" }]);
    } finally {
      db.close();
    }
  });

  it("connects again after the server dropped its connection, losing only the statement under way", () => {
    const db = freshDatabase();
    const admin = new SyncPostgres(postgres.url());
    try {
      db.prepare("INSERT INTO ducks (name, age) VALUES (?, ?)").run("scrooge", 70);
      admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'ducklm-test-db'");
      expect(() => db.prepare("SELECT COUNT(*) AS n FROM ducks").get()).toThrow();
      expect(db.prepare("SELECT COUNT(*) AS n FROM ducks").get()).toEqual({ n: 1 });
    } finally {
      admin.close();
      db.close();
    }
  });
});
