import type { Command } from "commander";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { runPlain, type GlobalOptions } from "../with-ducklm.js";

/** The database of the home the global options name, or null (said, with the exit code 2) when there is none. */
async function existingDatabase(program: Command): Promise<string | null> {
  const { resolveHomeDir } = await import("../../config/load-config.js");
  const home = resolveHomeDir(program.opts<GlobalOptions>().home);
  const file = join(home, "ducklm.sqlite3");
  if (existsSync(file)) {
    // A full disk is not damage: SQLite cannot even open its WAL index there, and says so as an error.
    const { freeBytes, MIN_FREE_BYTES_TO_START, diskFullError } = await import("../../storage/disk-space.js");
    const free = freeBytes(home);
    if (free !== null && free < MIN_FREE_BYTES_TO_START) throw diskFullError(home, free);
    return file;
  }
  const homeIsFile = statSync(home, { throwIfNoEntry: false })?.isDirectory() === false;
  console.error(`error DUCK_ERR_INVALID_INPUT: ${homeIsFile ? `${home} is not a folder, so it holds no database` : `there is no database at ${file}`} (choose the home with --home)`);
  return null;
}

/** `ducklm db check` and `ducklm db recover`: what is damaged in the database, and salvage of what is not. */
export function registerDb(program: Command): void {
  const db = program.command("db").description("check the database for damage, and recover what is intact");
  db.command("check")
    .description("integrity of the file and JSON validity of every row; changes nothing")
    .option("--json", "print the report as JSON")
    .action(async (options: { json?: boolean }) =>
      runPlain(async () => {
        const file = await existingDatabase(program);
        if (!file) return 2;
        const { checkDatabaseFile } = await import("../../state/database-repair.js");
        const report = checkDatabaseFile(file);
        if (options.json) console.log(JSON.stringify(report, null, 2));
        else if (report.ok) console.log(`${file}: ok (${report.tasks} tasks, ${report.events} events)`);
        else if (report.notDamage) {
          console.error(`error DUCK_ERR_STORAGE: ${file} could not be read (${report.unreadable}): this is no sign of damage; check the disk and the file's permissions, then check again`);
        } else {
          console.log(`${file}: damaged`);
          if (report.unreadable) console.log(`  it cannot be read as a database: ${report.unreadable}`);
          for (const line of report.integrity.filter((entry) => entry !== "ok").slice(0, 20)) console.log(`  integrity: ${line}`);
          for (const line of report.problems.slice(0, 50)) console.log(`  ${line}`);
          if (report.problems.length > 50) console.log(`  … and ${report.problems.length - 50} more`);
          console.log("Run `ducklm db recover` to keep every intact task in a new file (the damaged one is kept beside it).");
        }
        return report.ok ? 0 : 1;
      }),
    );
  db.command("recover")
    .description("salvage every intact task, memory and approval into a new database; the damaged file is kept")
    .option("--json", "print the report as JSON")
    .action(async (options: { json?: boolean }) =>
      runPlain(async () => {
        const file = await existingDatabase(program);
        if (!file) return 2;
        const { recoverDatabaseFile } = await import("../../state/database-repair.js");
        const report = recoverDatabaseFile(file);
        if (options.json) {
          console.log(JSON.stringify(report, null, 2));
          return 0;
        }
        console.log(`recovered ${file}; the damaged file is kept as ${report.damaged_copy}`);
        console.log(`  tasks kept: ${report.tasks_kept} (${report.tasks_cut_short.length} cut short at the damage), lost: ${report.tasks_lost.length}`);
        console.log(`  events kept: ${report.events_kept}, lost: ${report.events_lost}; memories kept: ${report.memories_kept}; approvals kept: ${report.approvals_kept}`);
        for (const task of report.tasks_cut_short.slice(0, 20)) console.log(`  task ${task.task_id}: kept through event ${task.kept_through_seq}, ${task.events_lost} lost after it (it resumes from there)`);
        for (const taskId of report.tasks_lost.slice(0, 20)) console.log(`  task ${taskId}: lost`);
        return 0;
      }),
    );
}
