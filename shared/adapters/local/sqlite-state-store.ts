import { mkdirSync } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { dirname } from "node:path";
import Database from "libsql";
import type { DomainEvent, StoredEvent } from "../../domain/events.ts";
import { UnavailableError } from "../../errors.ts";
import type {
  ExpectedVersion,
  Page,
  QueryOptions,
  StateRecord,
  StateStore,
  TransactResult,
  WriteOp,
} from "../../ports/state-store.ts";
import {
  classifyDuplicates,
  decodeCursor,
  encodeCursor,
  eventIdsOf,
  paged,
  pageSize,
  storedEvent,
  validateOps,
  versionConflict,
} from "../shared/state-store-helpers.ts";

/**
 * State store + event log in one SQLite file (libsql).
 *
 * Group commit: the first transaction of an event-loop turn opens BEGIN IMMEDIATE (so the
 * conditions it checks hold until it commits, also across processes sharing the file: WAL, busy
 * timeout); every transaction of that turn runs at once inside its own SAVEPOINT (a failed one
 * rolls back alone, with a ConflictError as before); one COMMIT ends the turn, and their promises
 * resolve once it is durable. A caller never acts on a write before it is durable; reads in this
 * process may see a write whose commit is still pending, which is only lost if that COMMIT fails
 * (a full or failing disk), and then every transaction of the group rejects together.
 *
 * Durable without blocking: SQLite's synchronous=FULL would fsync the WAL inside COMMIT, on the
 * main thread. Instead the connection runs synchronous=NORMAL (COMMIT only writes the WAL) and the
 * store fsyncs the WAL file itself on the thread pool before it acknowledges the group: the same
 * guarantee (the commit's WAL frames are on disk before anyone is told it happened), while the
 * main thread goes on. Groups that commit while an fsync runs share the next one.
 */
export interface SqliteStateStoreOptions {
  /** A file path, or ":memory:". */
  path: string;
  /** Every commit is on disk before its promise resolves (the WAL is fsynced). Default true. */
  durable?: boolean;
  clock?: () => Date;
}

