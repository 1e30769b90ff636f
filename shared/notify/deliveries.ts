import { createHash } from "node:crypto";
import { expiresAfter, RETENTION_MS } from "../domain/retention.ts";
import { ConflictError, NotFoundError, ValidationError } from "../kernel/errors.ts";
import type { RecordInput, StateRecord, StateStore, WriteOp } from "../ports/state-store.ts";

/**
 * Delivery records: one notification to one subscriber, recorded before it is sent. How to drive it:
 *
 *   newDeliveryOp(data, now)                  -> the conditional put (expectedVersion 0) that records it
 *   dueDeliveries(state, now)                 -> ids of deliveries to attempt now (index; confirm by claim)
 *   const c = await claimDelivery(state, id, holder, now, leaseMs)   // undefined: not due, or taken
 *   ... POST it (sender.ts) ...
 *   await settleDelivery(state, c, { delivered: true } | { error, nextAttemptAt? }, now)
 *   listDeliveries(state, "dead") / redriveDelivery(state, id, now)
 *
 * Key `notify-delivery#<id>`, kind `notify-delivery`. The id is derived from the subscription and
 * the delivery's sequence number in it, so the same notification recorded twice is one record; it
 * is also the event id the receiver deduplicates on (`Arbor-Delivery-Id`, the callback's `id`).
 *
 * Status and `updatedAt` say when the record next needs attention, so that the status index
 * (kind+status, ordered by updatedAt; `updatedBefore: now`) lists exactly what is due:
 *   pending    updatedAt = the next attempt's time
 *   sending    updatedAt = the end of the attempt's lease (a worker that died holding it: due again then)
 *   delivered  updatedAt = when a 2xx came back (the store may forget it 30 days later)
 *   dead       updatedAt = when it gave up (retried for the whole window, see backoff.ts)
 * Every move is a conditional write on the version read: two workers never hold one attempt.
 */
export const DELIVERY_KIND = "notify-delivery";
export const deliveryKey = (id: string) => `notify-delivery#${id}`;
export const deliveryId = (subscriptionKey: string, seq: number) =>
  `dlv_${createHash("sha256").update(`${subscriptionKey}\u0000${seq}`).digest("base64url").slice(0, 26)}`;

export type DeliveryStatus = "pending" | "sending" | "delivered" | "dead";
export const DELIVERY_STATUSES: readonly DeliveryStatus[] = ["pending", "sending", "delivered", "dead"];

export interface DeliveryData {
  /** The event id (also the record's id). */
  id: string;
  /** The subscription's kind: a webhook (POSTed, sender.ts) or a chat thread (synced, notify/chat/sync.ts). */
  channel: "a2a-push" | "callback" | "slack" | "teams";
  tenant: string;
  rootTaskUrn: string;
  subscriptionKey: string;
  /** Its place among the subscription's deliveries (1, 2, ...). */
  seq: number;
  /** The standing it tells (standing.ts stateKey). */
  stateKey: string;
  /** A webhook's URL; for a chat thread `<kind>:<subscription id>` (nothing is POSTed to it). */
  url: string;
  /** A webhook's body; for a chat thread, the ThreadSnapshot's JSON (notify/chat/snapshot.ts). */
  body: string;
  contentType: string;
  /** Headers sent as they are (the A2A push's authorization). Never shown by listings. */
  headers: Record<string, string>;
  /** Callbacks: signed at each attempt (signing.ts), with the signer's secret, or the tenant's when there is none. */
  signed: boolean;
  /** Whose secret signs it: the actor id of the key that asked for the callback (absent: recorded before secrets were per key). */
  signer?: string;
  createdAt: string;
  /** The retry window starts here: the first record, or the last redrive. */
  retryFrom: string;
  nextAttemptAt: string;
  attempts: number;
  lastError?: string;
  lastStatus?: number;
  lease?: { holder: string; until: string };
  deliveredAt?: string;
  deadAt?: string;
}

export type DeliveryRecord = StateRecord<DeliveryData>;

