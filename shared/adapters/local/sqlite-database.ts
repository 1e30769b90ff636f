import { mkdirSync } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { dirname } from "node:path";
import Database from "libsql";
import { UnavailableError } from "../../errors.ts";

/**
 * One SQLite file (libsql) shared by the local adapters that keep data in it (the state store and
 * the object store), with group commit.
 *
 * Group commit: the first write of an event-loop turn opens BEGIN IMMEDIATE (so the conditions a
 * write checks hold until it commits, also across processes sharing the file: WAL, busy timeout);
 * every write of that turn runs at once, checking its conditions before it changes anything (a
 * failed check changes nothing, and its error reaches its caller alone); one COMMIT ends the
 * turn, and the writes' promises resolve once it is durable. A caller never acts on a write before it is durable. Reads in this process
 * may see a write whose commit is still pending; that write is only lost if the COMMIT fails (a
 * full or failing disk), and then every write of the group rejects together and `onRollback`
 * listeners drop what they derived from it.
 *
 * Durable without blocking: synchronous=FULL would fsync the WAL inside COMMIT, on the main
 * thread. Instead the connection runs synchronous=NORMAL (COMMIT only writes the WAL) and this
 * class fsyncs the WAL file itself on the thread pool before it acknowledges the group: the same
 * guarantee (the commit's WAL frames are on disk before anyone is told it happened) while the main
 * thread goes on. Groups that commit while an fsync runs share the next one.
 */
export interface SqliteDatabaseOptions {
  /** A file path, or ":memory:". */
  path: string;
  /** Every commit is on disk before its promise resolves (the WAL is fsynced). Default true. */
  durable?: boolean;
}

/** Where a store on SQLite keeps its data: a file it opens (and closes), or a shared database. */
export type SqliteLocation =
  | {
      /** A file path, or ":memory:"; the store opens it and closes it. */
      path: string;
      /** Every commit is on disk before its promise resolves. Default true. */
      durable?: boolean;
    }
  | {
      /** A database shared with other stores; whoever opened it closes it. */
      database: SqliteDatabase;
    };

/** The database a store works on, and whether the store opened it (and so must close it). */
export function openLocation(location: SqliteLocation): { db: SqliteDatabase; owned: boolean } {
  if ("database" in location) return { db: location.database, owned: false };
  const durable = location.durable === false ? { durable: false } : {};
  return { db: new SqliteDatabase({ path: location.path, ...durable }), owned: true };
}

interface PendingCommit {
  done: (() => void)[];
  failed: ((e: unknown) => void)[];
}

export class SqliteDatabase {
  readonly path: string;
  readonly #db: Database.Database;
  readonly #statements = new Map<string, Database.Statement>();
  readonly #wal: WalSync | undefined;
  readonly #rollbackListeners: (() => void)[] = [];
  #group: PendingCommit | undefined;
  #closed = false;

  constructor(options: SqliteDatabaseOptions) {
    this.path = options.path;
    if (options.path !== ":memory:") mkdirSync(dirname(options.path), { recursive: true });
    this.#db = new Database(options.path);
    this.#db.exec("PRAGMA journal_mode = WAL");
    this.#db.exec("PRAGMA synchronous = NORMAL");
    this.#db.exec("PRAGMA busy_timeout = 5000");
    if (options.durable !== false && options.path !== ":memory:")
      this.#wal = new WalSync(`${options.path}-wal`);
  }

  /** Runs DDL (CREATE TABLE IF NOT EXISTS ...). */
  exec(sql: string): void {
    this.#db.exec(sql);
  }

  /** A prepared statement, prepared once per SQL text. */
  sql(text: string): Database.Statement {
    let statement = this.#statements.get(text);
    if (!statement) {
      statement = this.#db.prepare(text);
      this.#statements.set(text, statement);
    }
    return statement;
  }

  /**
   * A write in this turn's group, made of two parts: `check` reads and either throws (nothing
   * changed, nothing to undo: only this write fails) or returns the function that makes the
   * changes. Checking everything before changing anything means no savepoint per write. Should the
   * changes themselves throw (a failing disk, a broken invariant), the whole group is rolled back
   * and every write of it rejects. Resolves with the changes' result once the group is durable.
   */
  write<T>(check: () => () => T): Promise<T> {
    if (this.#closed) return Promise.reject(new UnavailableError(`${this.path} is closed`));
    const group = this.#openGroup();
    let result: T;
    try {
      const apply = check();
      try {
        result = apply();
      } catch (e) {
        return Promise.reject(this.#abort(group, e));
      }
    } catch (e) {
      return Promise.reject(e);
    }
    return new Promise<T>((resolve, reject) => {
      group.done.push(() => resolve(result));
      group.failed.push(reject);
    });
  }

  /** Called when a group's COMMIT fails: whatever was derived from its writes must be dropped. */
  onRollback(listener: () => void): void {
    this.#rollbackListeners.push(listener);
  }

  /** Commits what is pending, waits until it is durable, and closes the file. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#commit();
    await this.#wal?.close();
    this.#db.close();
  }

  /** The open group, or a new one: BEGIN IMMEDIATE now, COMMIT once this event-loop turn is over. */
  #openGroup(): PendingCommit {
    if (this.#group) return this.#group;
    this.#db.exec("BEGIN IMMEDIATE");
    const group: PendingCommit = { done: [], failed: [] };
    this.#group = group;
    setImmediate(() => void this.#commit());
    return group;
  }

  /** Rolls the open group back now: all of its writes reject. */
  #abort(group: PendingCommit, cause: unknown): UnavailableError {
    if (this.#group === group) this.#group = undefined;
    if (this.#db.inTransaction) this.#db.exec("ROLLBACK");
    for (const listener of this.#rollbackListeners) listener();
    const e = new UnavailableError("A write failed half-way; every write committed with it was undone", {
      cause,
    });
    for (const fail of group.failed) fail(e);
    return e;
  }

  #commit(): Promise<void> {
    const group = this.#group;
    if (!group) return Promise.resolve();
    this.#group = undefined;
    try {
      this.#db.exec("COMMIT");
    } catch (e) {
      if (this.#db.inTransaction) this.#db.exec("ROLLBACK");
      for (const listener of this.#rollbackListeners) listener();
      for (const fail of group.failed) fail(e);
      return Promise.resolve();
    }
    const settle = () => {
      for (const done of group.done) done();
    };
    if (!this.#wal) return Promise.resolve(settle());
    return this.#wal.sync().then(settle, (cause) => {
      const e = new UnavailableError(`Could not flush ${this.path} to disk; check the disk`, { cause });
      for (const fail of group.failed) fail(e);
    });
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
