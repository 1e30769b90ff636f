import { hostname } from "node:os";
import { join } from "node:path";
import Database from "libsql";
import { ConflictError } from "../../kernel/errors.ts";
import { privateDir, privateFile } from "./private-files.ts";

/**
 * One process per data folder: `arbor serve`, `arbor run` and `arbor demo` hold
 * `<dataDir>/arbor.lock` while they run, and a second one on the same folder stops at once with
 * the holder's pid, command and start time.
 *
 * The lock is SQLite's own file lock (POSIX advisory record locks, taken by `BEGIN IMMEDIATE` and
 * kept for the life of the process): the kernel drops it when the process ends, however it ends
 * (kill -9, a crash, a power cut), so there is never a stale lock to clean up and no pid to
 * guess about (a pid file can outlive its process and name a pid that was reused). SQLite keeps
 * these locks per process correctly (closing another handle to the file does not drop them), and
 * libsql is already how Arbor opens its data. The holder's description is a committed row of the
 * same file, written before the lock is taken for good, which the refused process reads (a held
 * RESERVED lock lets others read). Like any advisory lock it needs a local file system (not NFS).
 *
 * Commands that only read (`ls`, `get`, `events`, `replay`) take no lock: SQLite in WAL mode
 * gives them a consistent snapshot beside a running server, and they change nothing.
 */
export interface LockHolder {
  pid: number;
  command: string;
  host: string;
  /** ISO 8601: when the holder took the lock. */
  since: string;
}

export const LOCK_FILE = "arbor.lock";

export class DataDirLock {
  readonly path: string;
  readonly holder: LockHolder;
  #db: Database.Database | undefined;

  private constructor(path: string, holder: LockHolder, db: Database.Database) {
    this.path = path;
    this.holder = holder;
    this.#db = db;
  }

  /**
   * Takes the folder's lock for this process, or throws a ConflictError naming who holds it.
   * `command`: what this process is, as the refused one will be told (e.g. "arbor serve").
   */
  static acquire(dataDir: string, command: string, now: () => Date = () => new Date()): DataDirLock {
    privateDir(dataDir);
    const path = join(dataDir, LOCK_FILE);
    privateFile(path);
    const db = new Database(path);
    const holder: LockHolder = { pid: process.pid, command, host: hostname(), since: now().toISOString() };
    try {
      db.exec("PRAGMA busy_timeout = 0");
      db.exec("BEGIN IMMEDIATE");
      db.exec("CREATE TABLE IF NOT EXISTS holder (pid INTEGER, command TEXT, host TEXT, since TEXT)");
      db.exec("DELETE FROM holder");
      db.prepare("INSERT INTO holder (pid, command, host, since) VALUES (?, ?, ?, ?)").run(
        holder.pid,
        holder.command,
        holder.host,
        holder.since,
      );
      db.exec("COMMIT");
      // Held from here until the process ends. Should another process take it in between, this
      // BEGIN fails and this process is the one that stops.
      db.exec("BEGIN IMMEDIATE");
    } catch (e) {
      if (db.inTransaction) db.exec("ROLLBACK");
      const busy = (e as { code?: string }).code === "SQLITE_BUSY";
      const other = busy ? readHolder(db) : undefined;
      db.close();
      if (!busy) throw e;
      throw lockedError(dataDir, path, other);
    }
    return new DataDirLock(path, holder, db);
  }

  /** Lets go of the lock (the process ending does the same). Idempotent. */
  release(): void {
    const db = this.#db;
    this.#db = undefined;
    if (!db) return;
    if (db.inTransaction) db.exec("ROLLBACK");
    db.close();
  }
}

function readHolder(db: Database.Database): LockHolder | undefined {
  try {
    const row = db.prepare("SELECT pid, command, host, since FROM holder LIMIT 1").get() as
      | LockHolder
      | undefined;
    return row
      ? {
          pid: Number(row.pid),
          command: String(row.command),
          host: String(row.host),
          since: String(row.since),
        }
      : undefined;
  } catch {
    return undefined; // a holder that has not written its row yet
  }
}

function lockedError(dataDir: string, path: string, holder: LockHolder | undefined): ConflictError {
  const who = holder
    ? `process ${holder.pid} (${holder.command}, on ${holder.host}, since ${holder.since})`
    : "another process";
  return new ConflictError(
    `The data folder ${dataDir} is in use by ${who}: one Arbor process per data folder. ` +
      "Stop that process first, or point ARBOR_DATA_DIR at another folder.",
    { lockFile: path, ...(holder ? { holder } : {}) },
  );
}