const input = (data: DeliveryData, status: DeliveryStatus, updatedAt: string): RecordInput<DeliveryData> => ({
  key: deliveryKey(data.id),
  kind: DELIVERY_KIND,
  parent: `notify-deliveries#${data.rootTaskUrn}`,
  status,
  updatedAt,
  data,
});

/** The write that records a new delivery, due at once; it fails (ConflictError) when it was recorded before. */
export function newDeliveryOp(
  data: Omit<DeliveryData, "createdAt" | "retryFrom" | "nextAttemptAt" | "attempts">,
  now: Date,
): WriteOp {
  const at = now.toISOString();
  const full: DeliveryData = { ...data, createdAt: at, retryFrom: at, nextAttemptAt: at, attempts: 0 };
  return { op: "put", record: input(full, "pending", at), expectedVersion: 0 };
}

/** Ids of deliveries due now (pending and due, or sending with a lease that ran out), oldest first. */
export async function dueDeliveries(state: StateStore, now: Date, limit = 50): Promise<string[]> {
  return (await dueDeliveryRefs(state, now, limit)).map((d) => d.id);
}

/** A delivery due now: its id, the subscription it is for, its channel, whose it is and where it goes. */
export type DueRef = Pick<DeliveryData, "id" | "subscriptionKey" | "channel" | "tenant" | "url">;

const dueRef = (r: DeliveryRecord): DueRef => ({
  id: r.data.id,
  subscriptionKey: r.data.subscriptionKey,
  channel: r.data.channel,
  tenant: r.data.tenant,
  url: r.data.url,
});

/** The deliveries due now as dueDeliveries finds them, each with the subscription it is for. */
export async function dueDeliveryRefs(state: StateStore, now: Date, limit = 50): Promise<DueRef[]> {
  const due: DueRef[] = [];
  for await (const page of duePages(state, now, limit)) {
    due.push(...page.slice(0, limit - due.length));
    if (due.length >= limit) break;
  }
  return due;
}

/**
 * Every delivery due now, a page at a time, oldest first (pending, then sending with a lease that
 * ran out): for a worker that starts what it can and looks further when some are held back.
 */
export async function* duePages(state: StateStore, now: Date, pageSize = 100): AsyncGenerator<DueRef[]> {
  // updatedBefore is exclusive: what is due at this very millisecond is due.
  const before = new Date(now.getTime() + 1).toISOString();
  for (const status of ["pending", "sending"] as const) {
    let cursor: string | undefined;
    do {
      const page = await state.byStatus<DeliveryData>(DELIVERY_KIND, status, {
        updatedBefore: before,
        limit: pageSize,
        ...(cursor === undefined ? {} : { cursor }),
      });
      if (page.items.length > 0) yield page.items.map(dueRef);
      cursor = page.cursor;
    } while (cursor !== undefined);
  }
}

/** Whether the base record is due for an attempt now (the index may lag: decide on the record). */
export function isDue(r: DeliveryRecord, now: Date): boolean {
  if (r.status === "pending") return Date.parse(r.data.nextAttemptAt) <= now.getTime();
  if (r.status === "sending")
    return r.data.lease === undefined || Date.parse(r.data.lease.until) <= now.getTime();
  return false;
}

/**
 * Takes the next attempt of a delivery for `holder` until `now + leaseMs`: a conditional write on
 * the version read. Undefined when it is not due (delivered, dead, not yet time) or another worker
 * took it first.
 */
export async function claimDelivery(
  state: StateStore,
  id: string,
  holder: string,
  now: Date,
  leaseMs: number,
  /** The record as just read (saves reading it again). */
  read?: DeliveryRecord,
): Promise<DeliveryRecord | undefined> {
  const current = read ?? (await state.get<DeliveryData>(deliveryKey(id)));
  if (!current || !isDue(current, now)) return undefined;
  const until = new Date(now.getTime() + leaseMs).toISOString();
  const data: DeliveryData = {
    ...current.data,
    attempts: current.data.attempts + 1,
    lease: { holder, until },
  };
  const record = input(data, "sending", until);
  try {
    await state.transact([{ op: "put", record, expectedVersion: current.version }]);
  } catch (e) {
    if (e instanceof ConflictError) return undefined;
    throw e;
  }
  return { ...record, version: current.version + 1 } as DeliveryRecord;
}

