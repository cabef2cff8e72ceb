import Database from "better-sqlite3";
import { closeSync, copyFileSync, existsSync, mkdtempSync, openSync, readSync, renameSync, rmSync, statSync, truncateSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import type { DuckEvent, EventTypeName } from "../contracts/index.js";
import { BlobStore, blobHashOf, blobMatchesHash, missingBlob, unpackJson } from "../storage/blob-store.js";
import { openDatabase, type SqliteDatabase } from "../storage/open-database.js";
import { projectEvents } from "./task-projection.js";
import { TaskRows } from "./task-rows.js";

/** What `ducklm db check` found. */
export interface DatabaseCheck {
  file: string;
  ok: boolean;
  /** The file cannot be read as a database at all (a wrong header, an empty file). */
  unreadable: string | null;
  /** It could not be read for a reason outside the file (an I/O error, a full disk, no permission): no sign of damage. */
  notDamage?: boolean;
  /** SQLite's integrity check: "ok", or its findings. */
  integrity: string[];
  /** Rows that cannot be read or whose JSON does not parse, and tables that could not be read through. */
  problems: string[];
  tasks: number;
  events: number;
}

/** What `ducklm db recover` kept and lost. */
export interface RecoveryReport {
  file: string;
  /** Where the damaged file now is (kept, never deleted). */
  damaged_copy: string;
  tasks_kept: number;
  /** Tasks kept up to the last event before the damage: they can be resumed from there. */
  tasks_cut_short: Array<{ task_id: string; kept_through_seq: number; events_lost: number }>;
  /** Tasks of which nothing readable was left. */
  tasks_lost: string[];
  events_kept: number;
  events_lost: number;
  memories_kept: number;
  approvals_kept: number;
}

interface EventRow {
  id: number;
  task_id: string;
  seq: number;
  type: string;
  time: string;
  payload: string;
}

/** An event row read back, its payload parsed and its long texts resolved. */
type ReadEvent = Omit<EventRow, "payload"> & { payload: Record<string, unknown> };

/**
 * Opens a database file to read what it holds. A file cut short (a copy that stopped, a full disk)
 * is shorter than its header says, and SQLite then refuses every query; read through a copy padded
 * to its full length instead, so that only the missing pages are missing.
 */
function openReadOnly(file: string, notes: string[] = []): { db: SqliteDatabase; release(): void } {
  const header = Buffer.alloc(100);
  const handle = openSync(file, "r");
  try {
    readSync(handle, header, 0, 100, 0);
  } finally {
    closeSync(handle);
  }
  const pageSize = header.readUInt16BE(16) === 1 ? 65_536 : header.readUInt16BE(16);
  const expected = header.readUInt32BE(28) * pageSize;
  const actual = statSync(file).size;
  if (header.toString("latin1", 0, 16) !== "SQLite format 3\0" || expected <= actual) {
    const db = new Database(file, { readonly: true, fileMustExist: true });
    return { db, release: () => db.close() };
  }
  notes.push(`the file is cut short: ${actual} of its ${expected} bytes are there`);
  const folder = mkdtempSync(join(tmpdir(), "ducklm-salvage-"));
  const copy = join(folder, basename(file));
  copyFileSync(file, copy);
  if (existsSync(`${file}-wal`)) copyFileSync(`${file}-wal`, `${copy}-wal`);
  truncateSync(copy, expected);
  const db = new Database(copy, { readonly: true, fileMustExist: true });
  return {
    db,
    release() {
      db.close();
      rmSync(folder, { recursive: true, force: true });
    },
  };
}

/** Rowids read in one query while a table is read around its damage. */
const ROW_WINDOW = 256;
/**
 * Where the highest rowid cannot be read either, rows are looked for until this many windows in a
 * row hold none that can be read: past the last row, every query fails alike, absent or damaged.
 */
const EMPTY_WINDOWS_AFTER_THE_END = 4;

/**
 * The rows of a table that can still be read: all at once when that works; otherwise in windows of
 * rowids, and row by row in a window that fails, so that one bad page loses only its own rows. The
 * rows that cannot be read are reported as ranges, one line each.
 */
function readableRows<T>(db: SqliteDatabase, table: string, problems: string[]): T[] {
  try {
    return db.prepare(`SELECT * FROM ${table} ORDER BY rowid`).all() as T[];
  } catch (error) {
    problems.push(`${table}: cannot be read straight through (${(error as Error).message})`);
  }
  let highest: number | null;
  try {
    highest = (db.prepare(`SELECT max(rowid) AS n FROM ${table}`).get() as { n: number | null }).n ?? 0;
  } catch {
    // The way to the last row is damaged too: read on until nothing more can be.
    highest = null;
  }
  const rows: T[] = [];
  const unreadable: Array<[number, number]> = [];
  const lost = (rowid: number) => {
    const last = unreadable.at(-1);
    if (last && last[1] === rowid - 1) last[1] = rowid;
    else unreadable.push([rowid, rowid]);
  };
  const window = db.prepare(`SELECT * FROM ${table} WHERE rowid BETWEEN ? AND ? ORDER BY rowid`);
  const one = db.prepare(`SELECT * FROM ${table} WHERE rowid = ?`);
  let emptyWindows = 0;
  let lastRead = 0;
  for (let start = 1; highest === null ? emptyWindows < EMPTY_WINDOWS_AFTER_THE_END : start <= highest; start += ROW_WINDOW) {
    const end = highest === null ? start + ROW_WINDOW - 1 : Math.min(start + ROW_WINDOW - 1, highest);
    const before = rows.length;
    try {
      rows.push(...(window.all(start, end) as T[]));
    } catch {
      for (let rowid = start; rowid <= end; rowid += 1) {
        try {
          const row = one.get(rowid) as T | undefined;
          if (row) rows.push(row);
        } catch {
          lost(rowid);
        }
      }
    }
    if (rows.length > before) {
      emptyWindows = 0;
      lastRead = end;
    } else emptyWindows += 1;
  }
  for (const [from, to] of unreadable) {
    // With no known end, what failed after the last row read is taken for the end of the table.
    if (highest === null && from > lastRead) {
      problems.push(`${table}: rows from ${from} on cannot be read (the table's index to its last rows is damaged)`);
      break;
    }
    problems.push(from === to ? `${table}: row ${from} cannot be read` : `${table}: rows ${from}–${to} cannot be read`);
  }
  return rows;
}

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * The intact long texts of a database (see BlobStore): each readable blob whose text matches its hash.
 * A database from before blobs has none.
 */
function intactBlobs(db: SqliteDatabase, problems: string[]): Map<string, string> {
  const blobs = new Map<string, string>();
  const exists = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'blobs'").get();
  if (!exists) return blobs;
  for (const row of readableRows<{ hash: string; text: string }>(db, "blobs", problems)) {
    if (blobMatchesHash(row.hash, row.text)) blobs.set(row.hash, row.text);
    else problems.push(`blobs: blob ${row.hash} does not hold the text its hash names`);
  }
  return blobs;
}

/** Stored JSON with its references resolved from `blobs`, or null when it does not parse or a blob is missing. */
function resolved(text: string, blobs: Map<string, string>): unknown {
  try {
    return unpackJson(text, (reference) => {
      const found = blobs.get(blobHashOf(reference) ?? "");
      if (found === undefined) throw missingBlob(reference);
      return found;
    });
  } catch {
    return null;
  }
}

/** Why a stored JSON text cannot be read back: not JSON, or a blob it refers to is missing; null when it can. */
function unreadableBecause(text: string, blobs: Map<string, string>): string | null {
  if (!parses(text)) return "is not valid JSON";
  return resolved(text, blobs) === null ? "refers to a long text (blob) that is missing or damaged" : null;
}

/** Integrity, readability and JSON validity of every row of a DuckLM database; changes nothing. */
export function checkDatabaseFile(file: string): DatabaseCheck {
  const report: DatabaseCheck = { file, ok: false, unreadable: null, integrity: [], problems: [], tasks: 0, events: 0 };
  let opened: ReturnType<typeof openReadOnly>;
  try {
    opened = openReadOnly(file, report.problems);
    opened.db.pragma("schema_version");
  } catch (error) {
    report.unreadable = (error as Error).message;
    const code = String((error as { code?: unknown }).code ?? "");
    if (/^SQLITE_(IOERR|FULL|CANTOPEN|READONLY|PERM|BUSY)/.test(code) || /^E(IO|NOSPC|ACCES|PERM|ROFS)$/.test(code)) report.notDamage = true;
    return report;
  }
  const db = opened.db;
  try {
    try {
      report.integrity = (db.pragma("integrity_check") as Array<{ integrity_check: string }>).map((row) => row.integrity_check);
    } catch (error) {
      report.integrity = [(error as Error).message];
    }
    const blobs = intactBlobs(db, report.problems);
    const events = readableRows<EventRow>(db, "events", report.problems);
    report.events = events.length;
    const bySeq = new Map<string, number[]>();
    for (const event of events) {
      const why = unreadableBecause(event.payload, blobs);
      if (why) report.problems.push(`events: row ${event.id} (task ${event.task_id}, seq ${event.seq}) ${why}`);
      bySeq.set(event.task_id, [...(bySeq.get(event.task_id) ?? []), event.seq]);
    }
    for (const [taskId, seqs] of bySeq) {
      const sorted = seqs.sort((a, b) => a - b);
      if (sorted.some((seq, index) => seq !== index + 1)) report.problems.push(`events: task ${taskId} has gaps in its events (${sorted.length} of ${sorted.at(-1)} readable)`);
    }
    try {
      const tasks = db.prepare("SELECT id, answer FROM tasks").all() as Array<{ id: string; answer: string | null }>;
      report.tasks = tasks.length;
      for (const task of tasks) {
        if (!bySeq.has(task.id)) report.problems.push(`tasks: task ${task.id} has no readable events`);
        const hash = task.answer === null ? null : blobHashOf(task.answer);
        if (hash !== null && !blobs.has(hash)) report.problems.push(`tasks: the answer of task ${task.id} refers to a long text (blob) that is missing or damaged`);
      }
    } catch (error) {
      report.problems.push(`tasks: cannot be read (${(error as Error).message})`);
    }
    try {
      for (const row of db.prepare("SELECT task_id, snapshot FROM checkpoints").all() as Array<{ task_id: string; snapshot: string }>) {
        const why = unreadableBecause(row.snapshot, blobs);
        if (why) report.problems.push(`checkpoints: the snapshot of task ${row.task_id} ${why} (it is rebuilt from the events)`);
      }
    } catch (error) {
      report.problems.push(`checkpoints: cannot be read (${(error as Error).message})`);
    }
    readableRows(db, "memories", report.problems);
  } finally {
    opened.release();
  }
  report.ok = report.unreadable === null && report.integrity.length === 1 && report.integrity[0] === "ok" && report.problems.length === 0;
  return report;
}

/**
 * Salvages a damaged DuckLM database into a new file in its place, keeping the damaged one beside it
 * (`<file>.damaged-<time>`). Every task whose events can all be read is kept whole; a task damaged
 * part-way is kept up to its last event before the damage (its state as those events leave it, so a
 * resume carries it on); task rows and checkpoints are rebuilt from the events. Memories and
 * approvals are copied as far as they can be read.
 */
export function recoverDatabaseFile(file: string, now = new Date()): RecoveryReport {
  const stamp = now.toISOString().replace(/[:.]/g, "-");
  const fresh = `${file}.recovering-${stamp}`;
  const damagedCopy = `${file}.damaged-${stamp}`;
  const problems: string[] = [];
  let opened: ReturnType<typeof openReadOnly> | null = null;
  let source: SqliteDatabase | null;
  try {
    opened = openReadOnly(file, problems);
    source = opened.db;
    source.pragma("schema_version");
  } catch {
    opened?.release();
    opened = null;
    source = null; // Nothing can be read: the new file starts empty, and the report says all is lost.
  }
  const blobs = source ? intactBlobs(source, problems) : new Map<string, string>();
  // An event whose JSON or long text is lost counts as unreadable: its task is kept up to the event before.
  const rows = source ? readableRows<EventRow>(source, "events", problems) : [];
  const events = rows.flatMap((row) => {
    const payload = resolved(row.payload, blobs);
    return payload === null ? [] : [{ ...row, payload: payload as Record<string, unknown> }];
  });
  // How far each task's events went, counting rows that can be read but not used.
  const lastSeqOf = new Map<string, number>();
  for (const row of rows) lastSeqOf.set(row.task_id, Math.max(row.seq, lastSeqOf.get(row.task_id) ?? 0));
  const memories = source ? readableRows<Record<string, unknown>>(source, "memories", problems) : [];
  let approvals: Array<Record<string, unknown>> = [];
  let tasksBefore: string[] = [];
  if (source) {
    try {
      approvals = source.prepare("SELECT * FROM approvals").all() as Array<Record<string, unknown>>;
    } catch {
      // Remembered approvals are a convenience: the user is asked again.
    }
    try {
      const taskRows = source.prepare("SELECT id, last_seq FROM tasks").all() as Array<{ id: string; last_seq: number }>;
      tasksBefore = taskRows.map((row) => row.id);
      // A task row says how many events its task had, even where they cannot be read.
      for (const row of taskRows) lastSeqOf.set(row.id, Math.max(row.last_seq, lastSeqOf.get(row.id) ?? 0));
    } catch {
      // The task rows are rebuilt from the events anyway.
    }
    opened?.release();
  }

  const report: RecoveryReport = { file, damaged_copy: damagedCopy, tasks_kept: 0, tasks_cut_short: [], tasks_lost: [], events_kept: 0, events_lost: 0, memories_kept: 0, approvals_kept: 0 };
  const byTask = new Map<string, ReadEvent[]>();
  for (const row of events) byTask.set(row.task_id, [...(byTask.get(row.task_id) ?? []), row]);
  const target = openDatabase(fresh);
  try {
    const targetBlobs = new BlobStore(target.db);
    const taskRows = new TaskRows(target.db, targetBlobs);
    const insertEvent = target.db.prepare("INSERT INTO events (id, task_id, seq, type, time, payload) VALUES (?, ?, ?, ?, ?, ?)");
    target.db.transaction(() => {
      for (const [taskId, list] of byTask) {
        list.sort((a, b) => a.seq - b.seq);
        // The events from seq 1 on without a gap: what can be trusted of the task.
        let kept = 0;
        while (kept < list.length && list[kept]!.seq === kept + 1) kept += 1;
        const intact = list.slice(0, kept);
        const lastRecorded = lastSeqOf.get(taskId) ?? 0;
        if (intact.length === 0 || intact[0]!.type !== "task-received") {
          report.tasks_lost.push(taskId);
          report.events_lost += lastRecorded;
          continue;
        }
        const asEvents: DuckEvent[] = intact.map((row) => ({ task_id: row.task_id, seq: row.seq, type: row.type as EventTypeName, time: row.time, payload: row.payload }));
        const projection = projectEvents(asEvents);
        const received = asEvents[0]!.payload as { text: string; session_id: string | null; workspace: string };
        const lastTime = asEvents.at(-1)!.time;
        const rowComplete = taskRows.insert({ id: taskId, text: received.text, session_id: received.session_id ?? null, workspace: received.workspace, time: asEvents[0]!.time }, projection, lastTime);
        for (const row of intact) insertEvent.run(row.id, row.task_id, row.seq, row.type, row.time, targetBlobs.pack(row.task_id, row.payload));
        if (!rowComplete) taskRows.update(projection, lastTime);
        taskRows.writeCheckpoint(projection, lastTime);
        report.events_kept += intact.length;
        report.tasks_kept += 1;
        if (kept < lastRecorded) {
          report.tasks_cut_short.push({ task_id: taskId, kept_through_seq: kept, events_lost: lastRecorded - kept });
          report.events_lost += lastRecorded - kept;
        }
      }
      for (const taskId of tasksBefore) {
        if (byTask.has(taskId)) continue;
        // A task with no readable event at all: each event its row counted is lost with it.
        report.tasks_lost.push(taskId);
        report.events_lost += lastSeqOf.get(taskId) ?? 0;
      }
      const memoryColumns = (target.db.pragma("table_info(memories)") as Array<{ name: string }>).map((column) => column.name);
      const insertMemory = target.db.prepare(`INSERT INTO memories (${memoryColumns.join(", ")}) VALUES (${memoryColumns.map((name) => `@${name}`).join(", ")})`);
      for (const memory of memories) {
        try {
          insertMemory.run(Object.fromEntries(memoryColumns.map((name) => [name, memory[name] ?? null])));
          report.memories_kept += 1;
        } catch {
          // A row that does not fit the schema any more is left behind with the damaged file.
        }
      }
      const approvalColumns = (target.db.pragma("table_info(approvals)") as Array<{ name: string }>).map((column) => column.name);
      const insertApproval = target.db.prepare(`INSERT OR IGNORE INTO approvals (${approvalColumns.join(", ")}) VALUES (${approvalColumns.map((name) => `@${name}`).join(", ")})`);
      for (const approval of approvals) {
        insertApproval.run(Object.fromEntries(approvalColumns.map((name) => [name, approval[name] ?? null])));
        report.approvals_kept += 1;
      }
    })();
  } finally {
    target.close();
  }
  // The damaged file is kept beside the new one; nothing is deleted.
  renameSync(file, damagedCopy);
  for (const suffix of ["-wal", "-shm"]) if (existsSync(`${file}${suffix}`)) renameSync(`${file}${suffix}`, `${damagedCopy}${suffix}`);
  renameSync(fresh, file);
  for (const suffix of ["-wal", "-shm"]) rmSync(`${fresh}${suffix}`, { force: true });
  return report;
}
