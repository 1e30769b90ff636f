import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConflictError, NotFoundError, ValidationError } from "../../shared/kernel/errors.ts";
import { DEFAULT_RETRY, nextAttempt } from "../../shared/notify/backoff.ts";
import { getThread, THREAD_KIND, takeThread } from "../../shared/notify/chat/thread-record.ts";
import {
  claimDelivery,
  type DeliveryData,
  deliveryId,
  dueDeliveries,
  getDelivery,
  listDeliveries,
  newDeliveryOp,
  redriveDelivery,
  settleDelivery,
} from "../../shared/notify/deliveries.ts";
import { lanesOf, releaseLanes, takeLanes } from "../../shared/notify/lanes.ts";
import { releaseOrphanedLeases } from "../../shared/notify/orphans.ts";
import { rotateSigningSecret, signingSecrets } from "../../shared/notify/signing.ts";
import {
  deleteSubscription,
  getSubscription,
  openSubscriptions,
  SUB_KIND,
  subscribe,
} from "../../shared/notify/subscriptions.ts";
import type { StateStore } from "../../shared/ports/state-store.ts";

/**
 * The notify path's records on a state store adapter (every adapter runs it): deliveries recorded
 * once, claimed by one worker at a time with a lease, retried on the backoff schedule until dead
 * (at least an hour, the clock under the test's control), redriven; subscriptions; the signing
 * secret created once. Index reads (due, listings, byParent) come after `settleIndexes` where the
 * store's indexes lag; every decision is on a base record.
 */
export interface NotifyRecordsFixture {
  store: StateStore;
  cleanup(): Promise<void>;
  settleIndexes?(): void;
}

const ROOT = "cld:common.Tenant.acme/common.Conversation.c1/common.Message.m1/plan.Task.request";
const MINUTE = 60_000;

