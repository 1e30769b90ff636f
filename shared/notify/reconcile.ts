import type { EngineDeps } from "../engine/context.ts";
import { ConflictError } from "../errors.ts";
import { type DeliveryData, deliveryId, newDeliveryOp } from "./deliveries.ts";
import { a2aPushBody, a2aTask, type Body, callbackBody } from "./payloads.ts";
import { isFinalStanding, type Standing, standing, stateKey } from "./standing.ts";
import { openSubscriptions, type SubscriptionData, type SubscriptionRecord } from "./subscriptions.ts";

/**
 * Deliveries come from the state, never only from an event: `reconcile(deps, rootTaskUrn)` reads
 * how the request stands now (standing.ts) and, for each open subscription whose last notified
 * state differs, records a delivery (pending, due at once) in one transaction with the
 * subscription's move to that state, each a conditional write. A second wake-up for the same move
 * finds the subscription told already and records nothing; two reconciling at once: one wins the
 * subscription's version, the other re-reads and finds nothing to do. Once it has recorded how the
 * request ended, a subscription is `done` (the sweep leaves it alone).
 *
 * How to drive it: `const ids = await reconcile(deps, rootTaskUrn)` (the ids of the deliveries it
 * recorded: hand them to the sender, or to a queue). `deps` is the engine's (engine.deps): only its
 * state, tasks, resources, clock and newId are used.
 */
export async function reconcile(
  deps: EngineDeps,
  rootTaskUrn: string,
  /** Subscription keys known to exist (one just written, which an index may not list yet). */
  known: readonly string[] = [],
): Promise<string[]> {
  // byParent finds the keys (an index on DynamoDB: it may lag); each is decided on its base record.
  const keys = new Set([...(await openSubscriptions(deps.state, rootTaskUrn)).map((r) => r.key), ...known]);
  if (keys.size === 0) return [];
  // The subscriptions are read before the request's state: whatever another reconciler wrote into
  // them was read from a state no newer than ours, so this one never records an older state after
  // a newer one (and on a conflict both are read again, in the same order).
  const subs: SubscriptionRecord[] = [];
  for (const key of keys) {
    const sub = await deps.state.get<SubscriptionData>(key);
    if (sub?.status === "open") subs.push(sub);
  }
  if (subs.length === 0) return [];
  const now = await standing(deps, rootTaskUrn);
  const recorded: string[] = [];
  for (const sub of subs) {
    const id = await recordFor(deps, rootTaskUrn, sub, now);
    if (id) recorded.push(id);
  }
  return recorded;
}

async function recordFor(
  deps: EngineDeps,
  rootTaskUrn: string,
  first: SubscriptionRecord,
  firstStanding: Standing,
): Promise<string | undefined> {
  let sub: SubscriptionRecord | undefined = first;
  let s = firstStanding;
  for (let attempt = 0; sub && attempt < 5; attempt++) {
    const key = stateKey(s);
    if (sub.status !== "open" || sub.data.notified === key) return undefined;
    const seq = sub.data.sent + 1;
    const id = deliveryId(sub.key, seq);
    const at = deps.clock();
    const { version, ...record } = sub;
    const data: SubscriptionData = { ...sub.data, notified: key, sent: seq };
    try {
      await deps.state.transact([
        {
          op: "put",
          record: {
            ...record,
            status: isFinalStanding(s) ? "done" : "open",
            updatedAt: at.toISOString(),
            data,
          },
          expectedVersion: version,
        },
        newDeliveryOp(delivery(deps, rootTaskUrn, sub, s, { id, seq, key, at }), at),
      ]);
      return id;
    } catch (e) {
      if (!(e instanceof ConflictError)) throw e;
      // Another reconciler moved the subscription: read it, then the state, again.
      sub = await deps.state.get<SubscriptionData>(sub.key);
      s = await standing(deps, rootTaskUrn);
    }
  }
  return undefined;
}

function delivery(
  deps: EngineDeps,
  rootTaskUrn: string,
  sub: SubscriptionRecord,
  s: Standing,
  ids: { id: string; seq: number; key: string; at: Date },
): Omit<DeliveryData, "createdAt" | "retryFrom" | "nextAttemptAt" | "attempts"> {
  const subscription = sub.data.subscription;
  let body: Body;
  let headers: Record<string, string> = {};
  if (subscription.kind === "a2a-push") {
    const task = a2aTask(subscription, s, { newId: deps.newId, now: () => ids.at }, rootTaskUrn);
    body = a2aPushBody(subscription, task);
    const { token, authentication } = subscription;
    if (authentication) headers = { Authorization: `${authentication.scheme} ${authentication.credentials}` };
    else if (token) headers = { Authorization: `Bearer ${token}` };
    if (token) headers["X-A2A-Notification-Token"] = token;
  } else {
    body = callbackBody(subscription, s, { eventId: ids.id, rootTaskUrn, at: ids.at.toISOString() });
  }
  return {
    id: ids.id,
    channel: subscription.kind,
    tenant: subscription.tenant,
    rootTaskUrn,
    subscriptionKey: sub.key,
    seq: ids.seq,
    stateKey: ids.key,
    url: subscription.url,
    body: body.body,
    contentType: body.contentType,
    headers,
    signed: subscription.kind === "callback",
  };
}
