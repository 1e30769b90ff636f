import { randomUUID } from "node:crypto";
import { constants } from "node:fs";
import { access, statfs } from "node:fs/promises";
import { join } from "node:path";
import { DataDirLock } from "../../adapters/local/data-dir-lock.ts";
import { FileObjectStore } from "../../adapters/local/file-object-store.ts";
import {
  InProcessEventBus,
  type InProcessEventBusOptions,
} from "../../adapters/local/in-process-event-bus.ts";
import { privateDir, tightenTree } from "../../adapters/local/private-files.ts";
import { SqliteAuditLog } from "../../adapters/local/sqlite-audit-log.ts";
import { SqliteDatabase } from "../../adapters/local/sqlite-database.ts";
import { SqliteObjectStore } from "../../adapters/local/sqlite-object-store.ts";
import { SqliteStateStore } from "../../adapters/local/sqlite-state-store.ts";
import { resourceAnnouncer } from "../../store/resource-events.ts";
import { ResourceStore } from "../../store/resource-store.ts";
import { TaskLog } from "../../store/task-log.ts";
import type { LocalConfig } from "../config.ts";
import type { Runtime } from "../runtime.ts";

/**
 * The local composition root: one process, one data folder.
 *   <dataDir>/arbor.db     SQLite: the state store, the event log and (by default) the resources
 *   <dataDir>/objects/     the resources as files, the URN as the path (ARBOR_OBJECT_STORE=files)
 *   <dataDir>/vectors/     the vector index: <embedder>.db (exact in memory up to 10,000 records, a
 *                          libSQL DiskANN graph past that; a flat index an older version left in
 *                          <embedder>/ is migrated, then renamed <embedder>.migrated)
 *   <dataDir>/arbor.lock   held by the one process that works on the folder (see DataDirLock)
 * and an in-process event bus with EventBridge's semantics. Only the owner may read any of it: the
 * folder and those below it are 0700, the files 0600 (tightened at open, should they be looser).
 *
 * Resources default to the database rather than files: a durable file write needs a new file, an
 * fsync and a rename, about a millisecond each time on an ordinary disk, where a row joins the
 * group commit of the task events around it. The files layout stays for people who want to read
 * the resources with their own tools.
 */
export interface LocalRuntime extends Runtime {
  readonly bus: InProcessEventBus;
  readonly dataDir: string;
  /** Whether commits are fsynced (before anything that depends on them leaves the process). */
  readonly durable: boolean;
  unwritable(): Promise<string | undefined>;
}

export interface LocalRuntimeOptions {
  bus?: InProcessEventBusOptions;
  clock?: () => Date;
  /**
   * Hold the data folder's lock as this command (e.g. "arbor serve") until `close()`: a ConflictError
   * naming the holder if another process has it. Commands that only read leave it out.
   */
  lockAs?: string;
  /** Test hook: how the database's WAL reaches the disk (see SqliteDatabaseOptions.fsync). */
  fsync?: (walPath: string) => Promise<void>;
}

/** Below this much free space in the data folder's file system, Arbor reports it cannot write. */
export const MIN_FREE_BYTES = 16 * 1024 * 1024;

/** What Arbor keeps in a data folder (tightened to 0700 / 0600 at open). */
const DATA_ENTRIES = ["arbor.db", "arbor.db-wal", "arbor.db-shm", "arbor.db-journal", "objects", "vectors"];

export function createLocalRuntime(config: LocalConfig, options: LocalRuntimeOptions = {}): LocalRuntime {
  privateDir(config.dataDir);
  const lock = options.lockAs ? DataDirLock.acquire(config.dataDir, options.lockAs) : undefined;
  let database: SqliteDatabase;
  try {
    // Only what Arbor keeps here: the folder may hold other things of the user's.
    for (const entry of DATA_ENTRIES) tightenTree(join(config.dataDir, entry));
    database = new SqliteDatabase({
      path: join(config.dataDir, "arbor.db"),
      durable: config.durable,
      syncEachWrite: config.syncEachWrite === true,
      ...(options.fsync ? { fsync: options.fsync } : {}),
    });
  } catch (e) {
    lock?.release();
    throw e;
  }
  const objects =
    config.objectStore === "files"
      ? new FileObjectStore({
          root: join(config.dataDir, "objects"),
          durable: config.durable,
          cache: true, // this process is the folder's only writer
        })
      : new SqliteObjectStore({ database });
  const state = new SqliteStateStore({ database, ...(options.clock ? { clock: options.clock } : {}) });
  // The folder's sole worker lets go of what has expired (domain/retention.ts), as DynamoDB's TTL does.
  if (lock) state.sweepExpired();
  const bus = new InProcessEventBus({ ...options.bus, ...(options.clock ? { clock: options.clock } : {}) });
  return {
    mode: "local",
    tenant: config.tenant,
    dataDir: config.dataDir,
    durable: config.durable,
    objects,
    state,
    bus,
    // Every writer announces its writes the same way (resource-events.ts).
    resources: new ResourceStore(objects, { announcer: resourceAnnouncer(bus, config.resourceEvents) }),
    tasks: new TaskLog(state),
    audit: new SqliteAuditLog({ database }),
    untilDurable: () => database.untilDurable(), // the files layout fsyncs each file as it writes it
    unwritable: () => unwritable(database, config.dataDir),
    // Holding the folder's lock, this process is the only one at work on it.
    ...(lock ? { soleWorker: randomUUID() } : {}),
    async close() {
      try {
        await bus.close();
        await database.close();
      } finally {
        lock?.release();
      }
    },
  };
}

/**
 * Whether the local runtime can write: the database has not failed (a lost commit or a failed
 * flush, final until a restart), the folder is writable, and its disk has room. The reasons name
 * no path: /healthz shows them to anyone.
 */
async function unwritable(database: SqliteDatabase, dataDir: string): Promise<string | undefined> {
  const gone = database.detached();
  if (gone) return gone;
  if (database.unwritable)
    return "The database refuses writes since a commit or a flush to disk failed: fix the disk and restart Arbor";
  try {
    await access(dataDir, constants.W_OK);
  } catch {
    return "The data folder is not writable";
  }
  const fs = await statfs(dataDir);
  const free = fs.bavail * fs.bsize;
  if (free < MIN_FREE_BYTES) return `The data folder's disk is full (${Math.floor(free / 1024)} KiB free)`;
  return undefined;
}
