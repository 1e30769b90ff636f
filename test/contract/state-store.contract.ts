import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConflictError, TooLargeError, ValidationError } from "../../shared/kernel/errors.ts";
import {
  collectPages,
  type LoggedEvent,
  readAllEvents,
  type StateStore,
} from "../../shared/ports/state-store.ts";
import {
  many,
  resourcePut,
  taskCompleted,
  taskCreated,
  taskStarted,
  taskUrn,
  tick,
} from "../fixtures/event-builders.ts";

/**
 * The one contract every StateStore adapter passes. `setup` returns a fresh, empty store per test.
 */
export interface StateStoreFixture {
  store: StateStore;
  cleanup(): Promise<void>;
  /**
   * For a store whose indexes are eventually consistent (byParent, byStatus: DynamoDB's GSIs):
   * lets them catch up with every write so far. The contract calls it before it reads an index
   * right after writing; every other read (get, streams, findEvent, conditions) must be exact
   * without it. Absent: the indexes never lag.
   */
  settleIndexes?(): void;
}

const record = (
  key: string,
  extra: { parent?: string; status?: string; updatedAt?: string; data?: unknown } = {},
) => ({
  key,
  kind: "task",
  updatedAt: extra.updatedAt ?? tick(),
  data: extra.data ?? { key },
  ...(extra.parent === undefined ? {} : { parent: extra.parent }),
  ...(extra.status === undefined ? {} : { status: extra.status }),
});

