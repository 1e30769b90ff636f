import { createHash } from "node:crypto";
import { ConflictError } from "../kernel/errors.ts";
import type { StateRecord, StateStore, WriteOp } from "../ports/state-store.ts";
import type { DeliveryData } from "./deliveries.ts";

/**
 * Delivery lanes: how many webhook attempts of one tenant, and of one tenant's receiving host, may
 * be in flight at once, counted across every worker (the local worker's attempts, the notify
 * function's concurrent invocations on AWS). A receiver that never answers then holds only its
 * own tenant's lanes: the other tenants' deliveries leave at once. How to drive it:
 *
 *   const hold = await takeLanes(state, delivery, holder, now, leaseMs);   // undefined: a lane is full
 *   ... POST it ...
 *   await releaseLanes(state, hold);
 *
 * A lane has `limit` slots, each a state record (`notify-lane#<lane>#<n>`, kind `notify-lane`)
 * that holds a lease while an attempt runs. Taking is one transaction of conditional puts, one free
 * slot in each lane the delivery runs in (its tenant's, its tenant's host's): two workers never hold
 * one slot, and nothing is held by half. A free slot has no lease or one that ran out, so a worker
 * that died mid-attempt gives its slots back when its lease ends (the delivery's lease: the same
 * length), or at once when the local server starts again (orphans.ts: status `held`). Chat deliveries (Slack, Teams) run in no lane: each thread is synced under its own lease
 * already, and their hosts are the platforms', shared by every tenant.
 */
export interface LaneLimits {
  /** Attempts of one tenant in flight at once. */
  perTenant: number;
  /** Attempts of one tenant to one host (`host:port`) in flight at once. */
  perHost: number;
}

export const DEFAULT_LANE_LIMITS: LaneLimits = { perTenant: 8, perHost: 4 };

export const LANE_KIND = "notify-lane";

/** One lane of a delivery: its key (a tenant's, or a tenant's host's) and how many slots it has. */
export interface Lane {
  key: string;
  limit: number;
}

export interface SlotData {
  lane: string;
  /** Who holds the slot, until when (absent: free). */
  lease?: { holder: string; until: string };
}

/** The slots a delivery holds for one attempt (the versions they were taken at). */
export interface LaneHold {
  slots: { key: string; version: number; lane: string }[];
}

/** Only webhooks run in lanes; the host is the URL's `host:port` (lowercased by URL parsing). */
export function lanesOf(
  d: Pick<DeliveryData, "channel" | "tenant" | "url">,
  limits: LaneLimits = DEFAULT_LANE_LIMITS,
): Lane[] {
  if (d.channel !== "callback" && d.channel !== "a2a-push") return [];
  let host: string;
  try {
    host = new URL(d.url).host;
  } catch {
    host = "(no host)";
  }
  return [
    { key: `t:${d.tenant}`, limit: limits.perTenant },
    { key: `h:${d.tenant}:${host}`, limit: limits.perHost },
  ];
}

/** Slot keys stay short whatever the host's length: a hash of the lane. */
const laneId = (lane: string) => createHash("sha256").update(lane).digest("base64url").slice(0, 22);
const slotKey = (lane: string, n: number) => `notify-lane#${laneId(lane)}#${n}`;

const isFree = (r: StateRecord<SlotData> | undefined, now: Date) =>
  !r?.data.lease || Date.parse(r.data.lease.until) <= now.getTime();

/**
 * Takes a free slot in each of `lanes` until `now + leaseMs`; undefined when a lane has none free
 * (or another worker took the last one first). No lanes: an empty hold.
 */
export async function takeLanes(
  state: StateStore,
  lanes: readonly Lane[],
  holder: string,
  now: Date,
  leaseMs: number,
  random: () => number = Math.random,
): Promise<LaneHold | undefined> {
  if (lanes.length === 0) return { slots: [] };
  // Two workers that read the same free slot race for it: the loser reads again and picks another.
  const tries = Math.max(...lanes.map((l) => l.limit)) + 1;
  for (let attempt = 0; attempt < tries; attempt++) {
    const picked = await pickFree(state, lanes, now, random);
    if (!picked) return undefined;
    const until = new Date(now.getTime() + leaseMs).toISOString();
    const ops: WriteOp[] = picked.map((s) => ({
      op: "put",
      record: {
        key: s.key,
        kind: LANE_KIND,
        status: "held",
        updatedAt: now.toISOString(),
        data: { lane: s.lane, lease: { holder, until } } satisfies SlotData,
      },
      expectedVersion: s.version,
    }));
    try {
      await state.transact(ops);
      return { slots: picked.map((s) => ({ ...s, version: s.version + 1 })) };
    } catch (e) {
      if (!(e instanceof ConflictError)) throw e;
    }
  }
  return undefined;
}

/** A free slot in each lane (one chosen at random among the free ones), or undefined when a lane has none. */
async function pickFree(
  state: StateStore,
  lanes: readonly Lane[],
  now: Date,
  random: () => number,
): Promise<LaneHold["slots"] | undefined> {
  const picked: LaneHold["slots"] = [];
  for (const lane of lanes) {
    const keys = Array.from({ length: Math.max(1, lane.limit) }, (_, n) => slotKey(lane.key, n));
    const slots = await Promise.all(keys.map((k) => state.get<SlotData>(k)));
    const free = slots.flatMap((r, n) => (isFree(r, now) ? [n] : []));
    if (free.length === 0) return undefined;
    const n = free[Math.floor(random() * free.length)] as number;
    picked.push({ key: keys[n] as string, version: slots[n]?.version ?? 0, lane: lane.key });
  }
  return picked;
}

/**
 * Gives the slots back. A slot whose lease ran out and was taken by another worker is left alone
 * (the conditional write fails: it is theirs now).
 */
export async function releaseLanes(state: StateStore, hold: LaneHold, now: Date): Promise<void> {
  if (hold.slots.length === 0) return;
  const ops: WriteOp[] = hold.slots.map((s) => ({
    op: "put",
    record: {
      key: s.key,
      kind: LANE_KIND,
      status: "free",
      updatedAt: now.toISOString(),
      data: { lane: s.lane } satisfies SlotData,
    },
    expectedVersion: s.version,
  }));
  try {
    await state.transact(ops);
  } catch (e) {
    if (!(e instanceof ConflictError)) throw e;
    // One of them was taken over (its lease ran out): give back the others one by one.
    for (const op of ops)
      await state.transact([op]).catch((err: unknown) => {
        if (!(err instanceof ConflictError)) throw err;
      });
  }
}
