import { mkdirSync, statSync } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { dirname } from "node:path";
import Database from "libsql";
import { UnavailableError } from "../../kernel/errors.ts";
import { PRIVATE_DIR, privateFile } from "./private-files.ts";
import { WalCheckpointer } from "./wal-checkpointer.ts";

/**
 * One SQLite file (libsql) shared by the local adapters that keep data in it (the state store and
 * the object store), with group commit.
 *
 * Group commit: the first write of an event-loop turn opens BEGIN IMMEDIATE (so the conditions a
 * write checks hold until it commits, also across processes sharing the file: WAL, busy timeout);
 * every write of that turn runs at once, checking its conditions before it changes anything (a
 * failed check changes nothing, and its error reaches its caller alone), and resolves as soon as
 * its changes are made; one COMMIT ends the turn.
 *
 * Durability is output commit. What this process reads sees every resolved write; a write survives
 * the process crashing once its turn has committed (it is in the WAL); and it is on disk (the WAL
 * fsynced) before anything that depends on it leaves the process, because whatever sends something
 * out (an answer, a tool call with effects) first awaits `untilDurable()`, which waits for the open
 * turn to commit and for the fsync that covers it. Every commit is fsynced in the background on the
 * thread pool as soon as it is made; commits that arrive while an fsync runs share the next one, so
 * the barrier seldom waits. After a crash or a power cut the database holds a prefix of what was
 * committed, and nobody outside was told of anything beyond it.
 *
 * A COMMIT that fails, or changes that throw half-way (a full or failing disk), roll the turn back
 * after its writes were acknowledged: from then on the database refuses every write and the barrier
 * rejects, saying to restart Arbor, which then carries on from what the disk holds. `onRollback`
 * listeners drop what they derived from the lost turn. `syncEachWrite` is the stricter and slower
 * policy: no write resolves before its commit is on disk, and a failure rejects the turn's writes.
 *
 * Checkpoints (copying the WAL into the database file) run on a thread of their own once the WAL
 * has grown to 2 MiB in a database of 32 MiB or more (wal-checkpointer.ts): SQLite's own run inside
 * a COMMIT, on the event loop, and take longer the bigger the database grows. Starting the thread
 * costs about 150 ms of CPU, so a short run (a CLI command, a test, a small data folder) never
 * starts it, and SQLite checkpoints as it always did.
 */
export interface SqliteDatabaseOptions {
  /** A file path, or ":memory:". */
  path: string;
  /** Commits are fsynced, and `untilDurable()` waits for them. Default true. */
  durable?: boolean;
  /** No write resolves before its commit is on disk (needs `durable`). Default false. */
  syncEachWrite?: boolean;
  /** How the WAL file reaches the disk (default: FileHandle.sync). Tests pass one to hold or fail it. */
  fsync?: (walPath: string) => Promise<void>;
  /** The sizes from which checkpoints move to their thread (default: a 2 MiB WAL and a 32 MiB file). */
  checkpointThreadAt?: { walBytes?: number; databaseBytes?: number };
}

/** Where a store on SQLite keeps its data: a file it opens (and closes), or a shared database. */
export type SqliteLocation =
  | {
      /** A file path, or ":memory:"; the store opens it and closes it. */
      path: string;
      /** Commits are fsynced, and `untilDurable()` waits for them. Default true. */
      durable?: boolean;
      /** No write resolves before its commit is on disk. Default false. */
      syncEachWrite?: boolean;
    }
  | {
      /** A database shared with other stores; whoever opened it closes it. */
      database: SqliteDatabase;
    };

/** The database a store works on, and whether the store opened it (and so must close it). */
export function openLocation(location: SqliteLocation): { db: SqliteDatabase; owned: boolean } {
  if ("database" in location) return { db: location.database, owned: false };
  return { db: new SqliteDatabase(location), owned: true };
}

/**
 * How long SQLite itself waits for another connection's lock. It waits synchronously, blocking the
 * event loop, so only briefly: a write that still finds the database locked fails alone with an
 * UnavailableError (503 at the HTTP edge; a step is retried by the bus and the watchdog), and
 * nothing else stalls behind it.
 */