export function notifyRecordsContract(name: string, setup: () => Promise<NotifyRecordsFixture>): void {
  describe(`notify records: ${name}`, () => {
    let f: NotifyRecordsFixture;
    let now: number;
    const clock = () => new Date(now);
    const settle = () => f.settleIndexes?.();

    beforeEach(async () => {
      f = await setup();
      now = Date.parse("2026-06-01T09:00:00.000Z");
    });
    afterEach(async () => {
      await f.cleanup();
    });

    const delivery = (seq: number, tenant = "acme"): Parameters<typeof newDeliveryOp>[0] => ({
      id: deliveryId(`notify-sub#${ROOT}#hook`, seq),
      channel: "callback",
      tenant,
      rootTaskUrn: ROOT,
      subscriptionKey: `notify-sub#${ROOT}#hook`,
      seq,
      stateKey: seq === 1 ? "working" : "completed",
      url: "https://hooks.example.com/arbor",
      body: "{}",
      contentType: "application/json",
      headers: {},
      signed: true,
    });

    it("records a delivery once: the same notification recorded again is a conflict, and nothing changes", async () => {
      const d = delivery(1);
      await f.store.transact([newDeliveryOp(d, clock())]);
      now += 1000;
      await expect(f.store.transact([newDeliveryOp(d, clock())])).rejects.toBeInstanceOf(ConflictError);
      const record = await getDelivery(f.store, d.id);
      expect(record).toMatchObject({ version: 1, status: "pending", data: { attempts: 0 } });
      expect(record?.data.createdAt).toBe("2026-06-01T09:00:00.000Z");
    });

    it("one claim at a time: the lease keeps others out until it ends, and the late worker's result is not kept", async () => {
      const d = delivery(1);
      await f.store.transact([newDeliveryOp(d, clock())]);
      settle();
      expect(await dueDeliveries(f.store, clock())).toEqual([d.id]);
      const claims = await Promise.all([
        claimDelivery(f.store, d.id, "a", clock(), MINUTE),
        claimDelivery(f.store, d.id, "b", clock(), MINUTE),
      ]);
      const [won] = claims.filter((c) => c !== undefined);
      expect(claims.filter((c) => c !== undefined)).toHaveLength(1);
      expect(won).toMatchObject({ status: "sending", data: { attempts: 1 } });
      now += 30_000;
      expect(await claimDelivery(f.store, d.id, "c", clock(), MINUTE)).toBeUndefined();
      settle();
      expect(await dueDeliveries(f.store, clock())).toEqual([]);
      // The holder went quiet past its lease: another worker takes the delivery over.
      now += 31_000;
      settle();
      expect(await dueDeliveries(f.store, clock())).toEqual([d.id]);
      const taken = await claimDelivery(f.store, d.id, "c", clock(), MINUTE);
      expect(taken).toMatchObject({ data: { attempts: 2, lease: { holder: "c" } } });
      // The first holder's result comes too late: not kept; the second's is.
      expect(
        await settleDelivery(
          f.store,
          won as NonNullable<typeof won>,
          { delivered: true, status: 200 },
          clock(),
        ),
      ).toBe(false);
      expect(
        await settleDelivery(
          f.store,
          taken as NonNullable<typeof taken>,
          { delivered: true, status: 204 },
          clock(),
        ),
      ).toBe(true);
      const delivered = await getDelivery(f.store, d.id);
      expect(delivered).toMatchObject({ status: "delivered", data: { attempts: 2, lastStatus: 204 } });
      expect(Date.parse(delivered?.expiresAt ?? "")).toBeGreaterThanOrEqual(
        now + 30 * 24 * 60 * MINUTE - 1000,
      );
      expect(await claimDelivery(f.store, d.id, "a", clock(), MINUTE)).toBeUndefined();
    });

    it("retries on the backoff schedule for at least an hour, then is dead; a redrive sends it again", async () => {
      const d = delivery(2);
      await f.store.transact([newDeliveryOp(d, clock())]);
      const delays: number[] = [];
      for (let i = 0; i < 100; i++) {
        const c = await claimDelivery(f.store, d.id, "w", clock(), MINUTE);
        expect(c, `attempt ${i + 1} is due`).toBeDefined();
        const claimed = c as NonNullable<typeof c>;
        const next = nextAttempt(DEFAULT_RETRY, {
          attempts: claimed.data.attempts,
          retryFrom: new Date(claimed.data.retryFrom),
          now: clock(),
          random: () => 0.5,
        });
        await settleDelivery(
          f.store,
          claimed,
          { delivered: false, error: "HTTP 503", status: 503, ...(next ? { nextAttemptAt: next } : {}) },
          clock(),
        );
        if (!next) break;
        delays.push(next.getTime() - now);
        // Not due a moment before its time; due at it.
        now = next.getTime() - 1;
        expect(await claimDelivery(f.store, d.id, "w", clock(), MINUTE)).toBeUndefined();
        now = next.getTime();
      }
      const dead = await getDelivery(f.store, d.id);
      expect(dead?.status).toBe("dead");
      expect(
        Date.parse(dead?.data.deadAt ?? "") - Date.parse(dead?.data.createdAt ?? ""),
      ).toBeGreaterThanOrEqual(60 * MINUTE);
      expect(dead?.data).toMatchObject({ lastError: "HTTP 503", lastStatus: 503 });
      expect(dead?.data.attempts).toBeGreaterThanOrEqual(8);
      // Growing delays up to the cap (the last is cut to the end of the hour).
      const capped = delays.slice(0, -1);
      expect(capped).toEqual([...capped].sort((x, y) => x - y));
      expect(Math.max(...delays)).toBeLessThanOrEqual(DEFAULT_RETRY.maxDelayMs);
      settle();
      expect(await dueDeliveries(f.store, new Date(now + 24 * 60 * MINUTE))).toEqual([]);
      expect((await listDeliveries(f.store, "dead")).items.map((r) => r.data.id)).toEqual([d.id]);
      expect((await listDeliveries(f.store, "dead", { tenant: "beta" })).items).toEqual([]);

      now += 5 * MINUTE;
      const redriven = await redriveDelivery(f.store, d.id, clock());
      expect(redriven).toMatchObject({ status: "pending" });
      expect(redriven.data.retryFrom).toBe(clock().toISOString());
      expect(redriven.data).not.toHaveProperty("deadAt");
      settle();
      expect(await dueDeliveries(f.store, clock())).toEqual([d.id]);
      await expect(redriveDelivery(f.store, d.id, clock())).rejects.toBeInstanceOf(ValidationError);
      await expect(redriveDelivery(f.store, "dlv_nosuch", clock())).rejects.toBeInstanceOf(NotFoundError);
    });

    it("subscriptions: open; replaced under the same id (the same URL keeps what it was told, a new one does not); deleted", async () => {
      const sub = {
        kind: "callback" as const,
        id: "hook",
        url: "https://hooks.example.com/a",
        tenant: "acme",
      };
      const first = await subscribe(f.store, clock, ROOT, sub);
      expect(first).toMatchObject({ kind: SUB_KIND, status: "open", data: { sent: 0, rootTaskUrn: ROOT } });
      // What reconcile writes when it records a delivery: told "working", one sent.
      const { version, ...record } = first;
      await f.store.transact([
        {
          op: "put",
          record: { ...record, data: { ...first.data, notified: "working", sent: 1 } },
          expectedVersion: version,
        },
      ]);
      const kept = await subscribe(f.store, clock, ROOT, sub);
      expect(kept.data).toMatchObject({ notified: "working", sent: 1 });
      const moved = await subscribe(f.store, clock, ROOT, { ...sub, url: "https://hooks.example.com/b" });
      expect(moved.data).toMatchObject({ sent: 1, subscription: { url: "https://hooks.example.com/b" } });
      expect(moved.data.notified).toBeUndefined(); // a new receiver hears how the request stands
      settle();
      expect((await openSubscriptions(f.store, ROOT)).map((r) => r.data.subscription.id)).toEqual(["hook"]);
      expect(await deleteSubscription(f.store, clock, ROOT, "hook")).toBe(true);
      expect(await deleteSubscription(f.store, clock, ROOT, "hook")).toBe(false);
      expect(await getSubscription(f.store, ROOT, "hook")).toBeUndefined();
      settle();
      expect(await openSubscriptions(f.store, ROOT)).toEqual([]);
      await expect(subscribe(f.store, clock, ROOT, { ...sub, url: "" } as typeof sub)).rejects.toBeInstanceOf(
        ValidationError,
      );
    });

    it("the signing secret: created once though two ask at once; rotation keeps the old one for a while", async () => {
      const [a, b] = await Promise.all([
        signingSecrets(f.store, "acme", clock),
        signingSecrets(f.store, "acme", clock),
      ]);
      expect(a.current.secret).toBe(b.current.secret);
      expect((await signingSecrets(f.store, "beta", clock)).current.secret).not.toBe(a.current.secret);
      const rotated = await rotateSigningSecret(f.store, "acme", clock);
      expect(rotated.current.secret).not.toBe(a.current.secret);
      expect(rotated.previous?.secret).toBe(a.current.secret);
      expect(Date.parse(rotated.previous?.until ?? "")).toBeGreaterThan(now);
      expect((await signingSecrets(f.store, "acme", clock)).current.secret).toBe(rotated.current.secret);
    });

    it("lists the deliveries due oldest first, and leaves those not yet due", async () => {
      const early = delivery(1);
      const late = delivery(2, "beta");
      await f.store.transact([newDeliveryOp(early, clock())]);
      now += 1000;
      await f.store.transact([newDeliveryOp(late, clock())]);
      const c = await claimDelivery(f.store, late.id, "w", clock(), MINUTE);
      await settleDelivery(
        f.store,
        c as NonNullable<typeof c>,
        { delivered: false, error: "HTTP 500", nextAttemptAt: new Date(now + 10 * MINUTE) },
        clock(),
      );
      settle();
      expect(await dueDeliveries(f.store, clock())).toEqual([early.id]);
      expect(await dueDeliveries(f.store, new Date(now + 10 * MINUTE))).toEqual([early.id, late.id]);
      const pending = (await listDeliveries(f.store, "pending", { tenant: "beta" })).items as {
        data: DeliveryData;
      }[];
      expect(pending.map((r) => r.data.id)).toEqual([late.id]);
    });

    it("a chat thread: subscribed with no URL (the same thread keeps what it was told)", async () => {
      const thread = {
        kind: "slack" as const,
        id: "slack-T1-C1-1700000000.000100",
        tenant: "acme",
        team: "T1",
        channel: "C1",
        threadTs: "1700000000.000100",
      };
      const first = await subscribe(f.store, clock, ROOT, thread);
      const { version, ...record } = first;
      await f.store.transact([
        {
          op: "put",
          record: { ...record, data: { ...first.data, notified: "working#abc", sent: 1 } },
          expectedVersion: version,
        },
      ]);
      expect((await subscribe(f.store, clock, ROOT, thread)).data).toMatchObject({
        notified: "working#abc",
        sent: 1,
        subscription: thread,
      });
      // Another thread under the id (another message's thread) hears how the request stands.
      const moved = await subscribe(f.store, clock, ROOT, { ...thread, threadTs: "1700000000.000200" });
      expect(moved.data.notified).toBeUndefined();
      await expect(
        subscribe(f.store, clock, ROOT, { ...thread, team: "" } as typeof thread),
      ).rejects.toBeInstanceOf(ValidationError);
      // Its id is the thread's: a webhook under it (an A2A push config naming it) is refused.
      await expect(
        subscribe(f.store, clock, ROOT, {
          kind: "callback",
          id: thread.id,
          url: "https://x.example/",
          tenant: "acme",
        }),
      ).rejects.toBeInstanceOf(ConflictError);
      expect((await getSubscription(f.store, ROOT, thread.id))?.data.subscription.kind).toBe("slack");
    });

    it("a chat thread's record: one lease at a time, taken over once it ends; the late holder's writes fail", async () => {
      const about = { rootTaskUrn: ROOT, channel: "slack" as const };
      const question = `${ROOT}/uip.Interaction.q1`;
      const a = await takeThread(f.store, "sub-1", about, "a", clock, MINUTE);
      if (!("held" in a)) throw new Error("the first holder must get the thread");
      a.held.thread.data.progress = "1700000000.000300";
      a.held.thread.data.questions[question] = { messageId: "1700000000.000400", answered: false };
      await a.held.save();
      expect(await takeThread(f.store, "sub-1", about, "b", clock, MINUTE)).toEqual({
        busy: new Date(now + MINUTE).toISOString(),
      });
      now += MINUTE + 1;
      const b = await takeThread(f.store, "sub-1", about, "b", clock, MINUTE);
      if (!("held" in b)) throw new Error("the lease ran out: the thread is b's");
      expect(b.held.thread.data).toMatchObject({
        progress: "1700000000.000300",
        questions: { [question]: { messageId: "1700000000.000400", answered: false } },
        appliedSeq: 0,
      });
      a.held.thread.data.answer = "late";
      await expect(a.held.save()).rejects.toBeInstanceOf(ConflictError);
      b.held.thread.data.answer = "1700000000.000500";
      b.held.thread.data.appliedSeq = 7;
      await b.held.release();
      const stored = await getThread(f.store, "sub-1");
      expect(stored).toMatchObject({
        kind: THREAD_KIND,
        status: "done",
        data: { answer: "1700000000.000500", appliedSeq: 7 },
      });
      expect(stored?.data.lease).toBeUndefined();
      // Released: anyone takes it at once.
      expect("held" in (await takeThread(f.store, "sub-1", about, "c", clock, MINUTE))).toBe(true);
    });

    it("leases left by a process that is gone are let go at once by the one that takes over", async () => {
      const about = { rootTaskUrn: ROOT, channel: "slack" as const };
      await f.store.transact([newDeliveryOp(delivery(1), clock())]);
      await f.store.transact([newDeliveryOp(delivery(2), clock())]);
      const [one, two] = [deliveryId(`notify-sub#${ROOT}#hook`, 1), deliveryId(`notify-sub#${ROOT}#hook`, 2)];
      expect(await claimDelivery(f.store, one, "gone", clock(), MINUTE)).toBeDefined();
      const held = await takeThread(f.store, "sub-1", about, "gone", clock, MINUTE);
      if (!("held" in held)) throw new Error("the first holder must get the thread");
      await held.held.save();
      // Still held: nobody else may take them...
      expect(await claimDelivery(f.store, one, "next", clock(), MINUTE)).toBeUndefined();
      expect("busy" in (await takeThread(f.store, "sub-1", about, "next", clock, MINUTE))).toBe(true);
      settle();
      // ...until the process that knows it is alone lets go of them (the pending one is untouched).
      expect(await releaseOrphanedLeases(f.store, clock())).toBe(2);
      expect((await getDelivery(f.store, two))?.status).toBe("pending");
      settle();
      expect(await dueDeliveries(f.store, clock())).toEqual(expect.arrayContaining([one, two]));
      const claimed = await claimDelivery(f.store, one, "next", clock(), MINUTE);
      expect(claimed?.data).toMatchObject({ attempts: 2, lease: { holder: "next" } });
      expect("held" in (await takeThread(f.store, "sub-1", about, "next", clock, MINUTE))).toBe(true);
      // A lease that ran out needs no letting go.
      settle();
      expect(await releaseOrphanedLeases(f.store, new Date(now + 2 * MINUTE))).toBe(0);
    });

    it("lanes: a tenant's and a host's attempts in flight are bounded across workers, given back, taken over when their lease runs out", async () => {
      const limits = { perTenant: 3, perHost: 2 };
      const to = (tenant: string, url: string) => lanesOf({ channel: "callback", tenant, url }, limits);
      const slow = to("beta", "https://slow.example/hook");
      // Six workers race for beta's slow host at once: two get a slot, nothing is held by half.
      const raced = await Promise.all(
        ["w1", "w2", "w3", "w4", "w5", "w6"].map((w) => takeLanes(f.store, slow, w, clock(), MINUTE)),
      );
      const held = raced.filter((h) => h !== undefined);
      expect(held).toHaveLength(2);
      // Beta's third attempt goes to another host: the tenant's lane has one slot left.
      const other = await takeLanes(
        f.store,
        to("beta", "https://other.example:8443/x"),
        "w7",
        clock(),
        MINUTE,
      );
      expect(other).toBeDefined();
      expect(
        await takeLanes(f.store, to("beta", "https://third.example/"), "w8", clock(), MINUTE),
      ).toBeUndefined();
      // Another tenant's lanes are its own, even to the same host.
      expect(
        await takeLanes(f.store, to("acme", "https://slow.example/hook"), "w9", clock(), MINUTE),
      ).toBeDefined();
      // Chat deliveries run in no lane.
      expect(lanesOf({ channel: "slack", tenant: "beta", url: "slack:sub" }, limits)).toEqual([]);
      // Given back: the slot is free again.
      await releaseLanes(f.store, held[0] as NonNullable<(typeof held)[0]>, clock());
      expect(await takeLanes(f.store, slow, "w10", clock(), MINUTE)).toBeDefined();
      expect(await takeLanes(f.store, slow, "w11", clock(), MINUTE)).toBeUndefined();
      // A holder that died: its slots are free once their lease ran out...
      now += 2 * MINUTE;
      const after = await takeLanes(f.store, slow, "w12", clock(), MINUTE);
      expect(after).toBeDefined();
      // ...and the late holder's release leaves the new holder's slot alone.
      await releaseLanes(f.store, held[1] as NonNullable<(typeof held)[1]>, clock());
      await releaseLanes(f.store, other as NonNullable<typeof other>, clock());
      settle();
      // Or at once, by the local server that starts again alone on the state.
      expect(await releaseOrphanedLeases(f.store, clock())).toBeGreaterThanOrEqual(1);
      expect(await takeLanes(f.store, slow, "w13", clock(), MINUTE)).toBeDefined();
    });
  });
}
