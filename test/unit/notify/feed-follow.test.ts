import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { InProcessEventBus } from "../../../shared/adapters/local/in-process-event-bus.ts";
import { SqliteObjectStore } from "../../../shared/adapters/local/sqlite-object-store.ts";
import { SqliteStateStore } from "../../../shared/adapters/local/sqlite-state-store.ts";
import { ConflictError } from "../../../shared/kernel/errors.ts";
import { reconcile } from "../../../shared/notify/feed.ts";
import { type FeedItem, followFeed, openFollows } from "../../../shared/notify/feed-follow.ts";
import type { StateStore } from "../../../shared/ports/state-store.ts";
import { ResourceStore } from "../../../shared/store/resource-store.ts";
import { TaskLog } from "../../../shared/store/task-log.ts";
import { taskCompleted, taskCreated, taskStarted, taskUrn } from "../../fixtures/event-builders.ts";

/**
 * The follower of a feed (shared/notify/feed-follow.ts) as a stream uses it: bounded rounds, a
 * wake-up from the bus, reconcilers that keep losing, and nothing left behind once it ends.
 */
const root = taskUrn("follow");
const child = taskUrn("follow", "c");
let state: StateStore;
let objects: SqliteObjectStore;
let bus: InProcessEventBus;
let losing = false;
const deps = () => {
  // A store whose transactions all lose while `losing`: as when many reconcilers race on one root.
  const store = new Proxy(state, {
    get(target, prop, receiver) {
      if (prop === "transact" && losing)
        return async () => {
          throw new ConflictError("another reconciler wrote first");
        };
      const value = Reflect.get(target, prop, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { state: store, tasks: new TaskLog(store), resources: new ResourceStore(objects), bus };
};
const collect = async (items: AsyncGenerator<FeedItem>) => {
  const out: FeedItem[] = [];
  for await (const item of items) out.push(item);
  return out;
};

beforeEach(() => {
  state = new SqliteStateStore({ path: ":memory:" });
  objects = new SqliteObjectStore({ path: ":memory:" });
  bus = new InProcessEventBus();
  losing = false;
});
afterEach(async () => {
  await bus.close();
  await state.close();
  await objects.close();
});

describe("following a request's feed", () => {
  it("bounded: what is there at once; else ends empty after the wait; complete once all ended", async () => {
    const tasks = new TaskLog(state);
    await tasks.record(taskCreated(root));
    await tasks.record(taskStarted(root));
    const signal = new AbortController().signal;
    const round = (after: number) =>
      collect(
        followFeed(deps(), {
          rootTaskId: root,
          within: root,
          after,
          signal,
          mode: "bounded",
          maxWaitMs: 50,
          recheckMs: 10,
        }),
      );
    const first = await round(0);
    expect(first.map((i) => i.kind)).toEqual(["events", "end"]);
    expect(first[0]?.kind === "events" && first[0].events.map((e) => e.seq)).toEqual([1, 2]);
    expect(await round(2)).toEqual([{ kind: "end", complete: false }]);
    await tasks.record(taskCompleted(root));
    const last = await round(2);
    expect(last.at(-1)).toEqual({ kind: "end", complete: true });
    expect(openFollows()).toBe(0);
  });

  it("reads the feed as it is while its reconciles keep losing to others, and catches up after", async () => {
    const tasks = new TaskLog(state);
    await tasks.record(taskCreated(root));
    await reconcile(deps(), root); // seq 1 copied by someone
    await tasks.record(taskStarted(root));
    losing = true;
    const signal = new AbortController().signal;
    const items = await collect(
      followFeed(deps(), {
        rootTaskId: root,
        within: root,
        after: 0,
        signal,
        mode: "bounded",
        maxWaitMs: 50,
        recheckMs: 10,
      }),
    );
    expect(items[0]?.kind === "events" && items[0].events.map((e) => e.type)).toEqual(["TaskCreated"]);
    losing = false;
    const next = await collect(
      followFeed(deps(), {
        rootTaskId: root,
        within: root,
        after: 1,
        signal,
        mode: "bounded",
        maxWaitMs: 50,
        recheckMs: 10,
      }),
    );
    expect(next[0]?.kind === "events" && next[0].events.map((e) => e.type)).toEqual(["TaskStarted"]);
  });

  it("live: a bus wake-up brings a change at once, and a reader that goes away leaves nothing running", async () => {
    const tasks = new TaskLog(state);
    await tasks.record(taskCreated(root));
    const controller = new AbortController();
    // A recheck far away: only the wake-up can bring the change within the test.
    const follow = followFeed(deps(), {
      rootTaskId: root,
      within: root,
      after: 0,
      signal: controller.signal,
      mode: "live",
      recheckMs: 600_000,
      heartbeatMs: 600_000,
    });
    expect((await follow.next()).value).toMatchObject({ kind: "events" });
    expect(openFollows()).toBe(1);
    const next = follow.next();
    await tasks.record(taskCreated(child, { parentTaskId: root }));
    await tasks.record(taskStarted(root));
    await bus.publish([
      { id: "w1", source: "arbor.engine", detailType: "TASK_READY", detail: { taskId: child } },
    ]);
    const woken = (await next).value as FeedItem;
    expect(woken.kind === "events" && woken.events.map((e) => e.type)).toContain("TaskStarted");
    const pending = follow.next();
    controller.abort(); // the reader goes away while the follower waits
    expect((await pending).done).toBe(true);
    expect(openFollows()).toBe(0);
  });
});
