import { afterEach, beforeEach, expect, it } from "vitest";
import type { Urn } from "../../../shared/domain/urn.ts";
import { InvalidTransitionError } from "../../../shared/kernel/errors.ts";
import type { StateStore } from "../../../shared/ports/state-store.ts";
import { childCountKey, RECORD_MANY_LIMIT, TaskLog } from "../../../shared/store/task-log.ts";
import {
  interactionRequested,
  interactionResponded,
  many,
  taskCanceled,
  taskCompleted,
  taskCreated,
  taskFailed,
  taskStarted,
  taskUrn,
} from "../../fixtures/event-builders.ts";

/** TaskLog behaviour, run over any StateStore (SQLite in the unit project, DynamoDB Local in integration). */
export function taskLogSuite(setup: () => Promise<{ store: StateStore; cleanup(): Promise<void> }>): void {
  let store: StateStore;
  let cleanup: () => Promise<void>;
  let log: TaskLog;
  beforeEach(async () => {
    ({ store, cleanup } = await setup());
    log = new TaskLog(store);
  });
  afterEach(() => cleanup());

  it("keeps the view beside the log, in the same transaction", async () => {
    const t = taskUrn("tl");
    await log.record(taskCreated(t));
    const { view } = await log.record(taskStarted(t));
    expect(view.status).toBe("in_progress");
    expect(await log.view(t)).toEqual(view);
    expect((await store.get(t))?.version).toBe(2);
    expect(await store.streamVersion(t)).toBe(2);
  });

  it("refuses a forbidden transition and writes nothing", async () => {
    const t = taskUrn("forbidden");
    await log.record(taskCreated(t));
    await expect(log.record(taskCompleted(t))).rejects.toBeInstanceOf(InvalidTransitionError);
    expect(await store.streamVersion(t)).toBe(1);
    expect((await log.view(t))?.status).toBe("open");
  });

  it("records a redelivered event once", async () => {
    const t = taskUrn("redelivered");
    const created = taskCreated(t);
    const started = taskStarted(t);
    await log.record(created);
    await log.record(started);
    const again = await log.record(started);
    expect(again.duplicate).toBe(true);
    expect(again.view.status).toBe("in_progress");
    expect(await store.streamVersion(t)).toBe(2);
  });

  it("lets exactly one of many racing completions through", async () => {
    const t = taskUrn("racing");
    await log.record(taskCreated(t));
    await log.record(taskStarted(t));
    const results = await Promise.allSettled(many(10, () => log.record(taskCompleted(t))));
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    for (const r of results)
      if (r.status === "rejected") expect(r.reason).toBeInstanceOf(InvalidTransitionError);
    expect(await store.streamVersion(t)).toBe(3);
  });

  it("counts a parent's children as they are created and end, once each, however often events arrive", async () => {
    const parent = taskUrn("counted");
    const kids = many(4, (i) => taskUrn("counted", `k${i}`));
    await log.record(taskCreated(parent));
    expect(await log.childrenMayAllHaveEnded(parent)).toBe(true); // no children yet: list to know
    const created = kids.map((k) => taskCreated(k, { parentTaskId: parent }));
    await log.recordMany(created.slice(0, 3));
    await log.recordMany(created); // the first three again: skipped, not counted
    await log.record(created[3] as (typeof created)[number]); // redelivered alone
    const counts = async () => (await store.get(childCountKey(parent)))?.data;
    expect(await counts()).toEqual({ created: 4 });

    const [a, b, c, d] = kids as [Urn, Urn, Urn, Urn];
    for (const k of [a, b, c]) await log.record(taskStarted(k));
    const done = taskCompleted(a);
    await log.record(done);
    await log.record(done);
    await Promise.allSettled(many(5, () => log.record(taskCompleted(b)))); // racing: one wins
    await log.record(taskFailed(c));
    expect(await counts()).toEqual({ created: 4, ended: 3 });
    expect(await log.childrenMayAllHaveEnded(parent)).toBe(false);
    await log.record(taskCanceled(d));
    expect(await counts()).toEqual({ created: 4, ended: 4 });
    expect(await log.childrenMayAllHaveEnded(parent)).toBe(true);
    // Tasks without a parent task count nowhere; a batch stays within the transaction's item limit.
    const wide = taskUrn("wide");
    await log.recordMany(
      many(RECORD_MANY_LIMIT, (i) =>
        taskCreated(taskUrn("wide", `w${i}`), { parentTaskId: taskUrn(`p${i}`) }),
      ),
    );
    expect((await store.get(childCountKey(taskUrn("p0"))))?.data).toEqual({ created: 1 });
    expect(await store.get(childCountKey(wide))).toBeUndefined();
  });

  it("finds children by parent and stale tasks by age", async () => {
    const parent = taskUrn("p");
    const kids = many(3, (i) => taskUrn("p", `k${i}`));
    await log.record(taskCreated(parent, { at: "2026-05-01T00:00:00.000Z" }));
    for (const k of kids)
      await log.record(taskCreated(k, { parentTaskId: parent, at: "2026-05-01T00:00:01.000Z" }));
    expect((await log.children(parent)).map((v) => v.taskId)).toEqual([...kids].sort());
    expect((await log.stale("open", "2026-05-01T00:00:00.500Z")).map((v) => v.taskId)).toEqual([parent]);
  });

  it("replays the log into exactly the views it stored", async () => {
    const a = taskUrn("ra");
    const b = taskUrn("ra", "rb");
    const ix = taskUrn("ra", "ix");
    await log.record(taskCreated(a));
    await log.record(taskStarted(a));
    await log.record(taskCreated(b, { parentTaskId: a }));
    await log.record(interactionRequested(a, ix));
    await log.record(interactionResponded(a, ix));
    await log.record(taskStarted(b));
    await log.record(taskCompleted(b, { summary: "sub done" }));
    const replayed = await log.replay();
    expect([...replayed.keys()].sort()).toEqual([a, b].sort());
    expect(replayed.get(a)).toEqual(await log.view(a));
    expect(replayed.get(b)).toEqual(await log.view(b));
  });

  it("replays the tasks' own streams only: copies of their events in another stream (a request's feed) are no task", async () => {
    const a = taskUrn("fa");
    const b = taskUrn("fa", "fb");
    const events = [taskCreated(a), taskStarted(a), taskCreated(b, { parentTaskId: a }), taskStarted(b)];
    for (const e of events) await log.record(e);
    // What shared/notify/feed.ts writes: the same events, under ids of their own, in `feed#<root>`.
    await store.append(
      `feed#${a}`,
      events.map((e) => ({ ...e, id: `${e.id}-copy` })),
      0,
    );
    const replayed = await log.replay();
    expect([...replayed.keys()].sort()).toEqual([a, b].sort());
    expect(replayed.get(a)).toEqual(await log.view(a));
    expect(replayed.get(b)).toEqual(await log.view(b));
  });
}