type Row = Record<string, unknown>;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS events (
  gid INTEGER PRIMARY KEY AUTOINCREMENT,
  stream_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  event_id TEXT NOT NULL UNIQUE,
  body TEXT NOT NULL,
  recorded_at TEXT NOT NULL,
  UNIQUE (stream_id, seq)
);
CREATE TABLE IF NOT EXISTS records (
  key TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  parent TEXT,
  status TEXT,
  version INTEGER NOT NULL,
  updated_at TEXT NOT NULL,
  data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS records_by_parent ON records (parent, key);
CREATE INDEX IF NOT EXISTS records_by_status ON records (kind, status, updated_at, key);
`;

interface PendingCommit {
  done: (() => void)[];
  failed: ((e: unknown) => void)[];
}

export class SqliteStateStore implements StateStore {
  readonly #db: Database.Database;
  readonly #clock: () => Date;
  readonly #statements = new Map<string, Database.Statement>();
  #group: PendingCommit | undefined;
  readonly #wal: WalSync | undefined;

  constructor(options: SqliteStateStoreOptions) {
    if (options.path !== ":memory:") mkdirSync(dirname(options.path), { recursive: true });
    this.#db = new Database(options.path);
    this.#db.exec("PRAGMA journal_mode = WAL");
    this.#db.exec("PRAGMA synchronous = NORMAL");
    if (options.durable !== false && options.path !== ":memory:")
      this.#wal = new WalSync(`${options.path}-wal`);
    this.#db.exec("PRAGMA busy_timeout = 5000");
    this.#db.exec(SCHEMA);
    this.#clock = options.clock ?? (() => new Date());
  }

  async get<T>(key: string): Promise<StateRecord<T> | undefined> {
    const row = this.#sql("SELECT * FROM records WHERE key = ?").get(key) as Row | undefined;
    return row ? toRecord<T>(row) : undefined;
  }

  async append(
    streamId: string,
    events: readonly DomainEvent[],
    expectedVersion: ExpectedVersion,
  ): Promise<TransactResult> {
    return this.transact([{ op: "append", streamId, events, expectedVersion }]);
  }

  async transact(ops: readonly WriteOp[]): Promise<TransactResult> {
    const validated = validateOps(ops);
    const recordedAt = this.#clock().toISOString();
    const group = this.#openGroup();
    this.#sql("SAVEPOINT tx").run();
    let result: TransactResult;
    try {
      result = this.#apply(validated, recordedAt);
      this.#sql("RELEASE tx").run();
    } catch (e) {
      this.#sql("ROLLBACK TO tx").run();
      this.#sql("RELEASE tx").run();
      throw e;
    }
    return new Promise<TransactResult>((resolve, reject) => {
      group.done.push(() => resolve(result));
      group.failed.push(reject);
    });
  }

  #apply(validated: readonly WriteOp[], recordedAt: string): TransactResult {
    const dup = classifyDuplicates(validated, this.#eventsById(eventIdsOf(validated)));
    if (dup) return dup;
    const appended: StoredEvent[][] = [];
    validated.forEach((op, index) => {
      if (op.op === "put") this.#put(op, index);
      else if (op.op === "delete") this.#delete(op, index);
      else appended.push(this.#append(op, index, recordedAt));
    });
    return { duplicate: false, appended };
  }

  /** The open group, or a new one: BEGIN IMMEDIATE now, COMMIT once this event-loop turn is over. */
  #openGroup(): PendingCommit {
    if (this.#group) return this.#group;
    this.#db.exec("BEGIN IMMEDIATE");
    const group: PendingCommit = { done: [], failed: [] };
    this.#group = group;
    setImmediate(() => this.#commit());
    return group;
  }

  #commit(): Promise<void> {
    const group = this.#group;
    if (!group) return Promise.resolve();
    this.#group = undefined;
    try {
      this.#db.exec("COMMIT");
    } catch (e) {
      if (this.#db.inTransaction) this.#db.exec("ROLLBACK");
      for (const fail of group.failed) fail(e);
      return Promise.resolve();
    }
    const settle = () => {
      for (const done of group.done) done();
    };
    if (!this.#wal) return Promise.resolve(settle());
    return this.#wal.sync().then(settle, (cause) => {
      const e = new UnavailableError("Could not flush the state store's log to disk; check the disk", {
        cause,
      });
      for (const fail of group.failed) fail(e);
    });
  }

  /** A prepared statement, prepared once per SQL text. */
  #sql(text: string): Database.Statement {
    let statement = this.#statements.get(text);
    if (!statement) {
      statement = this.#db.prepare(text);
      this.#statements.set(text, statement);
    }
    return statement;
  }

  #currentVersion(key: string): number {
    const row = this.#sql("SELECT version FROM records WHERE key = ?").get(key) as Row | undefined;
    return row ? Number(row.version) : 0;
  }

  #put(op: Extract<WriteOp, { op: "put" }>, index: number): void {
    const current = this.#currentVersion(op.record.key);
    if (current !== op.expectedVersion)
      throw versionConflict("record", op.record.key, op.expectedVersion, current, index);
    const r = op.record;
    this.#sql(
      `INSERT INTO records (key, kind, parent, status, version, updated_at, data) VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (key) DO UPDATE SET kind = excluded.kind, parent = excluded.parent, status = excluded.status,
           version = excluded.version, updated_at = excluded.updated_at, data = excluded.data`,
    ).run(
      r.key,
      r.kind,
      r.parent ?? null,
      r.status ?? null,
      current + 1,
      r.updatedAt,
      JSON.stringify(r.data),
    );
  }

  #delete(op: Extract<WriteOp, { op: "delete" }>, index: number): void {
    const current = this.#currentVersion(op.key);
    if (current !== op.expectedVersion)
      throw versionConflict("record", op.key, op.expectedVersion, current, index);
    this.#sql("DELETE FROM records WHERE key = ?").run(op.key);
  }

  #append(op: Extract<WriteOp, { op: "append" }>, index: number, recordedAt: string): StoredEvent[] {
    const current = this.#streamVersion(op.streamId);
    if (op.expectedVersion !== "any" && current !== op.expectedVersion) {
      throw versionConflict("stream", op.streamId, op.expectedVersion, current, index);
    }
    const insert = this.#sql(
      "INSERT INTO events (stream_id, seq, event_id, body, recorded_at) VALUES (?, ?, ?, ?, ?)",
    );
    return op.events.map((event, i) => {
      const stored = storedEvent(event, op.streamId, current + 1 + i, recordedAt);
      insert.run(op.streamId, stored.seq, event.id, JSON.stringify(event), recordedAt);
      return stored;
    });
  }

  #streamVersion(streamId: string): number {
    const row = this.#sql("SELECT MAX(seq) AS v FROM events WHERE stream_id = ?").get(streamId) as Row;
    return row.v == null ? 0 : Number(row.v);
  }

  #eventsById(ids: readonly string[]): StoredEvent[] {
    if (ids.length === 0) return [];
    const rows = this.#sql(`SELECT * FROM events WHERE event_id IN (${ids.map(() => "?").join(",")})`).all(
      ...ids,
    ) as Row[];
    return rows.map(toStoredEvent);
  }

  async readStream(
    streamId: string,
    options: { fromSeq?: number; limit?: number } = {},
  ): Promise<StoredEvent[]> {
    const rows = this.#sql("SELECT * FROM events WHERE stream_id = ? AND seq >= ? ORDER BY seq LIMIT ?").all(
      streamId,
      options.fromSeq ?? 1,
      options.limit ?? -1,
    ) as Row[];
    return rows.map(toStoredEvent);
  }

  async streamVersion(streamId: string): Promise<number> {
    return this.#streamVersion(streamId);
  }

  async listStreams(options: QueryOptions = {}): Promise<Page<string>> {
    const limit = pageSize(options);
    const after = options.cursor === undefined ? "" : decodeCursor(options.cursor)[0];
    const rows = this.#sql(
      "SELECT DISTINCT stream_id FROM events WHERE stream_id > ? ORDER BY stream_id LIMIT ?",
    ).all(after, limit + 1) as Row[];
    return paged(
      rows.map((r) => String(r.stream_id)),
      limit,
      (last) => encodeCursor([last]),
    );
  }

  async findEvent(eventId: string): Promise<StoredEvent | undefined> {
    return this.#eventsById([eventId])[0];
  }

  async byParent<T>(parent: string, options: QueryOptions = {}): Promise<Page<StateRecord<T>>> {
    const limit = pageSize(options);
    const after = options.cursor === undefined ? "" : decodeCursor(options.cursor)[0];
    const rows = this.#sql("SELECT * FROM records WHERE parent = ? AND key > ? ORDER BY key LIMIT ?").all(
      parent,
      after,
      limit + 1,
    ) as Row[];
    return paged(
      rows.map((r) => toRecord<T>(r)),
      limit,
      (last) => encodeCursor([last.key]),
    );
  }

  async byStatus<T>(
    kind: string,
    status: string,
    options: QueryOptions & { updatedBefore?: string } = {},
  ): Promise<Page<StateRecord<T>>> {
    const limit = pageSize(options);
    const [afterTime, afterKey] = options.cursor === undefined ? ["", ""] : decodeCursor(options.cursor);
    const before = options.updatedBefore ?? "\uffff";
    const rows = this.#sql(
      `SELECT * FROM records WHERE kind = ? AND status = ? AND updated_at < ?
           AND (updated_at > ? OR (updated_at = ? AND key > ?))
         ORDER BY updated_at, key LIMIT ?`,
    ).all(kind, status, before, afterTime, afterTime, afterKey, limit + 1) as Row[];
    return paged(
      rows.map((r) => toRecord<T>(r)),
      limit,
      (last) => encodeCursor([last.updatedAt, last.key]),
    );
  }

  async close(): Promise<void> {
    await this.#commit();
    await this.#wal?.close();
    this.#db.close();
  }
}

/** fsyncs the WAL file on the thread pool; callers that arrive while one runs share the next one. */
class WalSync {
  readonly #path: string;
  #handle: Promise<FileHandle> | undefined;
  #running: Promise<void> | undefined;
  #next: Promise<void> | undefined;

  constructor(path: string) {
    this.#path = path;
  }

  /** Resolves after an fsync that started after this call. */
  sync(): Promise<void> {
    if (!this.#running) {
      const run = this.#fsync().finally(() => {
        if (this.#running === run) this.#running = undefined;
      });
      this.#running = run;
      return run;
    }
    this.#next ??= this.#running
      .catch(() => undefined)
      .then(() => {
        this.#next = undefined;
        return this.sync();
      });
    return this.#next;
  }

  async #fsync(): Promise<void> {
    this.#handle ??= open(this.#path, "r");
    try {
      await (await this.#handle).sync();
    } catch (e) {
      this.#handle = undefined; // open again next time
      throw e;
    }
  }

  async close(): Promise<void> {
    await this.#next?.catch(() => undefined);
    await this.#running?.catch(() => undefined);
    const handle = this.#handle;
    this.#handle = undefined;
    await (await handle?.catch(() => undefined))?.close();
  }
}

function toRecord<T>(row: Row): StateRecord<T> {
  const rec: StateRecord<T> = {
    key: String(row.key),
    kind: String(row.kind),
    version: Number(row.version),
    updatedAt: String(row.updated_at),
    data: JSON.parse(String(row.data)) as T,
  };
  if (row.parent != null) rec.parent = String(row.parent);
  if (row.status != null) rec.status = String(row.status);
  return rec;
}

function toStoredEvent(row: Row): StoredEvent {
  return storedEvent(
    JSON.parse(String(row.body)) as DomainEvent,
    String(row.stream_id),
    Number(row.seq),
    String(row.recorded_at),
  );
}
