import { createHash } from "node:crypto";
import * as z from "zod";
import { formatIssues } from "../domain/resources.ts";
import { ConflictError, ValidationError } from "../kernel/errors.ts";
import type { StateRecord, StateStore } from "../ports/state-store.ts";
import { SlackThreadSchema, TeamsThreadSchema } from "./chat/types.ts";

/**
 * Subscriptions: who wants to hear when a request moves. How to drive it:
 *
 *   await subscribe(state, clock, rootTaskUrn, { kind: "callback", id, url, tenant });
 *   await subscribe(state, clock, rootTaskUrn, { kind: "a2a-push", id: configId, protocol: "1.0", url, ... });
 *   await subscribe(state, clock, rootTaskUrn, slackThread);   // a SlackThread / TeamsThread (notify/chat/types.ts)
 *   await openSubscriptions(state, rootTaskUrn);   // byParent(`notify-subs#<root>`), open ones
 *   await deleteSubscription(state, clock, rootTaskUrn, id);
 *
 * Each is a state record (kind `notify-sub`, key `notify-sub#<root>#<id>`, parent
 * `notify-subs#<root>` so byParent finds a request's, status `open` while it may still be told
 * something, `done` once it was told how the request ended, `deleted` when its owner removed it;
 * the sweep finds the open ones by status), written with a conditional write. Its data carries what was last notified
 * (`notified`: the state key, `sent`: how many deliveries it has had): reconcile.ts moves both in
 * the same transaction that records a delivery, so one state change is recorded once.
 */
export const SUB_KIND = "notify-sub";
export const subsParent = (rootTaskUrn: string) => `notify-subs#${rootTaskUrn}`;
export const subKey = (rootTaskUrn: string, id: string) => `notify-sub#${rootTaskUrn}#${id}`;

const AuthenticationSchema = z
  .object({ scheme: z.string().min(1).max(64), credentials: z.string().min(1).max(4096) })
  .strict();

export const A2aPushSchema = z
  .object({
    kind: z.literal("a2a-push"),
    /** The push config's id (A2A `configId`). */
    id: z.string().min(1).max(200),
    url: z.string().min(1).max(2048),
    /** The caller's token (sent back as `Authorization: Bearer <token>` when no `authentication`). */
    token: z.string().min(1).max(4096).optional(),
    authentication: AuthenticationSchema.optional(),
    protocol: z.enum(["1.0", "0.3"]),
    /** The A2A task the caller knows; the request behind it is the subscription's root. */
    a2aTaskId: z.string().min(1).max(200),
    contextId: z.string().min(1).max(1000),
    tenant: z.string().min(1).max(64),
    /** Who gave the config (an actor id): only they are shown its token and credentials again. */
    owner: z.string().min(1).max(200).optional(),
    acceptedOutputModes: z.array(z.string().min(1).max(200)).max(50).optional(),
  })
  .strict();

export const CallbackSchema = z
  .object({
    kind: z.literal("callback"),
    id: z.string().min(1).max(200),
    url: z.string().min(1).max(2048),
    tenant: z.string().min(1).max(64),
    /** The actor id of the key that asked for it: its secret signs the callbacks (signing.ts). */
    signer: z.string().min(1).max(200).optional(),
  })
  .strict();

/**
 * The kinds: webhooks (a URL, checked by NotifyService.subscribe against the outbound guard) and
 * chat threads (a Slack thread, a Teams conversation: no URL; their deliveries go to the thread sync,
 * shared/notify/chat/sync.ts, through the channel's surface; the Teams channel checks the service URL
 * before it subscribes).
 */
export const SubscriptionSchema = z.discriminatedUnion("kind", [
  A2aPushSchema,
  CallbackSchema,
  SlackThreadSchema,
  TeamsThreadSchema,
]);
export type A2aPushSubscription = z.infer<typeof A2aPushSchema>;
export type CallbackSubscription = z.infer<typeof CallbackSchema>;
export type Subscription = z.infer<typeof SubscriptionSchema>;
export type WebhookSubscription = A2aPushSubscription | CallbackSubscription;
export type ChatSubscription = Extract<Subscription, { kind: "slack" | "teams" }>;

export const isChatSubscription = (s: Subscription): s is ChatSubscription =>
  s.kind === "slack" || s.kind === "teams";

/** Where a subscription's notifications go: its URL, or its thread (the same target keeps what it was told). */
function targetOf(s: Subscription): string {
  return isChatSubscription(s) ? `${s.kind}:${JSON.stringify(s)}` : s.url;
}

/** What a subscription record holds: the subscription, and what it was last told. */
export interface SubscriptionData {
  subscription: Subscription;
  rootTaskUrn: string;
  createdAt: string;
  /** The state key (reconcile.ts) last recorded as a delivery; absent: none yet. */
  notified?: string;
  /** Deliveries recorded for it so far (the next one's sequence number is sent + 1). */
  sent: number;
}

