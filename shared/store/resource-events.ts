import { eventIdFor } from "../domain/events.ts";
import { isUrn, lastElement, tenantOf } from "../domain/urn.ts";
import { UnavailableError } from "../kernel/errors.ts";
import type { BusEventInput, EventBus } from "../ports/event-bus.ts";

/**
 * RESOURCE_PUT / RESOURCE_DELETE on the bus: what an operator subscribes to by URN prefix (an
 * EventBridge rule on `resources`, or `GET /v1/resource-events` on `arbor serve`).
 *
 *   source       "arbor"
 *   detail-type  "RESOURCE_PUT" | "RESOURCE_DELETE"
 *   resources    [urn]
 *   detail       { urn, resourceType, name, contentHash, tenant? }
 *   id           derived from (detail-type, urn, contentHash): writing the same bytes again, or
 *                deleting the same version twice, is the same event, so a consumer that
 *                deduplicates on the id takes it once (EventBridge may deliver any event twice).
 *                For a delete, contentHash is the sha256 of the document that was removed.
 *
 * Which writes are announced (see `announcesPut`): every resource kind (Tenant, Conversation, the
 * user's Message and the planner's, plan.Task, common.Assistant, common.Tool, uip.Interaction...),
 * except the Messages under a task. Those are the task's working transcript (its prompt, each
 * turn, each tool result, each evaluation): the bulk of all writes, worth nothing to a subscriber
 * that the task's end does not say better, so they are announced only with
 * ARBOR_RESOURCE_EVENTS=all. A task's `output` Message is announced by the engine
 * (engine/steps/outcome.ts) once the task's end is recorded, never by the store: the supervisor it
 * wakes must find the child ended.
 *
 * Reads (RESOURCE_GET) are never announced: they are the hottest path (every step reads its task,
 * ancestors and transcript), they change nothing a subscriber could act on, and an audit of who
 * read what belongs to the policy decisions' log, not to the bus.
 *
 * The bus is not the record: the notice is published after the write, so a crash between the two
 * loses it (a retried step writes the same bytes again and so sends it, with the same id, but a
 * step that finds its write done does not). A subscriber that must miss nothing lists the prefix
 * when it (re)connects (`GET /v1/resources/:urn/children`) and takes the notices as hints.
 */
export const RESOURCE_EVENT_SOURCE = "arbor";
export const RESOURCE_PUT = "RESOURCE_PUT";
export const RESOURCE_DELETE = "RESOURCE_DELETE";
export type ResourceEventType = typeof RESOURCE_PUT | typeof RESOURCE_DELETE;
export const RESOURCE_EVENT_TYPES: readonly ResourceEventType[] = [RESOURCE_PUT, RESOURCE_DELETE];

/**
 * ARBOR_RESOURCE_EVENTS. `default`: every write but a task's transcript; `all`: the transcript too;
 * `off`: none but the outputs the engine announces (its wake-ups), as before resource events.
 */
export type ResourceEventsSetting = "default" | "all" | "off";

/** What a notice says about one resource written or removed. */
export interface ResourceNotice {
  urn: string;
  resourceType: string;
  name: string;
  /** sha256 of the document written (put) or removed (delete). */
  contentHash: string;
}

export interface ResourceEventDetail extends ResourceNotice {
  /** The tenant the URN lies in; absent for what lies in none. */
  tenant?: string;
}

/** The bus event of a put or a delete, with its deterministic id. */
export function resourceEvent(type: ResourceEventType, notice: ResourceNotice): BusEventInput {
  const tenant = isUrn(notice.urn) ? tenantOf(notice.urn) : undefined;
  const detail: ResourceEventDetail = {
    urn: notice.urn,
    resourceType: notice.resourceType,
    name: notice.name,
    contentHash: notice.contentHash,
    ...(tenant ? { tenant } : {}),
  };
  return {
    id: eventIdFor(type, notice.urn, notice.contentHash),
    source: RESOURCE_EVENT_SOURCE,
    detailType: type,
    detail: { ...detail },
    resources: [notice.urn],
  };
}

/** What the store knows of a resource when it decides whether to announce its write. */
export interface WrittenMeta {
  type: string;
  name: string;
  parent?: string | undefined;
}

