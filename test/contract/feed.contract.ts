import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { eventIdFor, type StoredEvent, type TaskEvent } from "../../shared/domain/events.ts";
import type { Urn } from "../../shared/domain/urn.ts";
import {
  FEED_BATCH,
  type FeedDeps,
  feedCursorKey,
  feedOrder,
  feedStreamOf,
  reconcile,
  rootTaskOf,
  type StoredCursor,
} from "../../shared/notify/feed.ts";
import type { ObjectStore } from "../../shared/ports/object-store.ts";
import type { StateStore } from "../../shared/ports/state-store.ts";
import { ResourceStore } from "../../shared/store/resource-store.ts";
import { TaskLog } from "../../shared/store/task-log.ts";
import {
  interactionRequested,
  interactionResponded,
  taskCompleted,
  taskCreated,
  taskStarted,
  taskUrn,
} from "../fixtures/event-builders.ts";

/**
 * The feed of a request (shared/notify/feed.ts) on a state store: whatever the adapter, however
 * often and however concurrently it is reconciled, and wherever a reconciler dies, every task
 * event of the tree is in the feed exactly once, in a stable order.
 */
export interface FeedFixture {
  state: StateStore;
  objects: ObjectStore;
  cleanup: () => Promise<void>;
  /** Index reads answered stale so far, where the adapter's indexes lag (test/peers/lagging-dynamo.ts). */
  staleIndexReads?: () => number;
}