export type SubscriptionRecord = StateRecord<SubscriptionData>;

/** A subscription id for callers that give none (a callback): stable for one root and URL. */
export const callbackSubscriptionId = (rootTaskUrn: string, url: string) =>
  `cb_${createHash("sha256").update(`${rootTaskUrn}\u0000${url}`).digest("base64url").slice(0, 20)}`;

/**
 * Opens (or, for an id already there, replaces: A2A's create with an existing config id) a
 * subscription. Replacing with the same URL keeps what it was told so far. Returns the record.
 */
export async function subscribe(
  state: StateStore,
  clock: () => Date,
  rootTaskUrn: string,
  raw: Subscription,
): Promise<SubscriptionRecord> {
  const parsed = SubscriptionSchema.safeParse(raw);
  if (!parsed.success)
    throw new ValidationError("The notification subscription is not valid", formatIssues(parsed.error));
  const subscription = parsed.data;
  const key = subKey(rootTaskUrn, subscription.id);
  for (let attempt = 0; ; attempt++) {
    const current = await state.get<SubscriptionData>(key);
    // An id is one subscriber's: a push config never replaces a chat thread or a callback (nor the other way).
    if (current && current.status !== "deleted" && current.data.subscription.kind !== subscription.kind)
      throw new ConflictError(
        `The subscription id ${subscription.id} is taken by a ${current.data.subscription.kind} subscription: choose another id`,
      );
    const now = clock().toISOString();
    // The same receiver (a config updated under its id) is not told again what it was told; a new
    // URL, or one deleted and made again, hears how the request stands now.
    const same =
      current !== undefined &&
      current.status !== "deleted" &&
      targetOf(current.data.subscription) === targetOf(subscription);
    const notified = same ? current?.data.notified : undefined;
    const data: SubscriptionData = {
      subscription,
      rootTaskUrn,
      createdAt: current?.data.createdAt ?? now,
      ...(notified !== undefined ? { notified } : {}),
      // Sequence numbers go on: a delivery's id is never reused.
      sent: current?.data.sent ?? 0,
    };
    const record = {
      key,
      kind: SUB_KIND,
      parent: subsParent(rootTaskUrn),
      status: "open",
      updatedAt: now,
      data,
    };
    try {
      await state.transact([{ op: "put", record, expectedVersion: current?.version ?? 0 }]);
      return { ...record, version: (current?.version ?? 0) + 1 };
    } catch (e) {
      if (!(e instanceof ConflictError) || attempt >= 5) throw e;
    }
  }
}

/** A request's subscriptions (open and closed), read from the base records by parent. */
export async function subscriptionsOf(state: StateStore, rootTaskUrn: string): Promise<SubscriptionRecord[]> {
  const out: SubscriptionRecord[] = [];
  let cursor: string | undefined;
  do {
    const page = await state.byParent<SubscriptionData>(
      subsParent(rootTaskUrn),
      cursor === undefined ? { limit: 100 } : { limit: 100, cursor },
    );
    out.push(...page.items.filter((r) => r.kind === SUB_KIND));
    cursor = page.cursor;
  } while (cursor !== undefined);
  return out;
}

export async function openSubscriptions(
  state: StateStore,
  rootTaskUrn: string,
): Promise<SubscriptionRecord[]> {
  return (await subscriptionsOf(state, rootTaskUrn)).filter((r) => r.status === "open");
}

/** A request's subscriptions its owner has not deleted (open, or done: told how it ended). */
export async function liveSubscriptions(
  state: StateStore,
  rootTaskUrn: string,
): Promise<SubscriptionRecord[]> {
  return (await subscriptionsOf(state, rootTaskUrn)).filter((r) => r.status !== "deleted");
}

export async function getSubscription(
  state: StateStore,
  rootTaskUrn: string,
  id: string,
): Promise<SubscriptionRecord | undefined> {
  const r = await state.get<SubscriptionData>(subKey(rootTaskUrn, id));
  return r && r.status !== "deleted" ? r : undefined;
}

/** Deletes a subscription (A2A's delete): nothing more is recorded for it. False when there was none. */
export async function deleteSubscription(
  state: StateStore,
  clock: () => Date,
  rootTaskUrn: string,
  id: string,
): Promise<boolean> {
  for (let attempt = 0; ; attempt++) {
    const current = await state.get<SubscriptionData>(subKey(rootTaskUrn, id));
    if (!current || current.status === "deleted") return false;
    const { version: _, ...record } = current;
    try {
      await state.transact([
        {
          op: "put",
          record: { ...record, status: "deleted", updatedAt: clock().toISOString() },
          expectedVersion: current.version,
        },
      ]);
      return true;
    } catch (e) {
      if (!(e instanceof ConflictError) || attempt >= 5) throw e;
    }
  }
}