/** A task's working transcript: a Message right under a plan.Task (the output included). */
function isTaskMessage(meta: WrittenMeta): boolean {
  if (meta.type !== "common.Message" || meta.parent === undefined) return false;
  const parent = lastElement(meta.parent);
  return parent.pkg === "plan" && parent.type === "Task";
}

/**
 * Whether the store announces a put of this resource: everything but the Messages under a task
 * (with `all`: everything but a task's output, which the engine announces when the task ends).
 */
export function announcesPut(
  meta: WrittenMeta,
  setting: Exclude<ResourceEventsSetting, "off"> = "default",
): boolean {
  // A document's chunks are its bulk (hundreds a document): the document's own put says it.
  if (meta.type === "doc.Chunk") return setting === "all";
  if (!isTaskMessage(meta)) return true;
  return setting === "all" && meta.name !== "output";
}

/**
 * The announcer the composition roots give the store: none when the setting is `off`. `deferred`
 * (the AWS runtime's): a write does not wait for its notice, which goes out with the notices of
 * the writes after it; the function waits for them all (`settled`) before its invocation ends,
 * so a publish that fails still fails the step, which is retried and sends them again.
 */
export function resourceAnnouncer(
  bus: EventBus,
  setting: ResourceEventsSetting = "default",
  options: { deferred?: boolean } = {},
): ResourceAnnouncer | undefined {
  return setting === "off" ? undefined : new BusAnnouncer(bus, setting, options);
}

/** Where the store sends its notices (the composition roots give it one over the bus). */
export interface ResourceAnnouncer {
  /** Whether a put of a resource with this meta is announced (asked before the hash is taken). */
  announces(meta: WrittenMeta): boolean;
  announce(type: ResourceEventType, notice: ResourceNotice): Promise<void>;
  /** Resolves once every notice announced so far is published; throws the first that failed since the last call. */
  settled(): Promise<void>;
}

/**
 * Announces on an event bus. Notices that come while a publish is in flight go together in the
 * next one (a plan's tasks are written all at once: a dozen PutEvents calls instead of a hundred),
 * and a lone write is published at once. A write resolves when its notice is accepted by the bus;
 * a failed publish fails the write (the step is retried and sends the notice again, same id).
 */
export class BusAnnouncer implements ResourceAnnouncer {
  readonly #bus: EventBus;
  readonly #setting: Exclude<ResourceEventsSetting, "off">;
  #waiting: { event: BusEventInput; done: (error?: unknown) => void }[] = [];
  #publishing = false;
  readonly #deferred: boolean;
  /** Deferred notices not yet published, and the first failure since `settled` last looked. */
  readonly #pending = new Set<Promise<void>>();
  #failed: unknown;

  constructor(
    bus: EventBus,
    setting: Exclude<ResourceEventsSetting, "off"> = "default",
    options: { deferred?: boolean } = {},
  ) {
    this.#bus = bus;
    this.#setting = setting;
    this.#deferred = options.deferred ?? false;
  }

  async settled(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
    const failed = this.#failed;
    this.#failed = undefined;
    if (failed !== undefined) throw failed;
  }

  announces(meta: WrittenMeta): boolean {
    return announcesPut(meta, this.#setting);
  }

  announce(type: ResourceEventType, notice: ResourceNotice): Promise<void> {
    const event = resourceEvent(type, notice);
    const published = new Promise<void>((resolve, reject) => {
      this.#waiting.push({ event, done: (error) => (error === undefined ? resolve() : reject(error)) });
      if (!this.#publishing) void this.#drain();
    });
    if (!this.#deferred) return published;
    const tracked = published.catch((error: unknown) => {
      this.#failed ??= error;
    });
    this.#pending.add(tracked);
    void tracked.finally(() => this.#pending.delete(tracked));
    return Promise.resolve();
  }

  async #drain(): Promise<void> {
    this.#publishing = true;
    try {
      while (this.#waiting.length > 0) {
        const batch = this.#waiting;
        this.#waiting = [];
        try {
          await this.#bus.publish(batch.map((w) => w.event));
          for (const w of batch) w.done();
        } catch (error) {
          const failed =
            error ??
            new UnavailableError("The event bus failed to publish resource events and gave no reason");
          for (const w of batch) w.done(failed);
        }
      }
    } finally {
      this.#publishing = false;
    }
  }
}
