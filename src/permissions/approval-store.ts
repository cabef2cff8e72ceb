import { randomUUID } from "node:crypto";
import type { SqlDatabase, SqlStatement } from "../storage/sql-database.js";

/** A remembered "allow always": one exact command in one working directory, until it expires or is revoked. */
export interface Approval {
  id: string;
  command: string;
  cwd: string;
  category: string;
  granted_by_task: string | null;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
}

/** The exact text an approval is keyed on: the command with its outer whitespace trimmed. */
export function approvalKey(command: string): string {
  return command.trim();
}

export class ApprovalStore {
  private readonly insert: SqlStatement;
  private readonly findActiveStatement: SqlStatement<[string, string, string]>;
  private readonly listStatement: SqlStatement<[]>;
  private readonly getStatement: SqlStatement<[string]>;
  private readonly revokeStatement: SqlStatement<[string, string]>;

  constructor(db: SqlDatabase, private readonly clock: () => Date = () => new Date()) {
    this.insert = db.prepare(
      "INSERT INTO approvals (id, command, cwd, category, granted_by_task, created_at, expires_at) VALUES (@id, @command, @cwd, @category, @granted_by_task, @created_at, @expires_at)",
    );
    this.findActiveStatement = db.prepare(
      "SELECT * FROM approvals WHERE command = ? AND cwd = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?) ORDER BY created_at DESC LIMIT 1",
    );
    this.listStatement = db.prepare("SELECT * FROM approvals ORDER BY created_at DESC");
    this.getStatement = db.prepare("SELECT * FROM approvals WHERE id = ?");
    this.revokeStatement = db.prepare("UPDATE approvals SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL");
  }

  grant(input: { command: string; cwd: string; category: string; grantedByTask: string | null; expiresAt?: Date | null }): Approval {
    const approval: Approval = {
      id: randomUUID(),
      command: approvalKey(input.command),
      cwd: input.cwd,
      category: input.category,
      granted_by_task: input.grantedByTask,
      created_at: this.clock().toISOString(),
      expires_at: input.expiresAt ? input.expiresAt.toISOString() : null,
      revoked_at: null,
    };
    this.insert.run(approval);
    return approval;
  }

  findActive(command: string, cwd: string): Approval | null {
    return (this.findActiveStatement.get(approvalKey(command), cwd, this.clock().toISOString()) as Approval | undefined) ?? null;
  }

  get(id: string): Approval | null {
    return (this.getStatement.get(id) as Approval | undefined) ?? null;
  }

  list(): Approval[] {
    return this.listStatement.all() as Approval[];
  }

  /** True when it was active and is now revoked. */
  revoke(id: string): boolean {
    return this.revokeStatement.run(this.clock().toISOString(), id).changes > 0;
  }
}