export function stateStoreContract(name: string, setup: () => Promise<StateStoreFixture>): void {
  describe(`StateStore contract: ${name}`, () => {
    let fx: StateStoreFixture;
    let store: StateStore;
    const settle = () => fx.settleIndexes?.();
    beforeEach(async () => {
      fx = await setup();
      store = fx.store;
    });
    afterEach(async () => {
      await fx.cleanup();
    });

    describe("records", () => {
      it("creates at version 1, updates with the expected version, and rejects a stale one", async () => {
        expect(await store.get("r1")).toBeUndefined();
        await store.transact([{ op: "put", record: record("r1", { data: { n: 1 } }), expectedVersion: 0 }]);
        await store.transact([{ op: "put", record: record("r1", { data: { n: 2 } }), expectedVersion: 1 }]);
        const stale = store.transact([
          { op: "put", record: record("r1", { data: { n: 3 } }), expectedVersion: 1 },
        ]);
        await expect(stale).rejects.toBeInstanceOf(ConflictError);
        await expect(stale).rejects.toThrow(/at version 2/);
        const got = await store.get<{ n: number }>("r1");
        expect(got?.version).toBe(2);
        expect(got?.data).toEqual({ n: 2 });
      });

      it("refuses to create a record twice", async () => {
        await store.transact([{ op: "put", record: record("r2"), expectedVersion: 0 }]);
        await expect(
          store.transact([{ op: "put", record: record("r2"), expectedVersion: 0 }]),
        ).rejects.toBeInstanceOf(ConflictError);
      });

      it("deletes only at the expected version", async () => {
        await store.transact([{ op: "put", record: record("r3"), expectedVersion: 0 }]);
        await expect(
          store.transact([{ op: "delete", key: "r3", expectedVersion: 5 }]),
        ).rejects.toBeInstanceOf(ConflictError);
        await store.transact([{ op: "delete", key: "r3", expectedVersion: 1 }]);
        expect(await store.get("r3")).toBeUndefined();
      });

      it("keeps every field of a record, including nested data", async () => {
        const data = { title: "ünïcode ✓", nested: { list: [1, 2.5, null, true], empty: "" } };
        await store.transact([
          {
            op: "put",
            record: record("r4", {
              parent: "p",
              status: "open",
              updatedAt: "2026-02-02T00:00:00.000Z",
              data,
            }),
            expectedVersion: 0,
          },
        ]);
        expect(await store.get("r4")).toEqual({
          key: "r4",
          kind: "task",
          parent: "p",
          status: "open",
          version: 1,
          updatedAt: "2026-02-02T00:00:00.000Z",
          data,
        });
      });
      it("keeps a record's expiresAt to the second, rounded up; without one it has none", async () => {
        await store.transact([
          {
            op: "put",
            record: { ...record("ttl"), expiresAt: "2026-04-01T10:00:00.250Z" },
            expectedVersion: 0,
          },
          { op: "put", record: record("kept"), expectedVersion: 0 },
        ]);
        expect((await store.get("ttl"))?.expiresAt).toBe("2026-04-01T10:00:01.000Z");
        expect(await store.get("kept")).not.toHaveProperty("expiresAt");
        // A new version without one is kept for ever again.
        await store.transact([{ op: "put", record: record("ttl"), expectedVersion: 1 }]);
        expect(await store.get("ttl")).not.toHaveProperty("expiresAt");
        await expect(
          store.transact([
            { op: "put", record: { ...record("bad"), expiresAt: "next week" }, expectedVersion: 0 },
          ]),
        ).rejects.toThrow(/expiresAt of bad must be an ISO 8601 time/);
        expect(await store.get("bad")).toBeUndefined();
      });
    });

    describe("event streams", () => {
      it("appends in order from version 0 and reads back what was written", async () => {
        const t = taskUrn("a");
        const events = [taskCreated(t), taskStarted(t), taskCompleted(t, { summary: "done" })];
        const result = await store.append(t, events, 0);
        expect(result.duplicate).toBe(false);
        expect(result.appended[0]?.map((e) => e.seq)).toEqual([1, 2, 3]);
        const read = await store.readStream(t);
        expect(read.map((e) => [e.seq, e.type, e.id])).toEqual(events.map((e, i) => [i + 1, e.type, e.id]));
        expect(read[2]).toMatchObject({ streamId: t, payload: { summary: "done" }, actor: events[2]?.actor });
        expect(await store.streamVersion(t)).toBe(3);
        expect((await store.readStream(t, { fromSeq: 2, limit: 1 })).map((e) => e.seq)).toEqual([2]);
      });

      it("50 concurrent appends at the same expected version: exactly one wins, no gap, no duplicate", async () => {
        const t = taskUrn("race");
        await store.append(t, [taskCreated(t)], 0);
        const contenders = many(50, () => resourcePut(t));
        const results = await Promise.allSettled(contenders.map((e) => store.append(t, [e], 1)));
        const won = results.filter((r) => r.status === "fulfilled");
        const lost = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
        expect(won).toHaveLength(1);
        expect(lost).toHaveLength(49);
        for (const l of lost) expect(l.reason).toBeInstanceOf(ConflictError);
        const stream = await store.readStream(t);
        expect(stream.map((e) => e.seq)).toEqual([1, 2]);
        expect(contenders.map((c) => c.id)).toContain(stream[1]?.id);
      });

      it('20 concurrent appends at "any" all land, gap-free, each once', async () => {
        const t = taskUrn("any");
        const events = many(20, () => resourcePut(t));
        await Promise.all(events.map((e) => store.append(t, [e], "any")));
        const stream = await store.readStream(t);
        expect(stream.map((e) => e.seq)).toEqual(many(20, (i) => i + 1));
        expect(new Set(stream.map((e) => e.id))).toEqual(new Set(events.map((e) => e.id)));
      });

      it("the same event id appended twice is recorded once", async () => {
        const t = taskUrn("dup");
        const created = taskCreated(t);
        const first = await store.append(t, [created], 0);
        const again = await store.append(t, [created], 0);
        const anywhere = await store.append(t, [created], "any");
        expect(first.duplicate).toBe(false);
        expect(again.duplicate).toBe(true);
        expect(anywhere.duplicate).toBe(true);
        expect(again.appended[0]?.map((e) => [e.id, e.seq])).toEqual([[created.id, 1]]);
        expect(await store.readStream(t)).toHaveLength(1);
        expect((await store.findEvent(created.id))?.seq).toBe(1);
        expect(await store.findEvent("no-such-event")).toBeUndefined();
      });

      it("refuses a batch that was recorded only in part, or ids reused in another stream", async () => {
        const t = taskUrn("partial");
        const created = taskCreated(t);
        await store.append(t, [created], 0);
        await expect(store.append(t, [created, taskStarted(t)], 0)).rejects.toBeInstanceOf(ConflictError);
        const other = taskUrn("other");
        await expect(
          store.append(other, [{ ...created, payload: { ...created.payload, taskId: other } }], 0),
        ).rejects.toBeInstanceOf(ConflictError);
        expect(await store.readStream(t)).toHaveLength(1);
        expect(await store.readStream(other)).toHaveLength(0);
      });

      it("an expected version ahead of the stream is a conflict, not a gap", async () => {
        const t = taskUrn("ahead");
        await store.append(t, [taskCreated(t)], 0);
        await expect(store.append(t, [taskStarted(t)], 3)).rejects.toBeInstanceOf(ConflictError);
        expect((await store.readStream(t)).map((e) => e.seq)).toEqual([1]);
      });

      it("rejects an invalid event with the field named, writing nothing", async () => {
        const t = taskUrn("invalid");
        const bad = {
          ...taskCreated(t),
          payload: { taskId: "not a urn", title: "", intent: "x", priority: "urgent" },
        };
        const err = await store.append(t, [bad as never], 0).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(ValidationError);
        expect(String((err as Error).message)).toMatch(/payload\.taskId/);
        expect(String((err as Error).message)).toMatch(/payload\.priority/);
        expect(await store.streamVersion(t)).toBe(0);
      });

      it("lists every stream once across pages, and readAllEvents yields every event once", async () => {
        const streams = many(23, (i) => taskUrn(`s${i}`));
        for (const s of streams) await store.append(s, [taskCreated(s), taskStarted(s)], 0);
        const listed = await collectPages((cursor) =>
          store.listStreams(cursor === undefined ? { limit: 5 } : { limit: 5, cursor }),
        );
        expect(listed.sort()).toEqual([...streams].sort());
        const all = [];
        for await (const e of readAllEvents(store, 1)) all.push(e);
        expect(all).toHaveLength(46);
        for (const s of streams)
          expect(all.filter((e) => e.streamId === s).map((e) => e.seq)).toEqual([1, 2]);
      });
    });

    describe("counter records (add)", () => {
      const add = (key: string, amounts: Record<string, number>, parent?: string) => ({
        op: "add" as const,
        key,
        kind: "usage",
        updatedAt: tick(),
        amounts,
        ...(parent === undefined ? {} : { parent }),
      });

      it("creates a missing counter at zero, adds field by field, and counts versions", async () => {
        await store.transact([add("u1", { turns: 1, costUsd: 0.0000004 }, "p")]);
        await store.transact([add("u1", { turns: 2, tokens: 150 })]);
        const r = await store.get<Record<string, number>>("u1");
        expect(r).toMatchObject({ key: "u1", kind: "usage", version: 2, parent: "p" });
        expect(r?.data.turns).toBe(3);
        expect(r?.data.tokens).toBe(150);
        expect(r?.data.costUsd).toBeCloseTo(0.0000004, 12);
        settle();
        expect((await store.byParent("p")).items.map((i) => i.key)).toEqual(["u1"]);
        // Read right after an add, a listing sees it too (the add names no parent: the record keeps "p").
        await store.transact([add("u1", { turns: 1 })]);
        settle();
        const [listed] = (await store.byParent<Record<string, number>>("p")).items;
        expect(listed).toMatchObject({ key: "u1", version: 3, data: { turns: 4 } });
      });

      it("50 concurrent adds to one record all count: adds never conflict", async () => {
        await Promise.all(
          Array.from({ length: 50 }, (_, i) =>
            store.transact([add("hot", { n: 1 }), add(`own-${i}`, { n: 1 })]),
          ),
        );
        const hot = await store.get<Record<string, number>>("hot");
        expect(hot?.data.n).toBe(50);
        expect(hot?.version).toBe(50);
      });

      it("adds nothing when another op of the transaction fails, and refuses a record that was put whole", async () => {
        await store.transact([{ op: "put", record: record("whole"), expectedVersion: 0 }]);
        await expect(
          store.transact([add("c", { n: 1 }), { op: "put", record: record("whole"), expectedVersion: 0 }]),
        ).rejects.toBeInstanceOf(ConflictError);
        expect(await store.get("c")).toBeUndefined();
        await expect(store.transact([add("whole", { n: 1 })])).rejects.toThrow(/not a counter record/);
        await expect(store.transact([add("bad", { "no spaces": 1 })])).rejects.toBeInstanceOf(
          ValidationError,
        );
        await expect(store.transact([add("bad", { n: Number.NaN })])).rejects.toBeInstanceOf(ValidationError);
      });
    });

    describe("the global log (readAll)", () => {
      /** Every page from `from` on, as the log gives them (indexes settled first). */
      const readOn = async (from?: string, limit = 3): Promise<{ events: LoggedEvent[]; next?: string }> => {
        settle();
        const events: LoggedEvent[] = [];
        let next = from;
        for (;;) {
          const page = await store.readAll({ ...(next === undefined ? {} : { from: next }), limit });
          expect(page.events.length).toBeLessThanOrEqual(limit);
          events.push(...page.events);
          if (page.events.length === 0)
            return { events, ...(page.next === undefined ? {} : { next: page.next }) };
          expect(page.next).toBe(page.events.at(-1)?.position);
          next = page.next;
        }
      };

      it("gives every event of every stream once, page by page, each stream in its own order", async () => {
        const [a, b, c] = [taskUrn("log-a"), taskUrn("log-b"), taskUrn("log-c")];
        await store.append(a, [taskCreated(a), taskStarted(a), taskCompleted(a)], 0);
        await store.append(b, [taskCreated(b)], 0);
        await store.append(a, [resourcePut(a)], 3);
        await store.transact([
          { op: "append", streamId: b, events: [taskStarted(b)], expectedVersion: 1 },
          { op: "append", streamId: c, events: many(4, () => resourcePut(c)), expectedVersion: 0 },
        ]);
        const { events, next } = await readOn();
        expect(events).toHaveLength(10);
        expect(new Set(events.map((e) => e.id)).size).toBe(10);
        const positions = events.map((e) => e.position);
        expect([...positions].sort()).toEqual(positions); // they sort as the log is ordered
        expect(new Set(positions).size).toBe(10);
        for (const s of [a, b, c]) {
          const own = events.filter((e) => e.streamId === s);
          expect(own.map((e) => e.seq)).toEqual((await store.readStream(s)).map((e) => e.seq));
        }
        expect(next).toBe(positions.at(-1));
        // Each one as its stream holds it.
        expect(events.find((e) => e.streamId === a && e.seq === 3)).toMatchObject({ type: "TaskCompleted" });
      });

      it("goes on from a position: later events come after every position it gave, none again", async () => {
        const t = taskUrn("log-on");
        await store.append(t, [taskCreated(t), taskStarted(t)], 0);
        const first = await readOn();
        expect(first.events).toHaveLength(2);
        const later = [resourcePut(t), resourcePut(t)];
        await store.append(t, later, 2);
        const more = await readOn(first.next);
        expect(more.events.map((e) => e.id)).toEqual(later.map((e) => e.id));
        expect((more.events[0]?.position ?? "") > (first.next ?? "")).toBe(true);
        // Nothing new: an empty page that keeps the position.
        settle();
        expect(await store.readAll({ from: more.next as string })).toEqual({ events: [], next: more.next });
        expect(await store.readAll({ limit: 1 })).toMatchObject({ events: [first.events[0]] });
      });

      it("takes appends racing across streams: every event once, each stream in order, however paged", async () => {
        const streams = many(30, (i) => taskUrn(`log-race-${i}`));
        await Promise.all(
          streams.map(async (t) => {
            await store.append(t, [taskCreated(t)], 0);
            await store.append(t, [taskStarted(t), resourcePut(t)], 1);
          }),
        );
        for (const limit of [1, 7, 1000]) {
          const { events } = await readOn(undefined, limit);
          expect(events).toHaveLength(90);
          expect(new Set(events.map((e) => e.id)).size).toBe(90);
          for (const t of streams)
            expect(events.filter((e) => e.streamId === t).map((e) => e.seq)).toEqual([1, 2, 3]);
        }
      });

      it("refuses a position no page gave, as bad input", async () => {
        for (const from of ["garbage", "", "9".repeat(300)])
          await expect(store.readAll({ from })).rejects.toBeInstanceOf(ValidationError);
        expect((await store.readAll()).events).toEqual([]);
      });
    });

    describe("transactions", () => {
      it("commits records and events together", async () => {
        const t = taskUrn("tx");
        const created = taskCreated(t);
        const res = await store.transact([
          { op: "append", streamId: t, events: [created], expectedVersion: 0 },
          { op: "put", record: record(t, { status: "open" }), expectedVersion: 0 },
          { op: "put", record: record("side"), expectedVersion: 0 },
        ]);
        expect(res.appended[0]?.[0]?.seq).toBe(1);
        expect((await store.get(t))?.status).toBe("open");
        expect(await store.get("side")).toBeDefined();
      });

      it("writes nothing when any condition fails", async () => {
        const t = taskUrn("atomic");
        await store.transact([{ op: "put", record: record("held"), expectedVersion: 0 }]);
        const err = await store
          .transact([
            { op: "put", record: record("fresh"), expectedVersion: 0 },
            { op: "append", streamId: t, events: [taskCreated(t)], expectedVersion: 0 },
            { op: "put", record: record("held", { data: "changed" }), expectedVersion: 7 },
          ])
          .catch((e: unknown) => e);
        expect(err).toBeInstanceOf(ConflictError);
        expect((err as ConflictError).details).toMatchObject({ what: "record", id: "held", opIndex: 2 });
        expect(await store.get("fresh")).toBeUndefined();
        expect(await store.streamVersion(t)).toBe(0);
        expect((await store.get("held"))?.data).toEqual({ key: "held" });
      });

      it("a redelivered transaction is recognised by its event ids and changes nothing", async () => {
        const t = taskUrn("redeliver");
        const created = taskCreated(t);
        const tx = [
          { op: "append" as const, streamId: t, events: [created], expectedVersion: 0 },
          { op: "put" as const, record: record(t, { status: "open" }), expectedVersion: 0 },
        ];
        expect((await store.transact(tx)).duplicate).toBe(false);
        const again = await store.transact(tx);
        expect(again.duplicate).toBe(true);
        expect(again.appended[0]?.[0]?.id).toBe(created.id);
        expect((await store.get(t))?.version).toBe(1);
        expect(await store.streamVersion(t)).toBe(1);
      });

      it("refuses transactions past the item limit and oversized items, writing nothing", async () => {
        const t = taskUrn("big");
        await expect(
          store.append(
            t,
            many(51, () => resourcePut(t)),
            0,
          ),
        ).rejects.toBeInstanceOf(TooLargeError);
        await expect(
          store.transact([
            { op: "put", record: record("huge", { data: "x".repeat(400_000) }), expectedVersion: 0 },
          ]),
        ).rejects.toBeInstanceOf(TooLargeError);
        await expect(store.transact([])).rejects.toBeInstanceOf(ValidationError);
        expect(await store.streamVersion(t)).toBe(0);
        expect(await store.get("huge")).toBeUndefined();
      });
    });

    describe("queries", () => {
      it("finds records by parent, in key order, across pages, and only that parent's", async () => {
        const keys = many(25, (i) => `child-${String(i).padStart(2, "0")}`);
        for (const k of [...keys].reverse())
          await store.transact([{ op: "put", record: record(k, { parent: "P" }), expectedVersion: 0 }]);
        await store.transact([
          { op: "put", record: record("stranger", { parent: "Q" }), expectedVersion: 0 },
        ]);
        await store.transact([{ op: "put", record: record("orphan"), expectedVersion: 0 }]);
        settle();
        const found = await collectPages((cursor) =>
          store.byParent("P", cursor === undefined ? { limit: 10 } : { limit: 10, cursor }),
        );
        expect(found.map((r) => r.key)).toEqual(keys);
        expect((await store.byParent("nobody")).items).toEqual([]);
      });

      it("finds records by status, oldest first, optionally only those older than a time", async () => {
        const at = (m: number) => `2026-03-01T00:${String(m).padStart(2, "0")}:00.000Z`;
        for (const [k, m, s] of [
          ["w3", 3, "in_progress"],
          ["w1", 1, "in_progress"],
          ["w2", 2, "in_progress"],
          ["d1", 0, "done"],
          ["w4", 4, "in_progress"],
        ] as const) {
          await store.transact([
            { op: "put", record: record(k, { status: s, updatedAt: at(m) }), expectedVersion: 0 },
          ]);
        }
        settle();
        const all = await collectPages((cursor) =>
          store.byStatus("task", "in_progress", cursor === undefined ? { limit: 2 } : { limit: 2, cursor }),
        );
        expect(all.map((r) => r.key)).toEqual(["w1", "w2", "w3", "w4"]);
        const stale = await store.byStatus("task", "in_progress", { updatedBefore: at(3) });
        expect(stale.items.map((r) => r.key)).toEqual(["w1", "w2"]);
        expect((await store.byStatus("other-kind", "in_progress")).items).toEqual([]);
      });

      it("pages through many records by status in age order, with and without a time bound", async () => {
        const at = (s: number) => `2026-03-01T00:00:${String(s).padStart(2, "0")}.000Z`;
        // 30 records, written in a scrambled order, two of them sharing each second.
        const all = many(30, (i) => ({ key: `s-${(i * 7) % 30}`, second: Math.floor(((i * 7) % 30) / 2) }));
        for (const r of all)
          await store.transact([
            {
              op: "put",
              record: record(r.key, { status: "in_progress", updatedAt: at(r.second) }),
              expectedVersion: 0,
            },
          ]);
        settle();
        const order = [...all]
          .sort((a, b) => a.second - b.second || (a.key < b.key ? -1 : 1))
          .map((r) => r.key);
        const paged = await collectPages((cursor) =>
          store.byStatus("task", "in_progress", cursor === undefined ? { limit: 7 } : { limit: 7, cursor }),
        );
        expect(paged.map((r) => r.key)).toEqual(order);
        const bounded = await collectPages((cursor) =>
          store.byStatus("task", "in_progress", {
            limit: 4,
            updatedBefore: at(10),
            ...(cursor === undefined ? {} : { cursor }),
          }),
        );
        expect(bounded.map((r) => r.key)).toEqual(order.slice(0, 20));
      });

      it("moves a record between status indexes when its status changes", async () => {
        await store.transact([{ op: "put", record: record("m", { status: "open" }), expectedVersion: 0 }]);
        await store.transact([{ op: "put", record: record("m", { status: "done" }), expectedVersion: 1 }]);
        settle();
        expect((await store.byStatus("task", "open")).items).toEqual([]);
        expect((await store.byStatus("task", "done")).items.map((r) => r.key)).toEqual(["m"]);
      });

      it("rejects a cursor it did not make", async () => {
        await expect(store.byParent("P", { cursor: "not-a-cursor" })).rejects.toBeInstanceOf(ValidationError);
      });
    });
  });
}
