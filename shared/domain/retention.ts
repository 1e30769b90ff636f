/**
 * What Arbor lets its stores forget, and when. Only what guards against repeats, once no repeat
 * can come any more, and what holds nothing any more (a request's leaf slots when no leaf holds or
 * waits for one: a record read as absent says the same): never the event log (the record of what happened: audits, replays, the
 * views rebuilt from it) nor live state (task views, usage, child counts, a request still to be
 * planned, A2A tasks, keys).
 *
 * Repeats come from: EventBridge's retries of a rule target (up to 24 hours), Lambda's retries of
 * an asynchronous invocation (up to its maximum event age, 6 hours in the engine stack), and the
 * dead-letter queue (it keeps a message 14 days, and `arbor dlq redrive` sends it again). Thirty
 * days outlast all three with room to spare.
 */
const DAY_MS = 24 * 60 * 60 * 1000;

export const RETENTION_MS = {
  /** An event id's guard (the item that makes an event recorded once, on DynamoDB), from its recording. */
  eventIdGuard: 30 * DAY_MS,
  /** A claim (held or done), from its last write: a held claim's lease lasts minutes. */
  claim: 30 * DAY_MS,
  /** A request's plan marker, from when its plan is done (a marker still "requested" is live work). */
  donePlanMarker: 30 * DAY_MS,
  /**
   * A webhook delivery, from when it was delivered (its subscription keeps what was told, so a
   * repeat is not recorded again without it); a dead one is kept until it is redriven.
   */
  deliveredNotification: 30 * DAY_MS,
  /** A request's leaf slots (engine/leaf-slots.ts), from when no leaf holds one and none waits for one. */
  idleLeafSlots: 30 * DAY_MS,
} as const;

/** `from` plus `ms`, as the ISO 8601 time a record's `expiresAt` takes. */
export const expiresAfter = (from: Date, ms: number): string => new Date(from.getTime() + ms).toISOString();
