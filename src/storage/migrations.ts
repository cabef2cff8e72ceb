import type { Database } from "better-sqlite3";

/** Versioned schema changes. Append only: a shipped migration never changes. */
export const MIGRATIONS: ReadonlyArray<{ version: number; description: string; sql: string }> = [
  {
    version: 1,
    description: "tasks, events, checkpoints, memories with FTS5",
    sql: `
      CREATE TABLE tasks (
        id TEXT PRIMARY KEY,
        text TEXT NOT NULL,
        state TEXT NOT NULL,
        session_id TEXT,
        workspace TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        last_seq INTEGER NOT NULL,
        answer TEXT,
        error TEXT
      ) WITHOUT ROWID;
      CREATE INDEX tasks_by_session ON tasks(session_id, created_at);

      -- id gives one global order for GET /events; (task_id, seq) is the per-task order.
      CREATE TABLE events (
        id INTEGER PRIMARY KEY,
        task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        type TEXT NOT NULL,
        time TEXT NOT NULL,
        payload TEXT NOT NULL,
        UNIQUE (task_id, seq)
      );

      -- One row per task: the latest snapshot. Older ones are replaced, so storage stays bounded.
      CREATE TABLE checkpoints (
        task_id TEXT PRIMARY KEY REFERENCES tasks(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        time TEXT NOT NULL,
        snapshot TEXT NOT NULL
      ) WITHOUT ROWID;

      CREATE TABLE memories (
        id INTEGER PRIMARY KEY,
        text TEXT NOT NULL,
        kind TEXT NOT NULL,
        source_task TEXT,
        weight REAL NOT NULL DEFAULT 1.0,
        pinned INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        last_used_at TEXT,
        embedding_model TEXT
      );
      CREATE VIRTUAL TABLE memories_fts USING fts5(text, content='memories', content_rowid='id');
      CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts(rowid, text) VALUES (new.id, new.text);
      END;
      CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
      END;
      CREATE TRIGGER memories_au AFTER UPDATE OF text ON memories BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
        INSERT INTO memories_fts(rowid, text) VALUES (new.id, new.text);
      END;
    `,
  },
  {
    version: 2,
    description: "remembered permission approvals",
    sql: `
      CREATE TABLE approvals (
        id TEXT PRIMARY KEY,
        command TEXT NOT NULL,
        cwd TEXT NOT NULL,
        category TEXT NOT NULL,
        granted_by_task TEXT,
        created_at TEXT NOT NULL,
        expires_at TEXT,
        revoked_at TEXT
      ) WITHOUT ROWID;
      CREATE INDEX approvals_by_command ON approvals(command, cwd);
    `,
  },
  {
    version: 3,
    description: "memory embeddings (the source the vector index is rebuilt from)",
    sql: `
      ALTER TABLE memories ADD COLUMN embedding BLOB;
      CREATE INDEX memories_by_weight ON memories(pinned, weight);
    `,
  },
  {
    version: 4,
    description: "web logins: one-time login codes and browser sessions, stored as hashes",
    sql: `
      CREATE TABLE web_logins (
        hash TEXT PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ('code', 'session')),
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL
      ) WITHOUT ROWID;
    `,
  },
  {
    version: 5,
    description: "an index of people's feedback events, which the critic reads back",
    sql: `
      CREATE INDEX events_feedback ON events(id) WHERE type = 'feedback-received';
    `,
  },
  {
    version: 6,
    description: "an index of tasks by state: the scan for unfinished tasks at start-up",
    sql: `
      CREATE INDEX tasks_by_state ON tasks(state, created_at);
    `,
  },
  {
    version: 7,
    description: "long texts (tool outputs, answers) stored once, by hash, with the tasks that refer to them",
    sql: `
      CREATE TABLE blobs (
        hash TEXT PRIMARY KEY,
        text TEXT NOT NULL
      );
      -- Which task refers to which blob: pruning a task drops its rows here, then the blobs nobody refers to.
      CREATE TABLE blob_refs (
        task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        hash TEXT NOT NULL,
        PRIMARY KEY (task_id, hash)
      ) WITHOUT ROWID;
      CREATE INDEX blob_refs_by_hash ON blob_refs(hash);
    `,
  },
  {
    version: 8,
    description: "task leases: which process drives which task, so that two processes on one home never drive the same one",
    sql: `
      -- No foreign key: a task's lease is taken as its drive starts, before its first batch (and its row) commits.
      CREATE TABLE task_leases (
        task_id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        pid INTEGER NOT NULL,
        host TEXT NOT NULL,
        acquired_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        cancel_requested TEXT
      ) WITHOUT ROWID;
      CREATE INDEX task_leases_by_owner ON task_leases(owner);
    `,
  },
  {
    version: 9,
    description: "an index of tasks by creation time: listing tasks newest first reads it instead of sorting the table",
    sql: `
      -- Written once per task (created_at never changes), so commits that update a task pay nothing for it.
      CREATE INDEX tasks_by_created ON tasks(created_at DESC, id);
    `,
  },
  {
    version: 10,
    description: "offered task leases: a task waiting in one worker's line that another worker may take",
    sql: `
      ALTER TABLE task_leases ADD COLUMN offered INTEGER NOT NULL DEFAULT 0;
    `,
  },
  {
    version: 11,
    description: "memory ids are never given again: the highest one ever used is kept, so a forgotten memory's id, named in the event log, never names another",
    sql: `
      -- SQLite gives the id after the largest one present, so forgetting the newest memory freed its id.
      CREATE TABLE memory_id_high (last INTEGER NOT NULL);
      INSERT INTO memory_id_high (last) SELECT ifnull(max(id), 0) FROM memories;
      CREATE TRIGGER memories_id_high AFTER INSERT ON memories BEGIN
        UPDATE memory_id_high SET last = max(last, new.id);
      END;
    `,
  },
  {
    version: 12,
    description: "an approval holds while the files its command runs are as they were, and gives the network only where the question said the command needs it",
    sql: `
      ALTER TABLE approvals ADD COLUMN content_digest TEXT;
      ALTER TABLE approvals ADD COLUMN network INTEGER NOT NULL DEFAULT 0;
    `,
  },
  {
    version: 13,
    description: "a lease carries an epoch, raised whenever another owner takes the task: every commit of its owner checks it, so an owner paused past its lease writes nothing",
    sql: `
      ALTER TABLE task_leases ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
    `,
  },
  {
    version: 14,
    description: "a task's row carries what its model calls cost together (JSON), for `ducklm tasks` and GET /tasks",
    sql: `
      ALTER TABLE tasks ADD COLUMN model_work TEXT;
    `,
  },
];

export function migrate(db: Database): number {
  const current = db.pragma("user_version", { simple: true }) as number;
  for (const migration of MIGRATIONS) {
    if (migration.version <= current) continue;
    db.transaction(() => {
      db.exec(migration.sql);
      db.pragma(`user_version = ${migration.version}`);
    })();
  }
  return db.pragma("user_version", { simple: true }) as number;
}
