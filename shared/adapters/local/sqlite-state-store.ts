import { trimOldest } from "../../domain/bounded-map.ts";
import type { DomainEvent, StoredEvent } from "../../domain/events.ts";
import { deepFreeze } from "../../domain/immutable.ts";
import { ValidationError } from "../../kernel/errors.ts";
import {
  type AddOp,
  type EventLogPage,
  type ExpectedVersion,
  logPageSize,
  type Page,
  type QueryOptions,
  type RecordInput,
  type StateRecord,
  type StateStore,
  type TransactResult,
  type WriteOp,
} from "../../ports/state-store.ts";
import {
  addAmounts,
  classifyDuplicates,
  decodeCursor,
  encodeCursor,
  eventIdsOf,
  expiryToTheSecond,
  paged,
  pageSize,
  storedEvent,
  type ValidatedOp,
  validateOps,
  versionConflict,
} from "../shared/state-store-helpers.ts";
import { openLocation, type SqliteDatabase, type SqliteLocation } from "./sqlite-database.ts";

/**
 * State store + event log in SQLite (libsql), on a SqliteDatabase: its own file, or one shared
 * with the local object store. Every transaction is a write of the database's group commit: it
 * runs at once (its conditions checked under BEGIN IMMEDIATE), a failed one throws alone, and it
 * resolves once made; it is durable once the group commits (`untilDurable()` waits for that).
 */
export type SqliteStateStoreOptions = SqliteLocation & {
  clock?: () => Date;
  /** Records (and stream versions) held in memory at most. Default 100,000. */
  cacheRecords?: number;
};

