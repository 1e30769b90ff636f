import type { EngineDeps } from "../engine/context.ts";
import { ConflictError } from "../kernel/errors.ts";
import { threadDigest, threadSnapshot } from "./chat/snapshot.ts";
import type { ThreadSnapshot } from "./chat/types.ts";
import { type DeliveryData, deliveryId, newDeliveryOp } from "./deliveries.ts";
import { a2aPushBody, a2aTask, type Body, callbackBody } from "./payloads.ts";
import { isFinalStanding, type Standing, standing, stateKey } from "./standing.ts";
import {
  isChatSubscription,
  openSubscriptions,
  type SubscriptionData,
  type SubscriptionRecord,
} from "./subscriptions.ts";

/**
 * Deliveries come from the state, never only from an event: `reconcile(deps, rootTaskUrn)` reads
 * how the request stands now (standing.ts) and, for each open subscription whose last notified
 * state differs, records a delivery (pending, due at once) in one transaction with the
 * subscription's move to that state, each a conditional write. A second wake-up for the same move
 * finds the subscription told already and records nothing; two reconciling at once: one wins the
 * subscription's version, the other re-reads and finds nothing to do. Once it has recorded how the
 * request ended, a subscription is `done` (the sweep leaves it alone).
 *
 * A chat thread (a Slack or Teams subscription) shows more than the standing: its state key is the
 * standing's plus a digest of what the thread shows (notify/chat/snapshot.ts: the state, each task's status
 * and assistant, the waiting questions), so every visible move records one delivery, whose body is
 * the ThreadSnapshot's JSON (the thread sync, notify/chat/sync.ts, applies it).
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
  const now = await seen(deps, rootTaskUrn, subs);
  const recorded: string[] = [];
  for (const sub of subs) {
    const id = await recordFor(deps, rootTaskUrn, sub, now);
    if (id) recorded.push(id);
  }
  return recorded;
}

/** How the request stands, and (for chat subscriptions) what a thread shows of it. */
interface Seen {
  standing: Standing;
  snapshot?: ThreadSnapshot;
}

async function seen(
  deps: EngineDeps,
  rootTaskUrn: string,
  subs: readonly SubscriptionRecord[],
): Promise<Seen> {
  const s = await standing(deps, rootTaskUrn);
  if (!subs.some((sub) => isChatSubscription(sub.data.subscription))) return { standing: s };
  return { standing: s, snapshot: await threadSnapshot(deps, rootTaskUrn, { standing: s }) };
}

/** The state key a subscription is told (the same key: nothing new to tell). */
function keyFor(sub: SubscriptionRecord, now: Seen): string {
  const key = stateKey(now.standing);
  return isChatSubscription(sub.data.subscription) && now.snapshot
    ? `${key}#${threadDigest(now.snapshot)}`
    : key;
}

async function recordFor(
  deps: EngineDeps,
  rootTaskUrn: string,
  first: SubscriptionRecord,
  firstSeen: Seen,
): Promise<string | undefined> {
  let sub: SubscriptionRecord | undefined = first;
  let now = firstSeen;
  for (let attempt = 0; sub && attempt < 5; attempt++) {
    const key = keyFor(sub, now);
    const s = now.standing;
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
        newDeliveryOp(delivery(deps, rootTaskUrn, sub, now, { id, seq, key, at }), at),
      ]);
      return id;
    } catch (e) {
      if (!(e instanceof ConflictError)) throw e;
      // Another reconciler moved the subscription: read it, then the state, again.
      sub = await deps.state.get<SubscriptionData>(sub.key);
      if (sub) now = await seen(deps, rootTaskUrn, [sub]);
    }
  }
  return undefined;
}

function delivery(
  deps: EngineDeps,
  rootTaskUrn: string,
  sub: SubscriptionRecord,
  now: Seen,
  ids: { id: string; seq: number; key: string; at: Date },
): Omit<DeliveryData, "createdAt" | "retryFrom" | "nextAttemptAt" | "attempts"> {
  const subscription = sub.data.subscription;
  const s = now.standing;
  const common = {
    id: ids.id,
    channel: subscription.kind,
    tenant: subscription.tenant,
    rootTaskUrn,
    subscriptionKey: sub.key,
    seq: ids.seq,
    stateKey: ids.key,
  };
  if (isChatSubscription(subscription)) {
    // The thread sync applies it through the channel's surface: nothing is POSTed, nothing signed.
    const snapshot = now.snapshot ?? { rootTaskUrn, state: s.state };
    return {
      ...common,
      url: `${subscription.kind}:${subscription.id}`,
      body: JSON.stringify({ ...snapshot, at: ids.at.toISOString() }),
      contentType: "application/json",
      headers: {},
      signed: false,
    };
  }
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
    ...common,
    url: subscription.url,
    body: body.body,
    contentType: body.contentType,
    headers,
    signed: subscription.kind === "callback",
    ...(subscription.kind === "callback" && subscription.signer ? { signer: subscription.signer } : {}),
  };
}
