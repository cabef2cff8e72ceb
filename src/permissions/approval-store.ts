import { randomUUID } from "node:crypto";
import type { SqlDatabase, SqlStatement } from "../storage/sql-database.js";

/**
 * A remembered "allow always": one exact command in one working directory, until it expires or is
 * revoked; for a command that runs files of the workspace (a script, `npm test`'s package.json), only
 * while they hold what they held when it was given.
 */
export interface Approval {
  id: string;
  command: string;
  cwd: string;
  category: string;
  granted_by_task: string | null;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  /** The digest of the files the command runs, as the question showed them; null when it runs none. */
  content_digest: string | null;
  /** The question said the command needs the network, so the approval gives it. */
  network: boolean;
}

type ApprovalRow = Omit<Approval, "network"> & { network: number | boolean | null };

function approvalOf(row: ApprovalRow | undefined): Approval | null {
  return row ? { ...row, content_digest: row.content_digest ?? null, network: row.network === 1 || row.network === true } : null;
}

/** The exact text an approval is keyed on: the command with its outer whitespace trimmed. */
export function approvalKey(command: string): string {
  return command.trim();
}

export class ApprovalStore {
  private readonly insert: SqlStatement;
  private readonly findActiveStatement: SqlStatement<[string, string, string, string]>;
  private readonly listStatement: SqlStatement<[]>;
  private readonly getStatement: SqlStatement<[string]>;
  private readonly revokeStatement: SqlStatement<[string, string]>;

  constructor(db: SqlDatabase, private readonly clock: () => Date = () => new Date()) {
    this.insert = db.prepare(
      "INSERT INTO approvals (id, command, cwd, category, granted_by_task, created_at, expires_at, content_digest, network) VALUES (@id, @command, @cwd, @category, @granted_by_task, @created_at, @expires_at, @content_digest, @network)",
    );
    this.findActiveStatement = db.prepare(
      "SELECT * FROM approvals WHERE command = ? AND cwd = ? AND COALESCE(content_digest, '') = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?) ORDER BY created_at DESC LIMIT 1",
    );
    this.listStatement = db.prepare("SELECT * FROM approvals ORDER BY created_at DESC");
    this.getStatement = db.prepare("SELECT * FROM approvals WHERE id = ?");
    this.revokeStatement = db.prepare("UPDATE approvals SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL");
  }

  grant(input: { command: string; cwd: string; category: string; grantedByTask: string | null; expiresAt?: Date | null; contentDigest?: string | null; network?: boolean }): Approval {
    const approval: Approval = {
      id: randomUUID(),
      command: approvalKey(input.command),
      cwd: input.cwd,
      category: input.category,
      granted_by_task: input.grantedByTask,
      created_at: this.clock().toISOString(),
      expires_at: input.expiresAt ? input.expiresAt.toISOString() : null,
      revoked_at: null,
      content_digest: input.contentDigest ?? null,
      network: input.network === true,
    };
    this.insert.run({ ...approval, network: approval.network ? 1 : 0 });
    return approval;
  }

  /** The active approval of this command in this directory, given while the files it runs held what they hold now (`contentDigest`). */
  findActive(command: string, cwd: string, contentDigest: string | null = null): Approval | null {
    return approvalOf(this.findActiveStatement.get(approvalKey(command), cwd, contentDigest ?? "", this.clock().toISOString()) as ApprovalRow | undefined);
  }

  get(id: string): Approval | null {
    return approvalOf(this.getStatement.get(id) as ApprovalRow | undefined);
  }

  list(): Approval[] {
    return (this.listStatement.all() as ApprovalRow[]).map((row) => approvalOf(row)!);
  }

  /** True when it was active and is now revoked. */
  revoke(id: string): boolean {
    return this.revokeStatement.run(this.clock().toISOString(), id).changes > 0;
  }
}
