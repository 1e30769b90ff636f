import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { EngineDeps } from "../engine/context.ts";
import { UnavailableError, ValidationError } from "../kernel/errors.ts";
import { ATTR, countDelivery, inSpan, SpanKind, tracingOn, withinTask } from "../kernel/tracing.ts";
import { DEFAULT_RETRY, nextAttempt, type RetrySchedule } from "./backoff.ts";
import { type ChatSurfaces, syncThread } from "./chat/sync.ts";
import {
  type AttemptResult,
  claimDelivery,
  type DeliveryData,
  type DeliveryRecord,
  type DeliveryStatus,
  type DueRef,
  duePages,
  getDelivery,
  isDue,
  listDeliveries,
  redriveDelivery,
  settleDelivery,
} from "./deliveries.ts";
import {
  DEFAULT_LANE_LIMITS,
  type LaneHold,
  type LaneLimits,
  lanesOf,
  releaseLanes,
  takeLanes,
} from "./lanes.ts";
import { reconcile } from "./reconcile.ts";
import { postDelivery } from "./sender.ts";
import { rotateSigningSecret, type SigningSecrets, signingSecrets } from "./signing.ts";
import {
  deleteSubscription,
  getSubscription,
  isChatSubscription,
  liveSubscriptions,
  SUB_KIND,
  type Subscription,
  type SubscriptionData,
  type SubscriptionRecord,
  subscribe,
} from "./subscriptions.ts";
import type { NotifyUrls } from "./urls.ts";

/**
 * The delivery service: the one API both runtimes drive (locally worker.ts, on AWS a rule, a queue
 * and the notify function). How to drive it:
 *
 *   const notify = new NotifyService({ deps: engine.deps, urls: notifyUrls(outbound, { allowLoopbackHttp }),
 *                                      surfaces: { slack: slackSurface(...), teams: teamsSurface(...) } });
 *   await notify.subscribe(rootTaskUrn, { kind: "callback", id, url, tenant });  // URL checked: ValidationError
 *   await notify.subscribe(rootTaskUrn, slackThread);   // a SlackThread / TeamsThread (notify/chat/types.ts): no URL
 *   await notify.reconcile(rootTaskUrn);   // on a wake-up (wakeups.ts): records deliveries, returns their ids
 *   await notify.sweep();                  // on start and now and then: every request with an open subscription
 *   await notify.attempt(id);              // one attempt at one delivery (its lanes taken (lanes.ts), claim,
 *                                          // POST or thread sync through the channel's surface (notify/chat/sync.ts),
 *                                          // record the result); "busy": its tenant's or host's lane is full
 *   await notify.dispatchDue();            // starts what is due and its lanes let through, without waiting
 *                                          // for the attempts (the local worker); notify.onSettled(...) after each
 *   await notify.runDue();                 // every delivery due now, waiting for each (tests, the CLI)
 *   await notify.idle();                   // no attempt of this service in flight
 *   await notify.deliveries("dead", tenant); await notify.redrive(id);   // operators
 *   notify.onRecorded((ids) => ...);       // deliveries just recorded (the local worker's kick, a queue's send)
 *
 * The channels check who may subscribe or see (the engine's policy) before they call it.
 *
 * On AWS (functions/notify.ts, shared/notify/queueing.ts): a rule with NOTIFY_WAKE_PATTERN
 * (wakeups.ts) sends the engine's events to a wake queue; the notify function calls
 * `reconcile(requestOfWakeup(event))` for each and queues the ids it returns on the delivery
 * queue, whose consumer (the same function) calls `attempt(id)` per message ("retry": queue it again with a delay until
 * the record's `nextAttemptAt`, at most 10 minutes, within SQS's 15; "skipped": another worker
 * holds it or it is not due: drop the message, the record keeps the schedule; "busy": its lanes
 * are full, queued again a little later, the longer it has waited the later). A schedule runs
 * `sweep()` and queues `dueDeliveries(state, now)`: that also picks up what was recorded where no
 * queue was at hand (the API function's `subscribe` records the first notification itself).
 */
export interface NotifySettings {
  retry: RetrySchedule;
  /** How long one attempt holds its delivery (longer than the attempt's timeout). */
  leaseMs: number;
  /** How long one POST may take. */
  attemptTimeoutMs: number;
  /** Webhook attempts in flight at once per tenant and per tenant's host, across workers (lanes.ts). */
  lanes: LaneLimits;
  /** Attempts one service runs at once (dispatchDue). */
  maxInFlight: number;
  /** How many due deliveries one dispatch looks through for ones whose lanes are free. */
  maxScan: number;
}