export type AttemptResult =
  | { delivered: true; status: number }
  | { delivered: false; error: string; status?: number; nextAttemptAt?: Date };

/**
 * Records how a claimed attempt went: delivered; pending again at `nextAttemptAt`; or dead (a
 * failure with no next attempt). False when the claim was lost (its lease ran out and another
 * worker took the delivery): that worker records its own attempt.
 */
export async function settleDelivery(
  state: StateStore,
  claimed: DeliveryRecord,
  result: AttemptResult,
  now: Date,
): Promise<boolean> {
  const { lease: _, ...base } = claimed.data;
  const at = now.toISOString();
  let record: RecordInput<DeliveryData>;
  if (result.delivered) {
    const { lastError: _e, ...rest } = base;
    record = {
      ...input({ ...rest, lastStatus: result.status, deliveredAt: at }, "delivered", at),
      expiresAt: expiresAfter(now, RETENTION_MS.deliveredNotification),
    };
  } else {
    const failed = {
      ...base,
      lastError: result.error.slice(0, 1000),
      ...(result.status !== undefined ? { lastStatus: result.status } : {}),
    };
    record = result.nextAttemptAt
      ? input(
          { ...failed, nextAttemptAt: result.nextAttemptAt.toISOString() },
          "pending",
          result.nextAttemptAt.toISOString(),
        )
      : input({ ...failed, deadAt: at }, "dead", at);
  }
  try {
    await state.transact([{ op: "put", record, expectedVersion: claimed.version }]);
    return true;
  } catch (e) {
    if (e instanceof ConflictError) return false;
    throw e;
  }
}

/** Deliveries in a status, oldest first (by the index: a listing, not a decision). */
export async function listDeliveries(
  state: StateStore,
  status: DeliveryStatus,
  options: { tenant?: string; limit?: number; cursor?: string } = {},
): Promise<{ items: DeliveryRecord[]; cursor?: string }> {
  const page = await state.byStatus<DeliveryData>(DELIVERY_KIND, status, {
    limit: options.limit ?? 100,
    ...(options.cursor ? { cursor: options.cursor } : {}),
  });
  const items = options.tenant ? page.items.filter((r) => r.data.tenant === options.tenant) : page.items;
  return { items, ...(page.cursor ? { cursor: page.cursor } : {}) };
}

export async function getDelivery(state: StateStore, id: string): Promise<DeliveryRecord | undefined> {
  return state.get<DeliveryData>(deliveryKey(id));
}

/**
 * Sends a dead delivery again: pending, due now, with a new retry window (its attempts so far are
 * kept). NotFoundError for no such delivery; ValidationError for one that is not dead.
 */
export async function redriveDelivery(state: StateStore, id: string, now: Date): Promise<DeliveryRecord> {
  const current = await getDelivery(state, id);
  if (!current) throw new NotFoundError("Delivery", id);
  if (current.status !== "dead")
    throw new ValidationError(
      `Delivery ${id} is ${current.status}, not dead: only dead deliveries are redriven (it is retried on its own)`,
    );
  const at = now.toISOString();
  const { deadAt: _, ...rest } = current.data;
  const record = input({ ...rest, retryFrom: at, nextAttemptAt: at }, "pending", at);
  await state.transact([{ op: "put", record, expectedVersion: current.version }]);
  return { ...record, version: current.version + 1 } as DeliveryRecord;
}

/** A delivery as listings show it: no body, no headers (an A2A push's token is in them). */
export function deliveryView(r: DeliveryRecord) {
  const { body: _b, headers: _h, lease: _l, ...shown } = r.data;
  return { ...shown, status: r.status };
}