const BUSY_TIMEOUT_MS = 20;
/** How long opening the file waits for another process's lock (once, before serving anything). */
const OPEN_BUSY_TIMEOUT_MS = 5_000;
/** A busy COMMIT is tried again this often, this many times (about 5 s), before the turn is lost. */
const COMMIT_RETRY_MS = 50;
/**
 * SQLite's page cache for this connection, in KiB (its default is 2,000). The pages a request
 * touches (the B-tree paths of its keys, the rows it reads back) outgrow 2 MB once the file holds
 * a few hundred requests: every other page was then read again from the OS, and a COMMIT spilled
 * and rewrote more, so a burst of requests cost 3-4x the CPU it cost on a fresh file (issue 22).
 * Bounded: at most this much memory, reached as the file grows, and held from then on. 32 MiB
 * rather than 64: a request adds about 115 KB to the file, so a server at 3 requests a second
 * fills 32 MiB in about 100 s and then holds its size, where 64 MiB took over 3 minutes and the
 * process's RSS grew all that time.
 */
const PAGE_CACHE_KIB = 32_768;
/**
 * The WAL's size from which checkpoints move to their own thread (see the class's comment): half
 * of what makes SQLite checkpoint by itself (1,000 pages of 4 KiB), so the thread is there first.
 * Every 16th commit looks (two stats, microseconds) until the thread is started.
 */
const CHECKPOINT_THREAD_AT_WAL_BYTES = 2 * 1024 * 1024;
/**
 * And only once the database file itself has grown this big: a checkpoint into a small file is
 * quick (its pages are close together and in the OS's cache), and the thread's start (about 150 ms
 * of CPU) would cost a short-lived runtime (a CLI run, a test, a bench tree of 111 tasks, which
 * writes about 4 MB of WAL) more than every checkpoint it would save. 32 MiB, the page cache's
 * size: a server is then done growing (the thread holds some 15 MB) once its page cache is full,
 * about 100 s into a steady 3 requests a second, where 64 MiB started it after 3 minutes.
 */
const CHECKPOINT_THREAD_AT_DB_BYTES = 32 * 1024 * 1024;
/** How often (in commits) the sizes above are looked at: a small database would otherwise stat two files at every commit for ever. */
const CHECKPOINT_LOOK_EVERY = 16;
/** SQLite's default threshold for its own checkpoints, in WAL pages: back on if the thread stops. */
const AUTO_CHECKPOINT_PAGES = 1000;
/**
 * While the thread checkpoints: this connection checkpoints by itself only past 16,384 pages
 * (64 MiB of WAL). A PASSIVE checkpoint copies what was committed when it began; under a steady
 * stream of commits it may seldom find the whole WAL copied, and SQLite starts the WAL from its
 * beginning again only after one that did: this bounds the file should the thread fall behind
 * (measured under 3 requests a second: 30-36 MB, against 15 MB with SQLite's own checkpoints).
 */
const BACKSTOP_CHECKPOINT_PAGES = 16_384;

/** The size of a database's WAL file, 0 when there is none. */
const walBytes = (path: string): number => fileBytes(`${path}-wal`);

/** A file's size, 0 when there is none. */
function fileBytes(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}
const COMMIT_RETRIES = 100;

/** SQLite's "database is locked" (SQLITE_BUSY, also its extended codes). */
export const isBusy = (e: unknown): boolean =>
  typeof (e as { code?: unknown })?.code === "string" &&
  (e as { code: string }).code.startsWith("SQLITE_BUSY");

interface PendingCommit {
  done: (() => void)[];
  failed: ((e: unknown) => void)[];
}

export class SqliteDatabase {
  readonly path: string;
  readonly #db: Database.Database;
  readonly #statements = new Map<string, Database.Statement>();
  readonly #wal: WalSync | undefined;
  readonly #syncEachWrite: boolean;
  readonly #rollbackListeners: (() => void)[] = [];
  readonly #commitListeners: (() => void)[] = [];
  readonly #externalListeners: (() => void)[] = [];
  /** SQLite's data_version as last seen: it changes when another connection commits. */
  #dataVersion: number;
  /** Whether catchUp looked at data_version in this event-loop turn. */
  #lookedThisTurn = false;
  #group: PendingCommit | undefined;
  /** The file opened (device and inode): the path must keep naming it (see detached). */
  readonly #identity: { dev: number; ino: number } | undefined;
  /** Set when a turn was lost after its writes were acknowledged: every later write is refused. */
  #failure: UnavailableError | undefined;
  /** Commits made so far; the WAL holds all of them. */
  #commits = 0;
  #closed = false;
  #checkpointer: WalCheckpointer | undefined;
  readonly #checkpointAt: { walBytes: number; databaseBytes: number };