export const DEFAULT_NOTIFY_SETTINGS: NotifySettings = {
  retry: DEFAULT_RETRY,
  leaseMs: 60_000,
  attemptTimeoutMs: 10_000,
  lanes: DEFAULT_LANE_LIMITS,
  maxInFlight: 64,
  maxScan: 2_000,
};

export interface NotifyServiceOptions {
  /** The engine's dependencies (engine.deps): state, tasks, resources, clock, newId, log. */
  deps: EngineDeps;
  urls: NotifyUrls;
  settings?: Partial<NotifySettings>;
  /** Jitter's randomness (tests pin it). */
  random?: () => number;
  /** Who this worker is, in leases (default: a random id per service). */
  holder?: string;
  /**
   * The chat channels' outbound sides (Slack, Teams: their ChatSurface), for chat deliveries (the
   * thread sync, notify/chat/sync.ts), or a function that returns them (read at each chat attempt: the
   * settings load asynchronously and may change). A chat delivery whose channel has none is retried,
   * then dead, with an error saying what to configure.
   */
  surfaces?: ChatSurfaces | (() => ChatSurfaces | undefined | Promise<ChatSurfaces | undefined>);
}

export type AttemptOutcome = "delivered" | "retry" | "dead" | "skipped" | "lost" | "busy";

/** How one try went (a POST's result, or a thread sync's: `retryable` false ends it dead). */
type SendResult =
  | { delivered: true; status: number }
  | {
      delivered: false;
      error: string;
      status?: number;
      retryable?: boolean;
      retryAfterMs?: number;
      soon?: boolean;
    };

export class NotifyService {
  readonly deps: EngineDeps;
  readonly urls: NotifyUrls;
  readonly settings: NotifySettings;
  readonly #random: () => number;
  readonly #holder: string;
  readonly #listeners = new Set<(ids: readonly string[]) => void>();
  readonly #settledListeners = new Set<() => void>();
  readonly #surfaces: NotifyServiceOptions["surfaces"];
  /** This service's attempts in flight, by delivery id. */
  readonly #inFlight = new Map<string, Promise<AttemptOutcome>>();
  /** Attempts in flight per lane (a pre-check: the store's slots decide, lanes.ts). */
  readonly #laneUse = new Map<string, number>();
  /** A chat thread's deliveries run one after another: the last one started, per subscription. */
  readonly #threads = new Map<string, Promise<unknown>>();

  constructor(options: NotifyServiceOptions) {
    this.deps = options.deps;
    this.urls = options.urls;
    this.settings = { ...DEFAULT_NOTIFY_SETTINGS, ...options.settings };
    this.#random = options.random ?? Math.random;
    this.#holder = options.holder ?? randomUUID();
    this.#surfaces = options.surfaces;
  }

  /** Called after each attempt dispatchDue started ends (its lanes are free again); returns a function that stops it. */
  onSettled(listener: () => void): () => void {
    this.#settledListeners.add(listener);
    return () => this.#settledListeners.delete(listener);
  }

