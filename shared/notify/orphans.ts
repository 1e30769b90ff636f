import { ConflictError } from "../kernel/errors.ts";
import type { StateRecord, StateStore } from "../ports/state-store.ts";
import { THREAD_KIND, type ThreadData } from "./chat/thread-record.ts";
import { DELIVERY_KIND, type DeliveryData } from "./deliveries.ts";
import { LANE_KIND, type SlotData } from "./lanes.ts";

/**
 * Leases left by a process that is gone. A delivery being attempted and a chat thread being synced
 * are held under a lease (a minute) so that two workers never work on one at once; a worker killed
 * while holding one leaves it to run out, and until then nothing else sends that delivery or
 * syncs that thread. A process that knows it is the only one on the state (`arbor serve` holds the
 * data folder's lock) knows every lease it finds at start is such a leftover, and lets go of them
 * all at once, so the notifications go on now, not a minute later. How to drive it:
 *
 *   const released = await releaseOrphanedLeases(state, clock());   // before the worker starts
 *
 * Each release is a conditional write on the version read: a lease taken meanwhile is kept. Never
 * for a state other processes share (the AWS runtime): there a lease ends by running out.
 */
export async function releaseOrphanedLeases(state: StateStore, now: Date): Promise<number> {
  let released = 0;
  const at = now.toISOString();
  // A delivery in `sending` is due again once its lease ends (its updatedAt): end it now.
  for await (const r of everyRecord<DeliveryData>(state, DELIVERY_KIND, "sending")) {
    if (!r.data.lease || Date.parse(r.data.lease.until) <= now.getTime()) continue;
    const { version, ...record } = r;
    const data: DeliveryData = { ...r.data, lease: { ...r.data.lease, until: at } };
    if (await put(state, { ...record, updatedAt: at, data }, version)) released++;
  }
  for await (const r of everyRecord<ThreadData>(state, THREAD_KIND, "open")) {
    if (!r.data.lease || Date.parse(r.data.lease.until) <= now.getTime()) continue;
    const { version, ...record } = r;
    const { lease: _, ...data } = r.data;
    if (await put(state, { ...record, data: data as ThreadData }, version)) released++;
  }
  // A delivery lane's slot (lanes.ts) held by an attempt that died with its process.
  for await (const r of everyRecord<SlotData>(state, LANE_KIND, "held")) {
    if (!r.data.lease || Date.parse(r.data.lease.until) <= now.getTime()) continue;
    const { version, ...record } = r;
    const data: SlotData = { lane: r.data.lane };
    if (await put(state, { ...record, status: "free", updatedAt: at, data }, version)) released++;
  }
  return released;
}

async function* everyRecord<T>(state: StateStore, kind: string, status: string) {
  let cursor: string | undefined;
  do {
    const page = await state.byStatus<T>(
      kind,
      status,
      cursor === undefined ? { limit: 100 } : { limit: 100, cursor },
    );
    yield* page.items as StateRecord<T>[];
    cursor = page.cursor;
  } while (cursor !== undefined);
}

async function put<T>(state: StateStore, record: Omit<StateRecord<T>, "version">, version: number) {
  try {
    await state.transact([{ op: "put", record, expectedVersion: version }]);
    return true;
  } catch (e) {
    if (e instanceof ConflictError) return false;
    throw e;
  }
}