type Row = Record<string, unknown>;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS events (
  gid INTEGER PRIMARY KEY, -- rows are only ever appended, so ids only grow
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
  data TEXT NOT NULL,
  expires_at TEXT -- ISO 8601: deleted from then on, at an opening (domain/retention.ts)
);
-- Partial: most records (claims, usage) have no parent or no status, and need no index row.
DROP INDEX IF EXISTS records_by_parent;
DROP INDEX IF EXISTS records_by_status;
CREATE INDEX IF NOT EXISTS records_with_parent ON records (parent, key) WHERE parent IS NOT NULL;
CREATE INDEX IF NOT EXISTS records_with_status ON records (kind, status, updated_at, key) WHERE status IS NOT NULL;
`;

export class SqliteStateStore implements StateStore {
  readonly #db: SqliteDatabase;
  readonly #owned: boolean;
  readonly #clock: () => Date;
  /**
   * Records this process read or wrote (null: known absent), frozen and shared: `get` answers from
   * here. A write updates it as it changes the row; should the group it belongs to be undone (a
   * change that fails half-way, a failed COMMIT), the whole cache is cleared. A conflict drops the
   * record, so a retry reads it again (another process may have written). Conditions are always
   * checked against the database.
   */
  readonly #cache = new Map<string, StateRecord | null>();
  /**
   * Counter adds of the open group, summed per record: written once, just before the group
   * commits, however many writes of the group added to the record (many tasks counting into one
   * parent at once). Reads see every add: a read of a counter works out its pending adds in memory,
   * and a listing by parent writes those of the counters under that parent first.
   */
  readonly #adds = new Map<string, PendingAdd>();
  /**
   * Stream versions this store appended or read while checking a write. Like the records held,
   * they are current within a group: dropped when another connection has committed since.
   */
  readonly #streams = new Map<string, number>();
  /** How many of the pending adds are to a counter with a parent (listings by parent must see them). */
  #parentedAdds = 0;
  readonly #maxCached: number;

  constructor(options: SqliteStateStoreOptions) {
    ({ db: this.#db, owned: this.#owned } = openLocation(options));
    this.#db.exec(SCHEMA);
    this.#clock = options.clock ?? (() => new Date());
    // Records that may expire (domain/retention.ts): the column is added to folders made before it.
    const columns = this.#db.sql("PRAGMA table_info(records)").all() as Row[];
    if (!columns.some((c) => c.name === "expires_at"))
      this.#db.exec("ALTER TABLE records ADD COLUMN expires_at TEXT");
    this.#maxCached = options.cacheRecords ?? MAX_CACHED_RECORDS;
    this.#db.beforeCommit(() => this.#writeAdds());
    this.#db.onExternalChange(() => {
      this.#cache.clear();
      this.#streams.clear();
    });
    this.#db.onRollback(() => {
      this.#cache.clear();
      this.#streams.clear();
      this.#adds.clear();
      this.#parentedAdds = 0;
    });
  }

  /**
   * Deletes the records whose `expiresAt` has passed (as DynamoDB's TTL would have by now). For the
   * folder's sole writer, when it opens it (the local runtime holding the data folder's lock): a
   * write here must not wait on another connection's.
   */
  sweepExpired(): number {
    const done = this.#db
      .sql("DELETE FROM records WHERE expires_at IS NOT NULL AND expires_at <= ?")
      .run(this.#clock().toISOString());
    this.#cache.clear();
    return Number(done.changes);
  }

  async get<T>(key: string): Promise<StateRecord<T> | undefined> {
    this.#db.catchUp(); // what another process committed since is not answered from memory
    const pending = this.#adds.get(key);
    if (pending) {
      const { record, version } = this.#afterAdds(key, pending, this.#counter(key));
      return deepFreeze({ ...record, version }) as StateRecord<T>;
    }
    const known = this.#cache.get(key);
    if (known !== undefined) return (known ?? undefined) as StateRecord<T> | undefined;
    const row = this.#db.sql("SELECT * FROM records WHERE key = ?").get(key) as Row | undefined;
    const record = row ? deepFreeze(toRecord<T>(row)) : undefined;
    this.#remember(key, record ?? null);
    return record;
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
    return this.#db.write(() => this.#plan(validated, recordedAt));
  }

  #remember(key: string, record: StateRecord | null): void {
    this.#cache.delete(key);
    this.#cache.set(key, record);
    trimOldest(this.#cache, this.#maxCached);
  }

  /**
   * Checks every op against the database first (throwing changes nothing), then returns what
   * makes the changes: the database needs no savepoint for it.
   */
  #plan(validated: readonly ValidatedOp[], recordedAt: string): () => TransactResult {
    const ids = eventIdsOf(validated);
    if (ids.length === 1) return this.#planOneEvent(validated, ids[0] as string, recordedAt);
    const dup = classifyDuplicates(validated, this.#eventsById(ids));
    if (dup) return () => dup;
    const created = this.#createIfAbsent(validated);
    if (created) return created;
    const changes = validated.map((op, index) => this.#check(op, index, recordedAt));
    return () => applied(changes);
  }

  /**
   * A transaction that appends one event (a task's record and its event, most often) does not look
   * its id up first: every op is checked, then the event's row is inserted, before anything else
   * changes (a row with its id already there fails the insert alone: the id is unique). Only then,
   * or when a check fails, is the id looked up, to answer as #plan does when it finds it: the
   * events a repeat of the transaction recorded, or a conflict naming where else they are.
   */
  #planOneEvent(validated: readonly ValidatedOp[], id: string, recordedAt: string): () => TransactResult {
    const duplicate = (cause: unknown): (() => TransactResult) => {
      const dup = classifyDuplicates(validated, this.#eventsById([id]));
      if (dup) return () => dup;
      throw cause;
    };
    const changes: (() => StoredEvent[] | undefined)[] = [];
    let append: { op: AppendOp; current: number } | undefined;
    try {
      for (const [index, op] of validated.entries()) {
        if (op.op === "append") {
          const current = this.#checkStream(op, index);
          append = { op, current };
          changes.push(() => this.#appended(op, current, recordedAt));
        } else changes.push(this.#check(op, index, recordedAt));
      }
    } catch (e) {
      return duplicate(e);
    }
    if (append) {
      try {
        this.#insertEvents(append.op, append.current, recordedAt);
      } catch (e) {
        // The id taken: a repeat, or a conflict. Anything else fails as a change failing half-way
        // would (the insert used to be one): the group is undone.
        if ((e as { code?: unknown })?.code !== "SQLITE_CONSTRAINT_UNIQUE") return undoGroup(e);
        const dup = classifyDuplicates(validated, this.#eventsById([id]));
        return dup ? () => dup : undoGroup(e);
      }
    }
    return () => applied(changes);
  }

  /**
   * A transaction that only creates records (a claim; a request's marker and its index lines) none
   * of which is held or pending: each row is inserted unless one is there, one statement instead of
   * a read and a write. Undefined when some op is not such a create (checked as #plan does). A row
   * already there is the conflict the read would have found: the rows this transaction inserted
   * before it are deleted again (they were absent), so that it changes nothing; should that fail,
   * the group is undone, as when a change fails half-way.
   */
  #createIfAbsent(validated: readonly ValidatedOp[]): (() => TransactResult) | undefined {
    for (const op of validated)
      if (
        op.op !== "put" ||
        op.expectedVersion !== 0 ||
        this.#cache.has(op.record.key) ||
        this.#adds.has(op.record.key)
      )
        return undefined;
    const insert = this.#db.sql(
      `INSERT INTO records (key, kind, parent, status, version, updated_at, data, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (key) DO NOTHING`,
    );
    const made: StateRecord[] = [];
    for (const [index, op] of (validated as Extract<ValidatedOp, { op: "put" }>[]).entries()) {
      const stored = storedRecord(op.record, 1, op.dataJson);
      let inserted: boolean;
      try {
        inserted = Number(insert.run(...rowOf(stored, op.dataJson)).changes) === 1;
      } catch (e) {
        return undoGroup(e); // as when the write itself failed (it used to be a change)
      }
      if (inserted) {
        made.push(stored);
        continue;
      }
      const conflict = versionConflict("record", stored.key, 0, this.#storedVersion(stored.key), index);
      try {
        for (const r of made) this.#db.sql("DELETE FROM records WHERE key = ?").run(r.key);
      } catch (e) {
        return undoGroup(e);
      }
      throw conflict;
    }
    return () => {
      for (const r of made) this.#remember(r.key, deepFreeze(r));
      return { duplicate: false, appended: [] };
    };
  }

  #check(op: ValidatedOp, index: number, recordedAt: string): () => StoredEvent[] | undefined {
    switch (op.op) {
      case "put": {
        this.#writeAdds(op.record.key);
        const current = this.#expect(op.record.key, op.expectedVersion, index);
        return () => void this.#upsert(op.record, current + 1, op.dataJson);
      }
      case "delete": {
        this.#writeAdds(op.key);
        this.#expect(op.key, op.expectedVersion, index);
        return () => {
          this.#db.sql("DELETE FROM records WHERE key = ?").run(op.key);
          this.#remember(op.key, null);
          return undefined;
        };
      }
      case "add": {
        const parent = this.#checkCounter(op.key);
        return () => void this.#pendAdd(op, parent);
      }
      default: {
        const current = this.#checkStream(op, index);
        return () => {
          this.#insertEvents(op, current, recordedAt);
          return this.#appended(op, current, recordedAt);
        };
      }
    }
  }

  /** The stream's version, which must be the append's expected one. */
  #checkStream(op: AppendOp, index: number): number {
    const current = this.#streams.get(op.streamId) ?? this.#streamVersion(op.streamId);
    if (op.expectedVersion !== "any" && current !== op.expectedVersion)
      throw versionConflict("stream", op.streamId, op.expectedVersion, current, index);
    return current;
  }

  /** The record's version, which must be `expected`; a conflict drops it from memory. */
  #expect(key: string, expected: number, index: number): number {
    const held = this.#cache.get(key); // current: a write runs in a group (see onExternalChange)
    const current = held !== undefined ? (held?.version ?? 0) : this.#storedVersion(key);
    if (current !== expected) {
      this.#cache.delete(key);
      throw versionConflict("record", key, expected, current, index);
    }
    return current;
  }

  #storedVersion(key: string): number {
    const row = this.#db.sql("SELECT version FROM records WHERE key = ?").get(key) as Row | undefined;
    return row ? Number(row.version) : 0;
  }

  /** Refuses to add to a record that is not a counter record (one put whole); returns its parent. */
  #checkCounter(key: string): string | undefined {
    const pending = this.#adds.get(key);
    if (pending) return pending.parent;
    let known = this.#cache.get(key);
    if (known === undefined) {
      // Held from now on: the group's adds are summed into it when they are written (#counter).
      const row = this.#db.sql("SELECT * FROM records WHERE key = ?").get(key) as Row | undefined;
      known = row ? deepFreeze(toRecord(row)) : null;
      this.#remember(key, known);
    }
    if (known) counters(key, known.data);
    return known?.parent;
  }

  /** Sums an add into the record's pending one. Without a parent of its own, it keeps the record's. */
  #pendAdd(op: AddOp, existingParent: string | undefined): void {
    const parent = op.parent ?? existingParent;
    const pending = this.#adds.get(op.key);
    if (!pending) {
      this.#adds.set(op.key, { op: { ...op, amounts: { ...op.amounts } }, count: 1, parent });
      if (parent !== undefined) this.#parentedAdds++;
      return;
    }
    if (pending.parent === undefined && parent !== undefined) this.#parentedAdds++;
    pending.count++;
    pending.parent = parent;
    pending.op = { ...op, amounts: addAmounts(pending.op.amounts, op.amounts) };
  }

  /** A counter record as held, or else as stored: its version and amounts. */
  #counter(key: string): Counter | undefined {
    const held = this.#cache.get(key);
    if (held !== undefined) return held ?? undefined;
    const row = this.#db.sql("SELECT version, data FROM records WHERE key = ?").get(key) as Row | undefined;
    return row
      ? { version: Number(row.version), data: counters(key, JSON.parse(String(row.data))) }
      : undefined;
  }

  /** The record as it will be once its pending adds are added to `base` (each add counts a version). */
  #afterAdds(
    key: string,
    { op, count, parent }: PendingAdd,
    base: Counter | undefined,
  ): { record: RecordInput; version: number } {
    const record: RecordInput = {
      key,
      kind: op.kind,
      updatedAt: op.updatedAt,
      data: addAmounts(base?.data as Record<string, number> | undefined, op.amounts),
      ...(parent === undefined ? {} : { parent }),
    };
    return { record, version: (base?.version ?? 0) + count };
  }

  /** Writes the summed adds of the open group (of one record, or all). */
  #writeAdds(only?: string): void {
    const keys = only === undefined ? [...this.#adds.keys()] : this.#adds.has(only) ? [only] : [];
    for (const key of keys) {
      const pending = this.#adds.get(key) as PendingAdd;
      this.#adds.delete(key);
      if (pending.parent !== undefined) this.#parentedAdds--;
      const { record, version } = this.#afterAdds(key, pending, this.#counter(key));
      this.#upsert(record, version);
    }
  }

  #upsert(r: RecordInput, version: number, json?: string): void {
    const data = json ?? JSON.stringify(r.data);
    const stored = storedRecord(r, version, data);
    this.#db
      .sql(
        `INSERT INTO records (key, kind, parent, status, version, updated_at, data, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (key) DO UPDATE SET kind = excluded.kind, parent = excluded.parent, status = excluded.status,
           version = excluded.version, updated_at = excluded.updated_at, data = excluded.data,
           expires_at = excluded.expires_at`,
      )
      .run(...rowOf(stored, data));
    this.#remember(r.key, deepFreeze(stored));
  }

  /** The append's rows, after the stream's `current` last one. */
  #insertEvents(op: AppendOp, current: number, recordedAt: string): void {
    const insert = this.#db.sql(
      "INSERT INTO events (stream_id, seq, event_id, body, recorded_at) VALUES (?, ?, ?, ?, ?)",
    );
    op.events.forEach((event, i) => {
      insert.run(op.streamId, current + 1 + i, event.id, op.eventsJson[i] as string, recordedAt);
    });
  }

  /** The append's events as stored (their rows inserted), and the stream's version held. */
  #appended(op: AppendOp, current: number, recordedAt: string): StoredEvent[] {
    const stored = op.events.map((event, i) => storedEvent(event, op.streamId, current + 1 + i, recordedAt));
    this.#rememberStream(op.streamId, current + op.events.length);
    return stored;
  }

  #rememberStream(streamId: string, version: number): void {
    this.#streams.delete(streamId);
    this.#streams.set(streamId, version);
    trimOldest(this.#streams, this.#maxCached);
  }

  #streamVersion(streamId: string): number {
    const row = this.#db.sql("SELECT MAX(seq) AS v FROM events WHERE stream_id = ?").get(streamId) as Row;
    return row.v == null ? 0 : Number(row.v);
  }

  #eventsById(ids: readonly string[]): StoredEvent[] {
    if (ids.length === 0) return [];
    if (ids.length === 1) {
      // The common case (one event per transaction), without the cost of a result list.
      const row = this.#db.sql("SELECT * FROM events WHERE event_id = ?").get(ids[0]) as Row | undefined;
      return row ? [toStoredEvent(row)] : [];
    }
    const rows = this.#db
      .sql(`SELECT * FROM events WHERE event_id IN (${ids.map(() => "?").join(",")})`)
      .all(...ids) as Row[];
    return rows.map(toStoredEvent);
  }

  /**
   * The log in the order the events were committed: each event's row id (events are only ever
   * appended, and one connection writes at a time, so ids are committed in order).
   */
  async readAll(options: { from?: string; limit?: number } = {}): Promise<EventLogPage> {
    const after = options.from === undefined ? 0 : positionOf(options.from);
    const rows = this.#db
      .sql("SELECT * FROM events WHERE gid > ? ORDER BY gid LIMIT ?")
      .all(after, logPageSize(options.limit)) as Row[];
    const events = rows.map((row) => ({ ...toStoredEvent(row), position: logPosition(Number(row.gid)) }));
    const next = events.at(-1)?.position ?? options.from;
    return next === undefined ? { events } : { events, next };
  }

  async readStream(
    streamId: string,
    options: { fromSeq?: number; limit?: number } = {},
  ): Promise<StoredEvent[]> {
    const rows = this.#db
      .sql("SELECT * FROM events WHERE stream_id = ? AND seq >= ? ORDER BY seq LIMIT ?")
      .all(streamId, options.fromSeq ?? 1, options.limit ?? -1) as Row[];
    return rows.map(toStoredEvent);
  }

  async streamVersion(streamId: string): Promise<number> {
    return this.#streamVersion(streamId);
  }

  async listStreams(options: QueryOptions = {}): Promise<Page<string>> {
    const limit = pageSize(options);
    const after = options.cursor === undefined ? "" : decodeCursor(options.cursor)[0];
    const rows = this.#db
      .sql("SELECT DISTINCT stream_id FROM events WHERE stream_id > ? ORDER BY stream_id LIMIT ?")
      .all(after, limit + 1) as Row[];
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
    if (this.#parentedAdds > 0)
      for (const [key, pending] of this.#adds) if (pending.parent === parent) this.#writeAdds(key);
    // Keys and versions first: a record this process already holds at that version is not read
    // and parsed again (a parent's supervisor lists its children each time one of them ends).
    const rows = this.#db
      .sql("SELECT key, version FROM records WHERE parent = ? AND key > ? ORDER BY key LIMIT ?")
      .all(parent, after, limit + 1) as Row[];
    const records = rows.flatMap((r) => {
      const key = String(r.key);
      const known = this.#cache.get(key);
      if (known && known.version === Number(r.version)) return [known as StateRecord<T>];
      const row = this.#db.sql("SELECT * FROM records WHERE key = ?").get(key) as Row | undefined;
      if (!row) return []; // deleted in between (another process)
      const record = deepFreeze(toRecord<T>(row));
      this.#remember(key, record);
      return [record];
    });
    return paged(records, limit, (last) => encodeCursor([last.key]));
  }

  async byStatus<T>(
    kind: string,
    status: string,
    options: QueryOptions & { updatedBefore?: string } = {},
  ): Promise<Page<StateRecord<T>>> {
    const limit = pageSize(options);
    const [afterTime, afterKey] = options.cursor === undefined ? ["", ""] : decodeCursor(options.cursor);
    const before = options.updatedBefore ?? "\uffff";
    const rows = this.#db
      .sql(
        `SELECT * FROM records WHERE kind = ? AND status = ? AND updated_at < ?
           AND (updated_at > ? OR (updated_at = ? AND key > ?))
         ORDER BY updated_at, key LIMIT ?`,
      )
      .all(kind, status, before, afterTime, afterTime, afterKey, limit + 1) as Row[];
    return paged(
      rows.map((r) => toRecord<T>(r)),
      limit,
      (last) => encodeCursor([last.updatedAt, last.key]),
    );
  }

  /** Resolves once every write made so far is committed and on disk (SqliteDatabase.untilDurable). */
  untilDurable(): Promise<void> {
    return this.#db.untilDurable();
  }

  async close(): Promise<void> {
    if (this.#owned) await this.#db.close();
  }
}

/**
 * Records held in memory at most: the hot ones (open tasks, their parents and counters). 100,000
 * held a long-running server's every record of its last hours, hundreds of MB it never gave back.
 */
const MAX_CACHED_RECORDS = 10_000;

type Counter = Pick<StateRecord, "version" | "data">;

/** Makes a transaction's changes, checked already, in their order: what it appended. */
function applied(changes: readonly (() => StoredEvent[] | undefined)[]): TransactResult {
  const appended: StoredEvent[][] = [];
  for (const change of changes) {
    const events = change();
    if (events) appended.push(events);
  }
  return { duplicate: false, appended };
}

/**
 * What a check returns when a write it made to check cannot be taken back: a change that throws,
 * so that the database undoes the whole group and refuses writes from then on (SqliteDatabase.write).
 */
const undoGroup =
  (cause: unknown): (() => never) =>
  () => {
    throw cause;
  };
type AppendOp = Extract<ValidatedOp, { op: "append" }>;

interface PendingAdd {
  /** The adds of the group so far, as one. */
  op: AddOp;
  count: number;
  /** The record's parent once written: the add's own, or else the record's. */
  parent: string | undefined;
}

/** A stored record's data as counters; anything else cannot be added to. */
function counters(key: string, data: unknown): Record<string, number> {
  if (
    typeof data !== "object" ||
    data === null ||
    Array.isArray(data) ||
    !Object.values(data).every((v) => typeof v === "number")
  )
    throw new ValidationError(`Record ${key} is not a counter record (named numbers): it cannot be added to`);
  return data as Record<string, number>;
}

/** The record as stored at `version`: its data a copy of its own (parsed from `data`, its JSON). */
function storedRecord(r: RecordInput, version: number, data: string): StateRecord {
  const stored: StateRecord = {
    key: r.key,
    kind: r.kind,
    version,
    updatedAt: r.updatedAt,
    data: JSON.parse(data),
  };
  if (r.parent !== undefined) stored.parent = r.parent;
  if (r.status !== undefined) stored.status = r.status;
  const expiresAt = r.expiresAt === undefined ? undefined : expiryToTheSecond(r.expiresAt);
  if (expiresAt !== undefined) stored.expiresAt = expiresAt;
  return stored;
}

/** The row's values, in the order of the records table's columns. */
const rowOf = (r: StateRecord, data: string) =>
  [
    r.key,
    r.kind,
    r.parent ?? null,
    r.status ?? null,
    r.version,
    r.updatedAt,
    data,
    r.expiresAt ?? null,
  ] as const;

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
  if (row.expires_at != null) rec.expiresAt = String(row.expires_at);
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

/** A row id as a log position: fixed width, so that positions sort as their ids do. */
const logPosition = (gid: number): string => String(gid).padStart(16, "0");

function positionOf(position: string): number {
  if (!/^\d{16}$/.test(position))
    throw new ValidationError(`Invalid log position ${JSON.stringify(position.slice(0, 100))}`, [
      "give a position a page of the log gave (its events' `position`, or its `next`)",
    ]);
  return Number(position);
}
