import type { AuditLog } from "../ports/audit-log.ts";
import type { EventBus } from "../ports/event-bus.ts";
import type { ObjectStore } from "../ports/object-store.ts";
import type { StateStore } from "../ports/state-store.ts";
import type { ResourceStore } from "../store/resource-store.ts";
import type { TaskLog } from "../store/task-log.ts";

/** Everything a use case may need, wired by one of the two composition roots (local.ts, aws.ts). */
export interface Runtime {
  readonly mode: "local" | "aws";
  readonly tenant: string;
  readonly objects: ObjectStore;
  readonly state: StateStore;
  readonly bus: EventBus;
  readonly resources: ResourceStore;
  readonly tasks: TaskLog;
  /** The audit log of tool calls. */
  readonly audit: AuditLog;
  /**
   * Resolves once everything written so far is on disk. Await it before anything that depends on
   * those writes leaves the process: an answer to a person or an agent, a tool call with effects.
   */
  untilDurable(): Promise<void>;
  /**
   * Why Arbor cannot write now (a failed disk, a full one, a folder it may not write), or
   * undefined when it can. Cheap enough for every health check; absent where a platform checks.
   */
  unwritable?(): Promise<string | undefined>;
  /**
   * This process's id when it is the only one working on this store (a local data folder's lock
   * is held): a claim another holder left was left by a process that is gone. Absent where
   * several processes share the store (AWS).
   */
  readonly soleWorker?: string;
  /**
   * About how many leaf steps are waiting for a function or being run by one now, every request's:
   * the commands that run leaves (a task's start, a leaf's next turns). While the others' number
   * fewer than the room above the bound, a wide request may run up to EngineSettings.leavesWhenIdle
   * of its leaves at once (engine/leaf-slots.ts). Absent where it cannot be known cheaply.
   */
  leafSteps?(): Promise<number>;
  /** Waits for in-flight work (local deliveries) and releases files and connections. */
  close(): Promise<void>;
}
