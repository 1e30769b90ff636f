import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "libsql";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SqliteStateStore } from "../../shared/adapters/local/sqlite-state-store.ts";
import type { Urn } from "../../shared/domain/urn.ts";
import { ConflictError, UnavailableError } from "../../shared/kernel/errors.ts";
import type { WriteOp } from "../../shared/ports/state-store.ts";
import { createLocalRuntime } from "../../shared/runtime/local/local.ts";
import { taskCreated, taskStarted, taskUrn } from "../fixtures/event-builders.ts";
import { projectionsContract } from "./projections.contract.ts";
import { stateStoreContract } from "./state-store.contract.ts";

/** A fresh store in a file of its own. */
async function fileStore() {
  const dir = await mkdtemp(join(tmpdir(), "arbor-state-"));
  const store = new SqliteStateStore({ path: join(dir, "state.db") });
  return {
    store,
    cleanup: async () => {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

stateStoreContract("SQLite file (libsql)", fileStore);

stateStoreContract("SQLite in memory (libsql)", async () => {
  const store = new SqliteStateStore({ path: ":memory:" });
  return { store, cleanup: () => store.close() };
});

projectionsContract("SQLite file (libsql)", fileStore);

describe("the global log on SQLite", () => {
  it("is the order the events were committed in, across streams", async () => {
    const store = new SqliteStateStore({ path: ":memory:" });
    try {
      const [a, b] = [taskUrn("commit-a"), taskUrn("commit-b")];
      await store.append(a, [taskCreated(a)], 0);
      await store.append(b, [taskCreated(b)], 0);
      await store.append(a, [taskStarted(a)], 1);
      await store.append(b, [taskStarted(b)], 1);
      const { events } = await store.readAll();
      expect(events.map((e) => `${e.streamId}#${e.seq}`)).toEqual([`${a}#1`, `${b}#1`, `${a}#2`, `${b}#2`]);
      expect(events.map((e) => e.position)).toEqual([
        "0000000000000001",
        "0000000000000002",
        "0000000000000003",
        "0000000000000004",
      ]);
    } finally {
      await store.close();
    }
  });
});

describe("SQLite group commit", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "arbor-group-"));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  const put = (key: string, expectedVersion: number): WriteOp => ({
    op: "put",
    record: { key, kind: "k", updatedAt: "2026-01-01T00:00:00.000Z", data: { key } },
    expectedVersion,
  });

  it("commits a turn's transactions together; a failing one rolls back alone", async () => {
    const path = join(dir, "state.db");
    const store = new SqliteStateStore({ path });
    await store.transact([put("taken", 0)]);
    // Started in one event-loop turn: one group, one COMMIT.
    const results = await Promise.allSettled([
      store.transact([put("a", 0)]),
      store.transact([put("b", 0), put("taken", 0)]), // "taken" exists: this one loses, b with it
      store.transact([put("c", 0)]),
    ]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(ConflictError);
    // Once the barrier resolves the writes are committed: another connection sees them.
    await store.untilDurable();
    const other = new SqliteStateStore({ path });
    expect((await other.get("a"))?.version).toBe(1);
    expect((await other.get("c"))?.version).toBe(1);
    expect(await other.get("b")).toBeUndefined();
    await other.close();
    await store.close();
  });

  it("close() commits what is pending", async () => {
    const path = join(dir, "state.db");
    const store = new SqliteStateStore({ path });
    const pending = store.transact([put("late", 0)]);
    await store.close();
    await pending;
    const other = new SqliteStateStore({ path });
    expect((await other.get("late"))?.version).toBe(1);
    await other.close();
  });
});

describe("SQLite record cache", () => {
  const rec = (key: string, data: unknown) => ({
    key,
    kind: "k",
    updatedAt: "2026-01-01T00:00:00.000Z",
    data,
  });

  it("keeps a failed transaction's writes out of memory", async () => {
    const store = new SqliteStateStore({ path: ":memory:" });
    await store.transact([{ op: "put", record: rec("taken", 1), expectedVersion: 0 }]);
    await expect(
      store.transact([
        { op: "put", record: rec("a", "new"), expectedVersion: 0 },
        { op: "put", record: rec("taken", 2), expectedVersion: 0 },
      ]),
    ).rejects.toBeInstanceOf(ConflictError);
    expect(await store.get("a")).toBeUndefined();
    expect((await store.get("taken"))?.data).toBe(1);
    await store.close();
  });

  it("hands out frozen records, and reads again after a conflict (another process wrote)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-cache-"));
    try {
      const path = join(dir, "state.db");
      const mine = new SqliteStateStore({ path });
      const theirs = new SqliteStateStore({ path });
      await mine.transact([{ op: "put", record: rec("r", { n: 1 }), expectedVersion: 0 }]);
      const seen = await mine.get<{ n: number }>("r");
      expect(Object.isFrozen(seen?.data)).toBe(true);
      await mine.untilDurable(); // committed: the other connection may write
      await theirs.transact([{ op: "put", record: rec("r", { n: 2 }), expectedVersion: 1 }]);
      await theirs.untilDurable();
      // Conditions are checked against the database, not memory: the stale version loses...
      await expect(
        mine.transact([{ op: "put", record: rec("r", { n: 3 }), expectedVersion: 1 }]),
      ).rejects.toBeInstanceOf(ConflictError);
      // ...and the next read sees the other process's write.
      expect(await mine.get("r")).toMatchObject({ version: 2, data: { n: 2 } });
      await theirs.close();
      await mine.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("checks a write against what another process committed, though it holds the record, stream and counter", async () => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-external-"));
    try {
      const path = join(dir, "state.db");
      const mine = new SqliteStateStore({ path });
      const theirs = new SqliteStateStore({ path });
      const event = (id: string) => ({
        id,
        v: 1 as const,
        at: "2026-01-01T00:00:00.000Z",
        actor: { id: "system_engine", kind: "system" as const },
        type: "TaskStarted" as const,
        payload: { taskId: "cld:common.Tenant.acme/plan.Task.t1" as Urn },
      });
      const add = {
        op: "add" as const,
        key: "c",
        kind: "usage",
        updatedAt: "2026-01-01T00:00:00.000Z",
        amounts: { n: 1 },
      };
      // Mine writes all three, so it holds them in memory.
      await mine.transact([
        { op: "put", record: rec("r", 1), expectedVersion: 0 },
        { op: "append", streamId: "s", events: [event("e1")], expectedVersion: 0 },
        add,
      ]);
      await mine.untilDurable();
      await theirs.transact([
        { op: "put", record: rec("r", 2), expectedVersion: 1 },
        { op: "append", streamId: "s", events: [event("e2")], expectedVersion: 1 },
        add,
      ]);
      await theirs.untilDurable();
      // What mine holds is stale: its next write sees the other process's commit.
      await expect(
        mine.transact([{ op: "put", record: rec("r", 3), expectedVersion: 1 }]),
      ).rejects.toBeInstanceOf(ConflictError);
      await expect(
        mine.transact([{ op: "append", streamId: "s", events: [event("e3")], expectedVersion: 1 }]),
      ).rejects.toBeInstanceOf(ConflictError);
      await mine.transact([add]);
      expect(await mine.get("c")).toMatchObject({ version: 3, data: { n: 3 } });
      await theirs.close();
      await mine.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("SQLite record cache of a store that has only read so far", () => {
  it("checks its first write against what another process committed after it read", async () => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-first-write-"));
    const rec = (data: unknown) => ({ key: "head", kind: "k", updatedAt: "2026-01-01T00:00:00.000Z", data });
    try {
      const path = join(dir, "state.db");
      const theirs = new SqliteStateStore({ path });
      await theirs.transact([{ op: "put", record: rec({ n: 1 }), expectedVersion: 0 }]);
      await theirs.untilDurable();
      // Mine opens and reads (holding version 1 in memory), and has written nothing yet...
      const mine = new SqliteStateStore({ path });
      expect(await mine.get("head")).toMatchObject({ version: 1 });
      await theirs.transact([{ op: "put", record: rec({ n: 2 }), expectedVersion: 1 }]);
      await theirs.untilDurable();
      // ...so its first write, at the version it read, must lose (it once overwrote version 2).
      await expect(
        mine.transact([{ op: "put", record: rec({ n: 3 }), expectedVersion: 1 }]),
      ).rejects.toBeInstanceOf(ConflictError);
      expect(await mine.get("head")).toMatchObject({ version: 2, data: { n: 2 } });
      await theirs.close();
      await mine.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("SQLite writes that fail half-way", () => {
  it("a create whose row cannot be written undoes the group and refuses writes from then on", async () => {
    const store = new SqliteStateStore({ path: ":memory:" });
    const rec = (key: string, kind: unknown) =>
      ({ key, kind, updatedAt: "2026-01-01T00:00:00.000Z", data: {} }) as never;
    try {
      const before = store.transact([{ op: "put", record: rec("before", "k"), expectedVersion: 0 }]);
      const broken = store.transact([{ op: "put", record: rec("broken", undefined), expectedVersion: 0 }]);
      await expect(broken).rejects.toBeInstanceOf(UnavailableError);
      await before;
      await expect(
        store.transact([{ op: "put", record: rec("after", "k"), expectedVersion: 0 }]),
      ).rejects.toBeInstanceOf(UnavailableError);
      expect(await store.get("before")).toBeUndefined();
    } finally {
      await store.close().catch(() => undefined);
    }
  });
});

describe("SQLite transactions of a record and one event, repeated", () => {
  it("answer with the events recorded and change nothing, whether the record's version still matches or not", async () => {
    const store = new SqliteStateStore({ path: ":memory:" });
    try {
      const t = taskUrn("repeat");
      const created = taskCreated(t);
      const view = (n: number) => ({
        key: t,
        kind: "task",
        updatedAt: "2026-01-01T00:00:00.000Z",
        data: { n },
      });
      const ops = (n: number, expectedVersion: number, streamVersion: number | "any"): WriteOp[] => [
        { op: "put", record: view(n), expectedVersion },
        { op: "append", streamId: t, events: [created], expectedVersion: streamVersion },
      ];
      expect((await store.transact(ops(1, 0, 0))).duplicate).toBe(false);
      // Stale versions (the repeat of a transaction that happened): its events, nothing written.
      const stale = await store.transact(ops(2, 0, 0));
      expect(stale.duplicate).toBe(true);
      expect(stale.appended[0]?.map((e) => [e.id, e.seq])).toEqual([[created.id, 1]]);
      // The record's version matches and the stream takes any: the event's id alone says it happened.
      const matching = await store.transact(ops(3, 1, "any"));
      expect(matching.duplicate).toBe(true);
      expect(await store.get(t)).toMatchObject({ version: 1, data: { n: 1 } });
      expect(await store.readStream(t)).toHaveLength(1);
      // The same id in another stream is refused, and the record beside it is not written.
      const other = taskUrn("repeat-other");
      await expect(
        store.transact([
          { op: "put", record: { ...view(4), key: other }, expectedVersion: 0 },
          {
            op: "append",
            streamId: other,
            events: [{ ...created, payload: { ...created.payload, taskId: other } }],
            expectedVersion: 0,
          },
        ]),
      ).rejects.toBeInstanceOf(ConflictError);
      expect(await store.get(other)).toBeUndefined();
      expect(await store.readStream(other)).toHaveLength(0);
    } finally {
      await store.close();
    }
  });
});

describe("SQLite creates of a record the store does not hold", () => {
  it("lose to a row another process created, changing nothing, and create what is absent at version 1", async () => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-create-"));
    const rec = (key: string, data: unknown) => ({
      key,
      kind: "claim",
      updatedAt: "2026-01-01T00:00:00.000Z",
      data,
    });
    try {
      const path = join(dir, "state.db");
      const theirs = new SqliteStateStore({ path });
      const mine = new SqliteStateStore({ path });
      await theirs.transact([{ op: "put", record: rec("taken", { by: "theirs" }), expectedVersion: 0 }]);
      await theirs.untilDurable();
      // Mine has never read "taken": its create (one op, version 0) must still find the row.
      await expect(
        mine.transact([{ op: "put", record: rec("taken", { by: "mine" }), expectedVersion: 0 }]),
      ).rejects.toBeInstanceOf(ConflictError);
      expect(await mine.get("taken")).toMatchObject({ version: 1, data: { by: "theirs" } });
      await mine.transact([{ op: "put", record: rec("free", { by: "mine" }), expectedVersion: 0 }]);
      await mine.untilDurable();
      expect(await theirs.get("free")).toMatchObject({ version: 1, data: { by: "mine" } });
      await expect(
        mine.transact([{ op: "put", record: rec("free", { by: "again" }), expectedVersion: 0 }]),
      ).rejects.toBeInstanceOf(ConflictError);
      // Several creates: one of them taken by the other process, so none is made.
      const err = await mine
        .transact([
          { op: "put", record: rec("first", { by: "mine" }), expectedVersion: 0 },
          { op: "put", record: rec("second", { by: "mine" }), expectedVersion: 0 },
          { op: "put", record: rec("taken", { by: "mine" }), expectedVersion: 0 },
        ])
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConflictError);
      expect((err as ConflictError).details).toMatchObject({
        id: "taken",
        expected: 0,
        actual: 1,
        opIndex: 2,
      });
      await mine.untilDurable();
      for (const store of [mine, theirs]) {
        expect(await store.get("first")).toBeUndefined();
        expect(await store.get("second")).toBeUndefined();
      }
      await mine.transact([
        { op: "put", record: rec("first", { by: "mine" }), expectedVersion: 0 },
        { op: "put", record: rec("second", { by: "mine" }), expectedVersion: 0 },
      ]);
      expect(await mine.get("second")).toMatchObject({ version: 1, data: { by: "mine" } });
      await theirs.close();
      await mine.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("SQLite record cache of a store that only reads", () => {
  it("answers with what another process committed since, not with what it held before", async () => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-reader-"));
    const rec = (data: unknown) => ({ key: "k", kind: "k", updatedAt: "2026-01-01T00:00:00.000Z", data });
    const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
    try {
      const path = join(dir, "state.db");
      const writer = new SqliteStateStore({ path });
      const reader = new SqliteStateStore({ path });
      await writer.transact([{ op: "put", record: rec(1), expectedVersion: 0 }]);
      await writer.untilDurable();
      expect(await reader.get("k")).toMatchObject({ version: 1, data: 1 });
      for (const n of [2, 3]) {
        await writer.transact([{ op: "put", record: rec(n), expectedVersion: n - 1 }]);
        await writer.untilDurable();
        await nextTurn(); // a reader looks once a turn
        // It once answered version 1 for as long as it wrote nothing itself.
        expect(await reader.get("k")).toMatchObject({ version: n, data: n });
      }
      await writer.transact([{ op: "delete", key: "k", expectedVersion: 3 }]);
      await writer.untilDurable();
      await nextTurn();
      expect(await reader.get("k")).toBeUndefined();
      await writer.close();
      await reader.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("SQLite expiry", () => {
  it("deletes the records whose expiresAt has passed when swept (the folder's sole worker, at opening), and nothing else", async () => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-expiry-"));
    const path = join(dir, "state.db");
    try {
      let now = Date.parse("2026-01-01T00:00:00.000Z");
      const clock = () => new Date(now);
      const store = new SqliteStateStore({ path, clock });
      const rec = (key: string, expiresAt?: string) => ({
        op: "put" as const,
        record: {
          key,
          kind: "claim",
          updatedAt: "2026-01-01T00:00:00.000Z",
          data: {},
          ...(expiresAt ? { expiresAt } : {}),
        },
        expectedVersion: 0,
      });
      await store.transact([
        rec("soon", "2026-01-02T00:00:00.000Z"),
        rec("later", "2026-02-01T00:00:00.000Z"),
        rec("never"),
      ]);
      await store.append("s1", [taskCreated(taskUrn("expiry"))], 0);
      await store.close();

      now = Date.parse("2026-01-03T00:00:00.000Z");
      const reopened = new SqliteStateStore({ path, clock });
      expect(reopened.sweepExpired()).toBe(1);
      expect(await reopened.get("soon")).toBeUndefined();
      expect((await reopened.get("later"))?.expiresAt).toBe("2026-02-01T00:00:00.000Z");
      expect(await reopened.get("never")).toBeDefined();
      expect(await reopened.streamVersion("s1")).toBe(1); // the event log never expires
      await reopened.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("is swept by a local runtime that holds the data folder's lock, not by one that only reads", async () => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-expiry-"));
    try {
      const config = { mode: "local" as const, tenant: "acme", dataDir: dir, durable: false };
      const clock = () => new Date("2026-01-03T00:00:00.000Z");
      const first = createLocalRuntime(config, { clock });
      await first.state.transact([
        {
          op: "put",
          record: {
            key: "gone",
            kind: "claim",
            updatedAt: "x",
            data: {},
            expiresAt: "2026-01-02T00:00:00.000Z",
          },
          expectedVersion: 0,
        },
      ]);
      await first.close();
      const reader = createLocalRuntime(config, { clock });
      expect(await reader.state.get("gone")).toBeDefined();
      await reader.close();
      const worker = createLocalRuntime(config, { clock, lockAs: "arbor serve" });
      expect(await worker.state.get("gone")).toBeUndefined();
      await worker.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("adds the expiry column to a data folder made before it", async () => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-expiry-"));
    const path = join(dir, "state.db");
    try {
      const old = new Database(path);
      old.exec(`CREATE TABLE records (key TEXT PRIMARY KEY, kind TEXT NOT NULL, parent TEXT, status TEXT,
        version INTEGER NOT NULL, updated_at TEXT NOT NULL, data TEXT NOT NULL);
        INSERT INTO records VALUES ('old', 'task', NULL, 'open', 1, '2026-01-01T00:00:00.000Z', '{"n":1}');`);
      old.close();
      const store = new SqliteStateStore({ path });
      expect(await store.get("old")).toMatchObject({ key: "old", status: "open", data: { n: 1 } });
      await store.transact([
        {
          op: "put",
          record: {
            key: "new",
            kind: "claim",
            updatedAt: "2026-01-01T00:00:00.000Z",
            data: {},
            expiresAt: "2030-01-01T00:00:00.000Z",
          },
          expectedVersion: 0,
        },
      ]);
      expect((await store.get("new"))?.expiresAt).toBe("2030-01-01T00:00:00.000Z");
      await store.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
