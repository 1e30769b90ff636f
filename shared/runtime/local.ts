import { join } from "node:path";
import { FileObjectStore } from "../adapters/local/file-object-store.ts";
import { InProcessEventBus, type InProcessEventBusOptions } from "../adapters/local/in-process-event-bus.ts";
import { SqliteAuditLog } from "../adapters/local/sqlite-audit-log.ts";
import { SqliteDatabase } from "../adapters/local/sqlite-database.ts";
import { SqliteObjectStore } from "../adapters/local/sqlite-object-store.ts";
import { SqliteStateStore } from "../adapters/local/sqlite-state-store.ts";
import type { LocalConfig } from "../config.ts";
import { ResourceStore } from "../use-cases/resource-store.ts";
import { TaskLog } from "../use-cases/task-log.ts";
import type { Runtime } from "./runtime.ts";

/**
 * The local composition root: one process, one data folder.
 *   <dataDir>/arbor.db     SQLite: the state store, the event log and (by default) the resources
 *   <dataDir>/objects/     the resources as files, the URN as the path (ARBOR_OBJECT_STORE=files)
 *   <dataDir>/vectors/     the vector index: <embedder>.db (libSQL DiskANN; a flat index an older
 *                          version left in <embedder>/ is migrated, then renamed <embedder>.migrated)
 * and an in-process event bus with EventBridge's semantics.
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
}

export function createLocalRuntime(
  config: LocalConfig,
  options: { bus?: InProcessEventBusOptions; clock?: () => Date } = {},
): LocalRuntime {
  const database = new SqliteDatabase({
    path: join(config.dataDir, "arbor.db"),
    durable: config.durable,
    syncEachWrite: config.syncEachWrite === true,
  });
  const objects =
    config.objectStore === "files"
      ? new FileObjectStore({
          root: join(config.dataDir, "objects"),
          durable: config.durable,
          cache: true, // this process is the folder's only writer
        })
      : new SqliteObjectStore({ database });
  const state = new SqliteStateStore({ database, ...(options.clock ? { clock: options.clock } : {}) });
  const bus = new InProcessEventBus({ ...options.bus, ...(options.clock ? { clock: options.clock } : {}) });
  return {
    mode: "local",
    tenant: config.tenant,
    dataDir: config.dataDir,
    durable: config.durable,
    objects,
    state,
    bus,
    resources: new ResourceStore(objects),
    tasks: new TaskLog(state),
    audit: new SqliteAuditLog({ database }),
    untilDurable: () => database.untilDurable(), // the files layout fsyncs each file as it writes it
    async close() {
      await bus.close();
      await database.close();
    },
  };
}