  /** Called with the ids of deliveries as they are recorded; returns a function that stops it. */
  onRecorded(listener: (ids: readonly string[]) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Why `url` may not take notifications (a caller's error, before anything is written), or undefined. */
  urlRefusal(url: string): string | undefined {
    return this.urls.refusal(url);
  }

  /**
   * Subscribes to a request (its root task) and records at once what it should hear now (how the
   * request stands). ValidationError for a URL the outbound guard refuses outright.
   */
  async subscribe(rootTaskUrn: string, subscription: Subscription): Promise<SubscriptionRecord> {
    // A chat thread has no URL (the Teams channel checks its service URL before it subscribes).
    if (!isChatSubscription(subscription)) {
      const refused = this.urls.refusal(subscription.url);
      if (refused) throw new ValidationError(`The webhook URL is refused: ${refused}`);
    }
    const record = await subscribe(this.deps.state, this.deps.clock, rootTaskUrn, subscription);
    await this.reconcile(rootTaskUrn, [record.key]);
    return record;
  }

  subscription(rootTaskUrn: string, id: string): Promise<SubscriptionRecord | undefined> {
    return getSubscription(this.deps.state, rootTaskUrn, id);
  }

  subscriptions(rootTaskUrn: string): Promise<SubscriptionRecord[]> {
    return liveSubscriptions(this.deps.state, rootTaskUrn);
  }

  unsubscribe(rootTaskUrn: string, id: string): Promise<boolean> {
    return deleteSubscription(this.deps.state, this.deps.clock, rootTaskUrn, id);
  }

  /** Records the deliveries a request's move calls for (reconcile.ts); returns their ids. */
  async reconcile(rootTaskUrn: string, known: readonly string[] = []): Promise<string[]> {
    const ids = await reconcile(this.deps, rootTaskUrn, known);
    if (ids.length > 0) for (const listener of this.#listeners) listener(ids);
    return ids;
  }

  /**
   * Reconciles every request with an open subscription (found through the status index, each
   * confirmed on its base record): what a lost wake-up missed is recorded now. Returns the ids recorded.
   */
  async sweep(): Promise<string[]> {
    const roots = new Set<string>();
    let cursor: string | undefined;
    do {
      const page = await this.deps.state.byStatus<SubscriptionData>(
        SUB_KIND,
        "open",
        cursor === undefined ? { limit: 100 } : { limit: 100, cursor },
      );
      for (const r of page.items) roots.add(r.data.rootTaskUrn);
      cursor = page.cursor;
    } while (cursor !== undefined);
    const recorded: string[] = [];
    for (const root of roots) {
      try {
        recorded.push(...(await this.reconcile(root)));
      } catch (error) {
        this.deps.log.error("notify: reconciling a request failed", {
          rootTaskUrn: root,
          error: error as Error,
        });
      }
    }
    return recorded;
  }

  /**
   * One attempt at a delivery: claimed (a conditional write with a lease), POSTed, and its result
   * recorded (delivered; pending again with the next time; dead past the retry window).
   * `skipped`: not due or held by another worker; `lost`: the lease ran out before the result was
   * written (another worker had taken it over).
   */
  async attempt(id: string): Promise<AttemptOutcome> {
    let claimed: DeliveryRecord | undefined;
    let hold: LaneHold | undefined;
    try {
      const current = await getDelivery(this.deps.state, id);
      const now = this.deps.clock();
      if (!current || !isDue(current, now)) return "skipped";
      hold = await takeLanes(
        this.deps.state,
        lanesOf(current.data, this.settings.lanes),
        this.#holder,
        now,
        this.settings.leaseMs,
      );
      if (!hold) return "busy";
      claimed = await claimDelivery(this.deps.state, id, this.#holder, now, this.settings.leaseMs, current);
    } catch (e) {
      if (hold) await this.#release(hold);
      // Another process holds the store's lock for now (two on one data folder): a later run takes it.
      if (e instanceof UnavailableError) return "skipped";
      throw e;
    }
    if (!claimed) {
      await this.#release(hold);
      return "skipped";
    }
    try {
      return await this.#attemptClaimed(id, claimed);
    } finally {
      await this.#release(hold);
    }
  }

  /** Gives a hold's lane slots back; a store that does not answer leaves them to their lease's end. */
  async #release(hold: LaneHold): Promise<void> {
    try {
      await releaseLanes(this.deps.state, hold, this.deps.clock());
    } catch (error) {
      this.deps.log.warn("notify: lane slots not given back; they are free when their lease ends", {
        error: error as Error,
      });
    }
  }

  async #attemptClaimed(id: string, claimed: DeliveryRecord): Promise<AttemptOutcome> {
    if (!tracingOn()) return this.#tryOnce(id, claimed);
    // A span of the request's root task: the webhook POSTed in it carries its traceparent.
    const d = claimed.data;
    const root = await this.deps.tasks.view(d.rootTaskUrn);
    return withinTask(root, () =>
      inSpan(
        `deliver ${d.channel}`,
        {
          kind: SpanKind.PRODUCER,
          attributes: {
            [ATTR.channel]: d.channel,
            [ATTR.taskUrn]: d.rootTaskUrn,
            [ATTR.tenant]: d.tenant,
            "arbor.delivery.id": id,
            "arbor.delivery.attempt": d.attempts + 1,
          },
        },
        async (span) => {
          const outcome = await this.#tryOnce(id, claimed);
          span.set("arbor.delivery.outcome", outcome);
          if (outcome === "delivered") countDelivery("sent", d.channel);
          else if (outcome === "retry") countDelivery("retried", d.channel);
          else if (outcome === "dead") {
            countDelivery("dead", d.channel);
            span.fail("dead");
          }
          return outcome;
        },
      ),
    );
  }

  async #tryOnce(id: string, claimed: DeliveryRecord): Promise<AttemptOutcome> {
    const d = claimed.data;
    const posted = await this.#send(d);
    const now = this.deps.clock();
    let result: AttemptResult = posted;
    if (!posted.delivered) {
      // Not retryable (a chat platform said the thread is gone): dead at once.
      // A thread another attempt holds (`soon`): again shortly, no backoff (it is no failure).
      const next =
        posted.retryable === false
          ? undefined
          : posted.soon
            ? now
            : nextAttempt(this.settings.retry, {
                attempts: d.attempts,
                retryFrom: new Date(d.retryFrom),
                now,
                random: this.#random,
              });
      // The platform's Retry-After is kept when it is later than the schedule (within the window).
      const after = posted.retryAfterMs !== undefined ? now.getTime() + posted.retryAfterMs : undefined;
      const at = next && after !== undefined && after > next.getTime() ? new Date(after) : next;
      result = {
        delivered: false,
        error: posted.error,
        ...(posted.status !== undefined ? { status: posted.status } : {}),
        ...(at ? { nextAttemptAt: at } : {}),
      };
    }
    const kept = await this.#settle(claimed, result, now);
    const outcome: AttemptOutcome = !kept
      ? "lost"
      : result.delivered
        ? "delivered"
        : result.nextAttemptAt
          ? "retry"
          : "dead";
    const log = outcome === "dead" ? this.deps.log.error : this.deps.log.info;
    log.call(this.deps.log, `notify: delivery ${outcome}`, {
      deliveryId: id,
      rootTaskUrn: d.rootTaskUrn,
      attempts: d.attempts,
      ...(posted.delivered ? {} : { error: posted.error }),
    });
    return outcome;
  }

  /** One try: a webhook is POSTed (sender.ts), a chat thread synced through its surface (notify/chat/sync.ts). */
  async #send(d: DeliveryData): Promise<SendResult> {
    if (d.channel === "slack" || d.channel === "teams") {
      const surfaces = typeof this.#surfaces === "function" ? await this.#surfaces() : this.#surfaces;
      const synced = await syncThread(this.deps, d, surfaces, {
        // Per attempt: two attempts of this worker (one batch) on one thread never sync it at once.
        holder: `${this.#holder}/${d.id}/${d.attempts}`,
        leaseMs: this.settings.leaseMs,
      });
      return synced.delivered ? { delivered: true, status: 200 } : synced;
    }
    let secrets: SigningSecrets | undefined;
    if (d.signed) secrets = await signingSecrets(this.deps.state, d.tenant, this.deps.clock, d.signer);
    return postDelivery(this.urls.fetch, d, {
      now: this.deps.clock(),
      timeoutMs: this.settings.attemptTimeoutMs,
      secrets,
    });
  }

