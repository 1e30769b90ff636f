import {
  type AuditLog,
  recordIdOf,
  type ToolCallRecord,
  ToolCallRecordSchema,
} from "../../ports/audit-log.ts";
import { openLocation, type SqliteDatabase, type SqliteLocation } from "./sqlite-database.ts";

/**
 * The audit log in SQLite: one row per record in its own table, written in the database's group
 * commit like everything else (so a record is durable when the writes around it are). The records
 * of a group are inserted together just before it commits; a record written again (same task, call,
 * attempt and stage) is ignored, while another attempt of the same call is a row of its own.
 */
const SCHEMA = `
CREATE TABLE IF NOT EXISTS audit (
  seq INTEGER PRIMARY KEY,
  task_id TEXT NOT NULL,
  id TEXT NOT NULL, -- <call id>:<stage>, and :<attempt> from the second attempt on (recordIdOf)
  body TEXT NOT NULL,
  UNIQUE (task_id, id)
);
CREATE INDEX IF NOT EXISTS audit_by_task ON audit (task_id, seq);
`;

export class SqliteAuditLog implements AuditLog {
  readonly #db: SqliteDatabase;
  readonly #owned: boolean;

  /** Records of the open group, inserted just before it commits. */
  #pending: ToolCallRecord[] = [];

  constructor(location: SqliteLocation) {
    ({ db: this.#db, owned: this.#owned } = openLocation(location));
    this.#db.exec(SCHEMA);
    this.#db.beforeCommit(() => this.#insertPending());
    this.#db.onRollback(() => {
      this.#pending = [];
    });
  }

  async record(records: readonly ToolCallRecord[]): Promise<void> {
    const valid = records.map((r) => ToolCallRecordSchema.parse(r));
    if (valid.length === 0) return;
    // Joins the open group (opening one if needed); the rows go in as it commits.
    await this.#db.write(() => () => {
      this.#pending.push(...valid);
    });
  }

  #insertPending(): void {
    if (this.#pending.length === 0) return;
    const records = this.#pending;
    this.#pending = [];
    const insert = this.#db.sql("INSERT OR IGNORE INTO audit (id, task_id, body) VALUES (?, ?, ?)");
    for (const r of records) insert.run(recordIdOf(r), r.taskId, JSON.stringify(r));
  }

  async forTask(taskId: string): Promise<ToolCallRecord[]> {
    this.#insertPending(); // what this process wrote, it reads
    const rows = this.#db.sql("SELECT body FROM audit WHERE task_id = ? ORDER BY seq").all(taskId) as {
      body: string;
    }[];
    return rows.map((r) => ToolCallRecordSchema.parse(JSON.parse(r.body)));
  }

  async close(): Promise<void> {
    if (this.#owned) await this.#db.close();
  }
}
