import { join } from "node:path";
import { FileObjectStore } from "../adapters/local/file-object-store.ts";
import { InProcessEventBus, type InProcessEventBusOptions } from "../adapters/local/in-process-event-bus.ts";
import { SqliteStateStore } from "../adapters/local/sqlite-state-store.ts";
import type { LocalConfig } from "../config.ts";
import { ResourceStore } from "../use-cases/resource-store.ts";
import { TaskLog } from "../use-cases/task-log.ts";
import type { Runtime } from "./runtime.ts";

/**
 * The local composition root: one process, one data folder.
 *   <dataDir>/objects/   resources as files, the URN as the path
 *   <dataDir>/state.db   the state store and event log (SQLite)
 * and an in-process event bus with EventBridge's semantics.
 */
export interface LocalRuntime extends Runtime {
  readonly bus: InProcessEventBus;
  readonly dataDir: string;
  /** Whether writes are fsynced before they count as done. */
  readonly durable: boolean;
}

export function createLocalRuntime(
  config: LocalConfig,
  options: { bus?: InProcessEventBusOptions; clock?: () => Date } = {},
): LocalRuntime {
  const objects = new FileObjectStore({
    root: join(config.dataDir, "objects"),
    durable: config.durable,
    cache: true, // this process is the folder's only writer
  });
  const state = new SqliteStateStore({
    path: join(config.dataDir, "state.db"),
    durable: config.durable,
    ...(options.clock ? { clock: options.clock } : {}),
  });
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
    async close() {
      await bus.close();
      await state.close();
    },
  };
}