/** A store whose next transactions fail: before they commit (`before`) or after (`after`: a crash once written). */
function faulty(inner: StateStore) {
  const faults: ("before" | "after")[] = [];
  let transactions = 0;
  let reads = 0;
  const store = new Proxy(inner, {
    get(target, prop, receiver) {
      if (prop === "transact")
        return async (ops: Parameters<StateStore["transact"]>[0]) => {
          transactions++;
          const fault = faults.shift();
          if (fault === "before") throw new Error("simulated crash before the commit");
          const result = await target.transact(ops);
          if (fault === "after") throw new Error("simulated crash after the commit");
          return result;
        };
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (prop === "get" || prop === "readStream" || prop === "streamVersion" || prop === "byParent")
          reads++;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return {
    store,
    fail: (...next: ("before" | "after")[]) => faults.push(...next),
    counts: () => ({ transactions, reads }),
  };
}

export function feedContract(name: string, setup: () => Promise<FeedFixture>): void {
  describe(`the feed of a request on ${name}`, () => {
    let fx: FeedFixture;
    let wrapped: ReturnType<typeof faulty>;
    let deps: FeedDeps;
    let tasks: TaskLog;
    beforeEach(async () => {
      fx = await setup();
      wrapped = faulty(fx.state);
      tasks = new TaskLog(fx.state);
      deps = {
        state: wrapped.store,
        tasks: new TaskLog(wrapped.store),
        resources: new ResourceStore(fx.objects),
      };
    });
    afterEach(() => fx.cleanup());

    const root = taskUrn(`root${Math.random().toString(36).slice(2, 8)}`);
    /** Records an event of a task (its Task resource first, as the engine writes it). */
    const record = async (event: TaskEvent) => {
      // Its Task resource first, as the engine writes it: children are found by it when an index lags.
      if (event.type === "TaskCreated") await fx.objects.put(`${event.payload.taskId}.json`, "{}");
      await tasks.record(event);
    };
    const child = (i: number) => `${root}/plan.Task.c${i}` as Urn;
    const grandchild = (i: number, j: number) => `${child(i)}/plan.Task.g${i}x${j}` as Urn;

    /** A tree: the root, `n` children, two grandchildren each; started. */
    async function grow(n: number) {
      await record(taskCreated(root));
      await record(taskStarted(root));
      for (let i = 0; i < n; i++) {
        await record(taskCreated(child(i), { parentTaskId: root }));
        await record(taskStarted(child(i)));
        for (let j = 0; j < 2; j++) {
          await record(taskCreated(grandchild(i, j), { parentTaskId: child(i) }));
          await record(taskStarted(grandchild(i, j)));
        }
      }
    }
    async function finish(n: number) {
      for (let i = 0; i < n; i++) {
        for (let j = 0; j < 2; j++) await record(taskCompleted(grandchild(i, j)));
        await record(taskCompleted(child(i)));
      }
      await record(taskCompleted(root));
    }
    async function taskEvents(n: number): Promise<StoredEvent[]> {
      const ids = [
        root,
        ...Array.from({ length: n }, (_, i) => [child(i), grandchild(i, 0), grandchild(i, 1)]).flat(),
      ];
      return (await Promise.all(ids.map((id) => fx.state.readStream(id)))).flat();
    }
    const feed = () => fx.state.readStream(feedStreamOf(root));

    /** Every task event once in the feed (by derived id), the feed gap-free and in a stable order. */
    async function expectExactlyOnce(n: number) {
      const events = await taskEvents(n);
      const copied = await feed();
      expect(copied.map((e) => e.seq)).toEqual(copied.map((_, i) => i + 1));
      expect(new Set(copied.map((e) => e.id)).size).toBe(copied.length);
      expect(copied.map((e) => e.id).sort()).toEqual(
        events.map((e) => eventIdFor("feed", root, e.id)).sort(),
      );
      // Stable: ordered as the task streams' events are (time, then task, then seq).
      const byId = new Map(events.map((e) => [eventIdFor("feed", root, e.id), e]));
      const originals = copied.map((e) => byId.get(e.id) as StoredEvent);
      expect(originals).toEqual([...originals].sort(feedOrder));
      return copied;
    }

    it("copies every task event of the tree once, in order, and is complete once all ended", async () => {
      await grow(3);
      const first = await reconcile(deps, root);
      expect(first).toMatchObject({ appended: 2 + 3 * 6, version: 20, complete: false });
      await record(interactionRequested(child(1), `${child(1)}/uip.Interaction.q1` as Urn));
      await record(interactionResponded(child(1), `${child(1)}/uip.Interaction.q1` as Urn));
      expect((await reconcile(deps, root)).appended).toBe(2);
      await finish(3);
      const last = await reconcile(deps, root);
      expect(last).toMatchObject({ appended: 10, complete: true });
      const copied = await expectExactlyOnce(3);
      expect(copied.at(-1)).toMatchObject({ type: "TaskCompleted", payload: { taskId: root } });
      expect(rootTaskOf(grandchild(2, 1))).toBe(root);
      // Where indexes lag, they did answer stale, and every child was found all the same.
      expect(fx.staleIndexReads?.() ?? 1).toBeGreaterThan(0);
    });

    it("a reconcile again (a redelivered wake-up) copies nothing and writes nothing", async () => {
      await grow(2);
      await reconcile(deps, root);
      const { transactions } = wrapped.counts();
      expect(await reconcile(deps, root)).toMatchObject({ appended: 0, version: 14 });
      expect(wrapped.counts().transactions).toBe(transactions);
      await finish(2);
      await reconcile(deps, root);
      await reconcile(deps, root);
      await expectExactlyOnce(2);
    });

    it("reconcilers racing on one root give one feed with each event once", async () => {
      await grow(3);
      const racers = await Promise.all(Array.from({ length: 4 }, () => reconcile(deps, root)));
      expect(racers.reduce((sum, r) => sum + r.appended, 0)).toBe(20);
      await finish(3);
      await Promise.all(Array.from({ length: 4 }, () => reconcile(deps, root)));
      const copied = await expectExactlyOnce(3);
      expect(copied).toHaveLength(30);
    });

    it("a reconciler that dies after its copy committed leaves nothing to copy twice", async () => {
      await grow(2);
      wrapped.fail("after");
      await expect(reconcile(deps, root)).rejects.toThrow(/after the commit/);
      await finish(2);
      await reconcile(deps, root);
      await expectExactlyOnce(2);
    });

    it("a reconciler that dies before its copy commits leaves nothing half done", async () => {
      await grow(2);
      wrapped.fail("before");
      await expect(reconcile(deps, root)).rejects.toThrow(/before the commit/);
      expect(await feed()).toEqual([]);
      await reconcile(deps, root);
      await expectExactlyOnce(2);
    });

    it("copies more than one transaction holds in batches, and resumes after a death between them", async () => {
      const n = Math.ceil((FEED_BATCH * 2) / 6) + 1; // more than two batches of events
      await grow(n);
      wrapped.fail("after", "before"); // dies after the first batch, then before the next
      await expect(reconcile(deps, root)).rejects.toThrow(/after the commit/);
      expect(await feed()).toHaveLength(FEED_BATCH);
      await expect(reconcile(deps, root)).rejects.toThrow(/before the commit/);
      await reconcile(deps, root);
      await finish(n);
      await reconcile(deps, root);
      await expectExactlyOnce(n);
    });

    it("skips a finished tree: two reads, no stream read, once every task ended", async () => {
      await grow(2);
      await finish(2);
      expect((await reconcile(deps, root)).complete).toBe(true);
      const before = wrapped.counts();
      expect(await reconcile(deps, root)).toMatchObject({ appended: 0, complete: true });
      const after = wrapped.counts();
      expect(after.reads - before.reads).toBe(2);
      expect(after.transactions).toBe(before.transactions);
      // Nothing below a closed task is kept: the cursor of a finished request is its root alone.
      const cursor = await fx.state.get<StoredCursor>(feedCursorKey(root));
      expect(cursor?.data).toEqual({ t: { "": [3, 3] } });
    });

    it("a root not recorded yet has an empty feed, and the feed begins once it is", async () => {
      expect(await reconcile(deps, root)).toMatchObject({ appended: 0, version: 0, complete: false });
      await record(taskCreated(root));
      expect(await reconcile(deps, root)).toMatchObject({ appended: 1, version: 1 });
    });
  });
}
