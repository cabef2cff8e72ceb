import { openDatabase, type OpenDatabaseOptions } from "./open-database.js";

/** SQLite's own integrity check of a database file ("ok", or what it found). */
export function checkDatabaseIntegrity(file: string, options: OpenDatabaseOptions = {}): string {
  const database = openDatabase(file, options);
  try {
    return String(database.db.pragma("integrity_check", { simple: true }));
  } finally {
    database.close();
  }
}