  /**
   * Records the attempt's result, trying again while the store is busy (another process's write):
   * a result not recorded leaves the delivery to be sent again once its lease ends.
   */
  async #settle(claimed: DeliveryRecord, result: AttemptResult, now: Date): Promise<boolean> {
    for (let i = 1; ; i++) {
      try {
        return await settleDelivery(this.deps.state, claimed, result, now);
      } catch (e) {
        if (!(e instanceof UnavailableError) || i >= 10) throw e;
        await sleep(50 * i);
      }
    }
  }

  /**
   * Starts an attempt at every delivery due now whose lanes have room, up to `maxInFlight` of this
   * service's at once, and returns how many it started without waiting for them (each one's end
   * calls the onSettled listeners: the local worker dispatches again then). It looks through up to
   * `maxScan` due deliveries, so a tenant whose receivers hang and whose deliveries pile up holds
   * back only its own: the others' further down the list start. A chat thread's deliveries run
   * one after another (it is synced under one lease: at once, all but one would only find it busy).
   */
  async dispatchDue(): Promise<number> {
    let started = 0;
    let scanned = 0;
    for await (const page of duePages(this.deps.state, this.deps.clock(), 100)) {
      for (const ref of page) {
        if (this.#inFlight.size >= this.settings.maxInFlight) return started;
        if (this.#inFlight.has(ref.id) || this.#lanesFull(ref)) continue;
        this.#start(ref);
        started++;
      }
      scanned += page.length;
      if (scanned >= this.settings.maxScan) break;
    }
    return started;
  }

  /** Whether this service's own attempts already fill one of the delivery's lanes. */
  #lanesFull(ref: DueRef): boolean {
    return lanesOf(ref, this.settings.lanes).some((l) => (this.#laneUse.get(l.key) ?? 0) >= l.limit);
  }

  #start(ref: DueRef): void {
    const lanes = lanesOf(ref, this.settings.lanes);
    for (const l of lanes) this.#laneUse.set(l.key, (this.#laneUse.get(l.key) ?? 0) + 1);
    const chat = ref.channel === "slack" || ref.channel === "teams";
    const before = chat ? this.#threads.get(ref.subscriptionKey) : undefined;
    const run = (async () => {
      await before?.catch(() => undefined);
      return this.attempt(ref.id);
    })();
    if (chat) this.#threads.set(ref.subscriptionKey, run);
    const done = run
      .catch((error: unknown): AttemptOutcome => {
        this.deps.log.error("notify: a delivery attempt failed", {
          deliveryId: ref.id,
          error: error as Error,
        });
        return "skipped";
      })
      .finally(() => {
        this.#inFlight.delete(ref.id);
        for (const l of lanes) {
          const n = (this.#laneUse.get(l.key) ?? 1) - 1;
          if (n > 0) this.#laneUse.set(l.key, n);
          else this.#laneUse.delete(l.key);
        }
        if (chat && this.#threads.get(ref.subscriptionKey) === run) this.#threads.delete(ref.subscriptionKey);
        for (const listener of this.#settledListeners) listener();
      });
    this.#inFlight.set(ref.id, done);
  }

  /** Resolves once no attempt this service started is in flight. */
  async idle(): Promise<void> {
    while (this.#inFlight.size > 0) await Promise.all([...this.#inFlight.values()]);
  }

  /**
   * Attempts every delivery due now and waits for each; returns how many moved (delivered, retried,
   * dead). Deliveries held back by a full lane are tried again as the attempts before them end; a
   * lane full of another worker's attempts is waited for (a little at a time, for at most a lease).
   */
  async runDue(): Promise<number> {
    let attempted = 0;
    const waitUntil = Date.now() + this.settings.leaseMs;
    for (;;) {
      await this.dispatchDue();
      const outcomes = await Promise.all([...this.#inFlight.values()]);
      if (outcomes.length === 0) return attempted;
      const moved = outcomes.filter((o) => o !== "skipped" && o !== "busy").length;
      attempted += moved;
      if (moved > 0) continue;
      if (!outcomes.includes("busy") || Date.now() > waitUntil) return attempted;
      await sleep(25);
    }
  }

  deliveries(
    status: DeliveryStatus,
    options: { tenant?: string; limit?: number; cursor?: string } = {},
  ): Promise<{ items: DeliveryRecord[]; cursor?: string }> {
    return listDeliveries(this.deps.state, status, options);
  }

  delivery(id: string): Promise<DeliveryRecord | undefined> {
    return getDelivery(this.deps.state, id);
  }

  /** Sends a dead delivery again (a new retry window); the worker is kicked. */
  async redrive(id: string): Promise<DeliveryRecord> {
    const record = await redriveDelivery(this.deps.state, id, this.deps.clock());
    for (const listener of this.#listeners) listener([id]);
    return record;
  }

  /** Redrives every dead delivery (of one tenant, when given); returns their ids. */
  async redriveAll(tenant?: string): Promise<string[]> {
    const ids: string[] = [];
    const seen = new Set<string>();
    let cursor: string | undefined;
    do {
      const page = await this.deliveries("dead", {
        limit: 100,
        ...(tenant ? { tenant } : {}),
        ...(cursor ? { cursor } : {}),
      });
      for (const r of page.items) {
        if (seen.has(r.data.id)) continue;
        seen.add(r.data.id);
        const current = await getDelivery(this.deps.state, r.data.id);
        if (current?.status !== "dead") continue; // the index lags: the base record decides
        await this.redrive(r.data.id);
        ids.push(r.data.id);
      }
      cursor = page.cursor;
    } while (cursor !== undefined);
    return ids;
  }

  /**
   * The callback signing secrets of one key (`signer`: its actor id), created on first need; without
   * a signer, the tenant's, which signs the callbacks recorded before secrets were per key.
   */
  callbackSecrets(tenant: string, signer?: string): Promise<SigningSecrets> {
    return signingSecrets(this.deps.state, tenant, this.deps.clock, signer);
  }

  rotateCallbackSecret(tenant: string, signer?: string): Promise<SigningSecrets> {
    return rotateSigningSecret(this.deps.state, tenant, this.deps.clock, signer);
  }
}
