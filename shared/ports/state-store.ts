import type { DomainEvent, StoredEvent } from "../domain/events.ts";

/**
 * State store + event log port. Records are versioned documents with three indexed attributes
 * (parent, kind+status, updatedAt); streams are append-only, gap-free event sequences.
 * Every write is conditional, and several writes can commit together in one transaction.
 * Adapters: SQLite via libsql (local), DynamoDB (AWS).
 */
export interface StateRecord<T = unknown> {
  key: string;
  /** What the record is, e.g. "task"; part of the status index. */
  kind: string;
  parent?: string;
  status?: string;
  /** 1 on first write, +1 on every write. */
  version: number;
  /** ISO 8601; the status index orders by it (the watchdog asks for the oldest). */
  updatedAt: string;
  /**
   * ISO 8601: the store may delete the record from then on (DynamoDB's TTL, within a few days; the
   * SQLite store when it opens). Until it does, the record reads as any other; stored to the second,
   * rounded up. Absent: kept for ever. See domain/retention.ts for what may expire.
   */
  expiresAt?: string;
  data: T;
}

export type RecordInput<T = unknown> = Omit<StateRecord<T>, "version">;

/**
 * Adds to a counter record (its data: named numbers), creating it at zero when missing. It has no
 * expected version: adds never fail a condition, so many writers can count into one record. The
 * record's version still goes up by one. Only counter records may be added to; `put` replaces a
 * counter record. On DynamoDB two transactions writing one item at the same moment are still
 * cancelled (TransactionConflict; the adapter retries): a counter many write at once is a hot key,
 * to spread (engine/usage.ts). DynamoDB Local never reports it: bench/usage-contention.ts does.
 */
export interface AddOp {
  op: "add";
  key: string;
  kind: string;
  updatedAt: string;
  /** Field names: a letter, then letters, digits or _. */
  amounts: Readonly<Record<string, number>>;
  parent?: string;
}

/** `0` means "must not exist yet"; `"any"` (appends only) means "at the current end". */
export type ExpectedVersion = number | "any";

export type WriteOp =
  | { op: "put"; record: RecordInput; expectedVersion: number }
  | { op: "delete"; key: string; expectedVersion: number }
  | AddOp
  | { op: "append"; streamId: string; events: readonly DomainEvent[]; expectedVersion: ExpectedVersion };

export interface TransactResult {
  /**
   * True when every event of some append in the transaction had already been recorded: the
   * transaction was applied before (a redelivered message) and nothing was written now.
   */
  duplicate: boolean;
  /** Per append op, in order: the stored events (the earlier ones when duplicate). */
  appended: StoredEvent[][];
}

export interface Page<T> {
  items: T[];
  cursor?: string;
}

export interface QueryOptions {
  limit?: number;
  cursor?: string;
}

/** An event with its place in the global log (StateStore.readAll). */
export type LoggedEvent = StoredEvent & {
  /**
   * Where it is in the log of every stream: opaque, and ordered as the log is (a later event's
   * position sorts after an earlier one's, as strings). Give it back to readAll as `from`.
   */
  position: string;
};

export interface EventLogPage {
  /** In log order: each after `from`, none twice. */
  events: LoggedEvent[];
  /** The position to read on from (the last event's, or `from` itself when none came). */
  next?: string;
}

export interface StateStore {
  get<T = unknown>(key: string): Promise<StateRecord<T> | undefined>;
  /**
   * The global event log: every event of every stream, each once, in one order that never changes
   * and that keeps each stream's own, from after `from` (a position a page gave; absent: the
   * start), at most `limit` (default 100, at most 1000). An event is in it once it is committed;
   * an adapter whose order is settled only after a while (DynamoDB: a time-ordered index) gives an
   * event once it is settled, and never one that sorts before what it already gave. A position no
   * page gave is a ValidationError.
   */
  readAll(options?: { from?: string; limit?: number }): Promise<EventLogPage>;
  /**
   * All-or-nothing. Throws ConflictError (naming the op that lost) when an expected version does
   * not hold; TooLargeError past the backend's transaction limits (100 items on DynamoDB).
   */
  transact(ops: readonly WriteOp[]): Promise<TransactResult>;
  /** Shorthand for a transaction with one append. */
  append(
    streamId: string,
    events: readonly DomainEvent[],
    expectedVersion: ExpectedVersion,
  ): Promise<TransactResult>;
  /** Events of one stream in seq order, from `fromSeq` (inclusive, default 1). */
  readStream(streamId: string, options?: { fromSeq?: number; limit?: number }): Promise<StoredEvent[]>;
  /** The seq of the stream's last event, 0 for an empty stream. */
  streamVersion(streamId: string): Promise<number>;
  /** Every stream id, in no particular order, each once. */
  listStreams(options?: QueryOptions): Promise<Page<string>>;
  findEvent(eventId: string): Promise<StoredEvent | undefined>;
  /** Records whose parent is `parent`, in key order. */
  byParent<T = unknown>(parent: string, options?: QueryOptions): Promise<Page<StateRecord<T>>>;
  /** Records of a kind in a status, oldest `updatedAt` first; optionally only those older than a time. */
  byStatus<T = unknown>(
    kind: string,
    status: string,
    options?: QueryOptions & { updatedBefore?: string },
  ): Promise<Page<StateRecord<T>>>;
  close(): Promise<void>;
}

/** A page size of readAll: 100 unless asked, within 1 to 1000. */
export const logPageSize = (limit: number | undefined): number =>
  Math.max(1, Math.min(Math.floor(limit ?? 100), 1000));

/** Reads every event of every stream (each stream in seq order). */
export async function* readAllEvents(store: StateStore, pageSize = 500): AsyncGenerator<StoredEvent> {
  let cursor: string | undefined;
  do {
    const page = await store.listStreams(cursor === undefined ? { limit: 100 } : { limit: 100, cursor });
    for (const streamId of page.items) {
      let from = 1;
      for (;;) {
        const events = await store.readStream(streamId, { fromSeq: from, limit: pageSize });
        yield* events;
        if (events.length < pageSize) break;
        from = (events[events.length - 1] as StoredEvent).seq + 1;
      }
    }
    cursor = page.cursor;
  } while (cursor !== undefined);
}

/** Collects every page of a query. */
export async function collectPages<T>(fetch: (cursor?: string) => Promise<Page<T>>): Promise<T[]> {
  const out: T[] = [];
  let cursor: string | undefined;
  do {
    const page = await fetch(cursor);
    out.push(...page.items);
    cursor = page.cursor;
  } while (cursor !== undefined);
  return out;
}
