import type { Command } from "commander";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { runPlain, type GlobalOptions } from "../with-ducklm.js";

/** `ducklm migrate --to postgres`: copies the home's SQLite database into a PostgreSQL database. */
export function registerMigrate(program: Command): void {
  program
    .command("migrate")
    .description("copy this home's tasks, events, memory and approvals from SQLite into an empty PostgreSQL database")
    .requiredOption("--to <backend>", "the store to copy into: postgres")
    .option("--url-env <name>", "environment variable with the connection string (default: runtime.json storage.postgres_url_env, i.e. DUCKLM_POSTGRES_URL)")
    .action(async (options: { to: string; urlEnv?: string }) =>
      runPlain(async () => {
        if (options.to !== "postgres") {
          console.error(`error DUCK_ERR_INVALID_INPUT: --to ${options.to} is not a store DuckLM can migrate to; the one there is: postgres`);
          return 2;
        }
        const [{ loadConfig, resolveConfigDir, resolveHomeDir }, { postgresUrlOf }, { copyToPostgres }] = await Promise.all([
          import("../../config/load-config.js"),
          import("../../runtime/postgres-url.js"),
          import("../../storage/postgres/copy-to-postgres.js"),
        ]);
        const globals = program.opts<GlobalOptions>();
        const file = join(resolveHomeDir(globals.home), "ducklm.sqlite3");
        if (!existsSync(file)) {
          console.error(`error DUCK_ERR_INVALID_INPUT: there is no database at ${file} to migrate (choose the home with --home)`);
          return 2;
        }
        const config = loadConfig(resolveConfigDir(globals.config));
        const urlEnv = options.urlEnv ?? config.runtime.storage.postgres_url_env;
        const url = postgresUrlOf({ ...config, runtime: { ...config.runtime, storage: { ...config.runtime.storage, postgres_url_env: urlEnv } } }, process.env);
        const report = copyToPostgres(file, url);
        console.log(`copied ${file} into ${report.to}:`);
        for (const [table, rows] of Object.entries(report.rows)) console.log(`  ${table}: ${rows}`);
        console.log(`The SQLite file is left as it was. To use PostgreSQL from now on, set "storage": { "backend": "postgres" } in runtime.json${urlEnv === "DUCKLM_POSTGRES_URL" ? "" : ` and "postgres_url_env": "${urlEnv}"`}, with ${urlEnv} set wherever DuckLM runs.`);
        return 0;
      }),
    );
}