  constructor(options: SqliteDatabaseOptions) {
    this.path = options.path;
    this.#checkpointAt = {
      walBytes: options.checkpointThreadAt?.walBytes ?? CHECKPOINT_THREAD_AT_WAL_BYTES,
      databaseBytes: options.checkpointThreadAt?.databaseBytes ?? CHECKPOINT_THREAD_AT_DB_BYTES,
    };
    if (options.path !== ":memory:") {
      // Only the owner reads the data: a new folder 0700, the file 0600 (its -wal and -shm follow it).
      mkdirSync(dirname(options.path), { recursive: true, mode: PRIVATE_DIR });
      privateFile(options.path);
    }
    this.#db = new Database(options.path);
    // Opening waits longer for a lock than a write does: another process opening or writing the
    // same file at this moment (a CLI beside `arbor serve`, two tool services) is no reason to fail
    // to start, and nothing else waits on this process yet.
    this.#db.exec(`PRAGMA busy_timeout = ${OPEN_BUSY_TIMEOUT_MS}`);
    this.#db.exec("PRAGMA journal_mode = WAL");
    this.#db.exec("PRAGMA synchronous = NORMAL");
    this.#db.exec(`PRAGMA cache_size = -${PAGE_CACHE_KIB}`);
    // As of now: what a store reads before its first group is held in memory too, and another
    // process may commit before that group begins (see onExternalChange).
    this.#dataVersion = this.#currentDataVersion();
    // SQLite waits for a lock synchronously, on the event loop: only briefly (see isBusy).
    this.#db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
    if (options.path !== ":memory:") {
      const { dev, ino } = statSync(options.path);
      this.#identity = { dev, ino };
    }
    if (options.durable !== false && options.path !== ":memory:")
      this.#wal = new WalSync(`${options.path}-wal`, options.fsync, () => this.detached());
    this.#syncEachWrite = this.#wal !== undefined && options.syncEachWrite === true;
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
   * and the database refuses every later write. Resolves with the changes' result once they are
   * made (with `syncEachWrite`: once they are on disk).
   */
  write<T>(check: () => () => T): Promise<T> {
    if (this.#closed) return Promise.reject(new UnavailableError(`${this.path} is closed`));
    const failure = this.#failure ?? this.#wal?.failure;
    if (failure) return Promise.reject(failure);
    let group: PendingCommit;
    try {
      group = this.#openGroup();
    } catch (e) {
      return Promise.reject(isBusy(e) ? this.#busy(e) : e);
    }
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
    if (!this.#syncEachWrite) return Promise.resolve(result);
    return new Promise<T>((resolve, reject) => {
      group.done.push(() => resolve(result));
      group.failed.push(reject);
    });
  }

  /**
   * Resolves once every write that has resolved so far is on disk; call it before anything that
   * depends on them leaves the process. Rejects, now and from then on, if the disk failed a flush.
   */
  async untilDurable(): Promise<void> {
    const group = this.#group;
    if (group)
      await new Promise<void>((done, failed) => {
        group.done.push(done);
        group.failed.push(failed);
      });
    if (this.#failure) throw this.#failure;
    await this.#wal?.sync(this.#commits);
  }

  /**
   * Called just before a group commits, inside its transaction: the last changes of its writes
   * (counters added up over the group) go in here. A listener that throws undoes the group.
   */
  beforeCommit(listener: () => void): void {
    this.#commitListeners.push(listener);
  }

  /**
   * Called when a group begins and another connection (another process) has committed since this
   * one last looked: what a store holds in memory may be stale, and must be dropped. So, within a
   * group (which holds the write lock until it commits), what a store wrote or read is current.
   */
  onExternalChange(listener: () => void): void {
    this.#externalListeners.push(listener);
  }

  /**
   * For a read answered from memory: when another connection has committed since this one last
   * looked, the onExternalChange listeners run now (so a process that only reads sees another's
   * writes, not what it held before them). Looks at most once an event-loop turn, and not while a
   * group is open (it holds the write lock: nobody else commits meanwhile).
   */
  catchUp(): void {
    if (this.#group || this.#lookedThisTurn || this.#closed) return;
    this.#lookedThisTurn = true;
    setImmediate(() => {
      this.#lookedThisTurn = false;
    });
    let seen: number | undefined;
    try {
      seen = this.#currentDataVersion();
    } catch {
      seen = undefined; // cannot tell (locked whole by another process): drop what is held
    }
    if (seen === this.#dataVersion) return;
    if (seen !== undefined) this.#dataVersion = seen;
    for (const listener of this.#externalListeners) listener();
  }

  /** Called when a group's COMMIT fails: whatever was derived from its writes must be dropped. */
  onRollback(listener: () => void): void {
    this.#rollbackListeners.push(listener);
  }

  /**
   * Why this database cannot take writes now, or undefined when it can: a lost turn or a failed
   * flush (both final until a restart), or closed. Cheap: no I/O.
   */
  get unwritable(): string | undefined {
    if (this.#closed) return `${this.path} is closed`;
    return (this.#failure ?? this.#wal?.failure)?.message;
  }

  /**
   * Why the file this database writes is no longer the one its path names (deleted, or replaced,
   * with its folder or alone, while Arbor runs), or undefined while it is. Writes to a file that is
   * gone succeed and are lost at the next start: a flush that finds it gone fails, and with it
   * every later write (503), as for a failing disk.
   */
  detached(): string | undefined {
    const opened = this.#identity;
    if (!opened || this.#closed) return undefined;
    try {
      // A stat, synchronous: microseconds beside the fsync it goes with, and no turn of the loop added.
      const now = statSync(this.path);
      if (now.dev === opened.dev && now.ino === opened.ino) return undefined;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") return undefined; // not a sign of removal
    }
    return "The database file was deleted or replaced while Arbor was running, so what it writes would be lost: restore the data folder and restart Arbor";
  }

  /** Commits what is pending, waits until it is durable, and closes the file. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#commit();
    await this.#wal?.sync(this.#commits).catch(() => undefined); // a failure was reported to the barrier
    await this.#wal?.close();
    // Its connection first: the last one to close checkpoints the WAL whole and removes it.
    await this.#checkpointer?.close();
    this.#db.close();
  }

  /** The open group, or a new one: BEGIN IMMEDIATE now, COMMIT once this event-loop turn is over. */
  #openGroup(): PendingCommit {
    if (this.#group) return this.#group;
    this.#db.exec("BEGIN IMMEDIATE");
    const seen = this.#currentDataVersion();
    if (seen !== this.#dataVersion) for (const listener of this.#externalListeners) listener();
    this.#dataVersion = seen;
    const group: PendingCommit = { done: [], failed: [] };
    this.#group = group;
    setImmediate(() => void this.#commit());
    return group;
  }

  /** Checkpoints move to a thread; this connection stops making its own once that thread is ready. */
  #startCheckpointer(): void {
    const autoCheckpoint = (pages: number) => {
      if (!this.#closed) this.#db.exec(`PRAGMA wal_autocheckpoint = ${pages}`);
    };
    this.#checkpointer = new WalCheckpointer({
      path: this.path,
      onReady: () => autoCheckpoint(BACKSTOP_CHECKPOINT_PAGES),
      onStopped: () => autoCheckpoint(AUTO_CHECKPOINT_PAGES),
    });
  }

  #currentDataVersion(): number {
    return Number((this.sql("PRAGMA data_version").get() as { data_version: number }).data_version);
  }

  /** Rolls the open group back now; the database refuses every write from then on. */
  #abort(group: PendingCommit, cause: unknown): UnavailableError {
    if (this.#group === group) this.#group = undefined;
    return this.#lose(group, "A write failed half-way", cause);
  }

  /** The turn is rolled back after its writes were acknowledged: refuse everything from now on. */
  #lose(group: PendingCommit, what: string, cause: unknown): UnavailableError {
    if (this.#db.inTransaction) this.#db.exec("ROLLBACK");
    for (const listener of this.#rollbackListeners) listener();
    const e =
      cause === this.#wal?.failure
        ? (cause as UnavailableError)
        : new UnavailableError(
            `${what} (${(cause as Error)?.message ?? cause}), and the writes made with it since the last commit were undone; check the disk and restart Arbor`,
            { cause },
          );
    this.#failure ??= e;
    for (const fail of group.failed) fail(e);
    return e;
  }

  /** Another connection holds the lock: this write fails alone, and may be tried again shortly. */
  #busy(cause: unknown): UnavailableError {
    return new UnavailableError("The database is locked by another process; try again in a moment", {
      cause,
      details: { retryAfterSeconds: 1 },
    });
  }

  #commit(attempt = 0): Promise<void> {
    const group = this.#group;
    if (!group) return Promise.resolve();
    this.#group = undefined;
    try {
      if (this.#wal?.failure) throw this.#wal.failure;
      for (const listener of this.#commitListeners) listener();
      this.#db.exec("COMMIT");
    } catch (e) {
      // A COMMIT that found the database busy leaves the transaction open, to be tried again; the
      // group stays open meanwhile (later writes join it). Only a lasting lock loses the turn.
      if (isBusy(e) && this.#db.inTransaction && !this.#closed && attempt < COMMIT_RETRIES) {
        this.#group = group;
        return new Promise((resolve) => {
          setTimeout(() => resolve(this.#commit(attempt + 1)), COMMIT_RETRY_MS);
        });
      }
      this.#lose(group, "A commit failed", e);
      return Promise.resolve();
    }
    const commit = ++this.#commits;
    // The sizes are looked at (two stats) every CHECKPOINT_LOOK_EVERY commits, not at each.
    if (
      !this.#checkpointer &&
      this.#identity &&
      commit % CHECKPOINT_LOOK_EVERY === 0 &&
      walBytes(this.path) >= this.#checkpointAt.walBytes &&
      fileBytes(this.path) >= this.#checkpointAt.databaseBytes
    )
      this.#startCheckpointer();
    const settle = () => {
      for (const done of group.done) done();
    };
    if (!this.#wal) return Promise.resolve(settle());
    const synced = this.#wal.sync(commit); // in the background, so a barrier seldom waits
    if (!this.#syncEachWrite) {
      synced.catch(() => undefined); // reported by untilDurable() and by every later write
      return Promise.resolve(settle());
    }
    return synced.then(settle, (e) => {
      for (const fail of group.failed) fail(e);
    });
  }
}

/**
 * fsyncs the WAL on the thread pool. `sync(n)` resolves once an fsync that started after commit n
 * has finished; commits that arrive while one runs share the next. A failed fsync is final: the
 * page cache can no longer be trusted to hold what was written, so every later sync rejects too
 * (the process must be restarted, and it then reads what the disk really has).
 */
class WalSync {
  readonly #path: string;
  readonly #fsync: (path: string) => Promise<void>;
  /** Highest commit known to be on disk. */
  #synced = 0;
  /** Highest commit asked for. */
  #wanted = 0;
  #running: Promise<void> | undefined;
  #failure: UnavailableError | undefined;

  readonly #detached: () => string | undefined;

  constructor(
    path: string,
    fsync: ((path: string) => Promise<void>) | undefined,
    detached: () => string | undefined,
  ) {
    this.#path = path;
    this.#fsync = fsync ?? ((p) => this.#syncHandle(p));
    this.#detached = detached;
  }

  get failure(): UnavailableError | undefined {
    return this.#failure;
  }

  async sync(commit: number): Promise<void> {
    this.#wanted = Math.max(this.#wanted, commit);
    while (this.#synced < commit) {
      if (this.#failure) throw this.#failure;
      this.#running ??= this.#run();
      await this.#running;
    }
    if (this.#failure) throw this.#failure;
  }

  /** One fsync covering every commit made before it starts. */
  async #run(): Promise<void> {
    const covers = this.#wanted;
    try {
      await this.#fsync(this.#path);
      // On disk, but in a file nobody will read again, is not durable.
      const gone = this.#detached();
      if (gone) throw new UnavailableError(gone);
      this.#synced = Math.max(this.#synced, covers);
    } catch (cause) {
      this.#failure = new UnavailableError(
        `Could not flush ${this.#path} to disk (${(cause as Error).message ?? cause}); check the disk and restart Arbor`,
        { cause },
      );
    } finally {
      this.#running = undefined;
    }
  }

  #handle: Promise<FileHandle> | undefined;

  async #syncHandle(path: string): Promise<void> {
    this.#handle ??= open(path, "r");
    try {
      await (await this.#handle).sync();
    } catch (e) {
      this.#handle = undefined; // open again next time
      throw e;
    }
  }

  async close(): Promise<void> {
    await this.#running;
    const handle = this.#handle;
    this.#handle = undefined;
    await (await handle?.catch(() => undefined))?.close();
  }
}
