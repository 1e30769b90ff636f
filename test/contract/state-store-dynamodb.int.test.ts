import { randomBytes } from "node:crypto";
import { DeleteTableCommand, DynamoDBClient, GetItemCommand, PutItemCommand } from "@aws-sdk/client-dynamodb";
import { describe, expect, inject, it } from "vitest";
import { TTL_ATTRIBUTE } from "../../shared/adapters/aws/dynamo-schema.ts";
import { DynamoStateStore } from "../../shared/adapters/aws/dynamo-state-store.ts";
import { EventLogAudit } from "../../shared/adapters/shared/event-log-audit.ts";
import { RETENTION_MS } from "../../shared/domain/retention.ts";
import { taskCreated, taskStarted, taskUrn } from "../fixtures/event-builders.ts";
import { laggingIndex } from "../peers/lagging-dynamo.ts";
import { auditLogContract } from "./audit-log.contract.ts";
import { projectionsContract } from "./projections.contract.ts";
import { stateStoreContract } from "./state-store.contract.ts";

// The real DynamoDB client against DynamoDB Local (started by test/peers/global-setup.ts).
const client = new DynamoDBClient({
  endpoint: inject("dynamoEndpoint"),
  region: "us-east-1",
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
});

stateStoreContract("DynamoDB (DynamoDB Local)", async () => {
  const tableName = `arbor-test-${randomBytes(6).toString("hex")}`;
  await DynamoStateStore.ensureTable(client, tableName);
  // The log's settling time off: the contract reads what it just wrote (settling: below).
  const store = new DynamoStateStore({ client, tableName, logSettleMs: 0 });
  return {
    store,
    cleanup: async () => {
      await client.send(new DeleteTableCommand({ TableName: tableName }));
    },
  };
});

/** A fresh table seen through indexes that lag `lag` writes, as DynamoDB's GSIs may. */
async function laggingStore(lag = 3) {
  const tableName = `arbor-test-${randomBytes(6).toString("hex")}`;
  await DynamoStateStore.ensureTable(client, tableName);
  const lagging = laggingIndex(client, { lag });
  return {
    store: new DynamoStateStore({ client: lagging.client, tableName, logSettleMs: 0 }),
    settleIndexes: () => lagging.settle(),
    cleanup: async () => {
      await client.send(new DeleteTableCommand({ TableName: tableName }));
    },
  };
}

// The same contract with indexes that lag as DynamoDB's GSIs may: everything but an index read
// right after a write must hold as it is.
stateStoreContract("DynamoDB (DynamoDB Local, indexes lagging 3 writes)", () => laggingStore());

describe("the lagging index (test/peers/lagging-dynamo.ts) lags as a GSI may", () => {
  const record = (key: string, status: string, data: unknown = {}) => ({
    key,
    kind: "task",
    parent: "P",
    status,
    updatedAt: "2026-03-01T00:00:00.000Z",
    data,
  });

  it("hides a new item, shows an old status and old data, lists a deleted item, then catches up", async () => {
    const tableName = `arbor-test-${randomBytes(6).toString("hex")}`;
    await DynamoStateStore.ensureTable(client, tableName);
    const lagging = laggingIndex(client, { lag: 2 });
    const store = new DynamoStateStore({ client: lagging.client, tableName });
    try {
      await store.transact([{ op: "put", record: record("a", "open", { n: 1 }), expectedVersion: 0 }]);
      await store.transact([{ op: "put", record: record("gone", "open"), expectedVersion: 0 }]);
      lagging.settle();
      await store.transact([{ op: "put", record: record("a", "done", { n: 2 }), expectedVersion: 1 }]);
      await store.transact([{ op: "delete", key: "gone", expectedVersion: 1 }]);
      await store.transact([{ op: "put", record: record("b", "open"), expectedVersion: 0 }]);
      // Three writes since the index caught up, two of them not visible yet: only a's move is.
      const listed = (await store.byParent<{ n?: number }>("P")).items;
      expect(listed.map((r) => [r.key, r.status, r.data.n])).toEqual([
        ["a", "done", 2],
        ["gone", "open", undefined],
      ]);
      lagging.lag = 3;
      expect((await store.byStatus("task", "open")).items.map((r) => r.key)).toEqual(["a", "gone"]);
      expect((await store.byStatus("task", "done")).items).toEqual([]);
      // The base table is exact whatever the index says.
      expect((await store.get<{ n: number }>("a"))?.data.n).toBe(2);
      expect(await store.get("gone")).toBeUndefined();
      lagging.settle();
      expect((await store.byParent("P")).items.map((r) => [r.key, r.status])).toEqual([
        ["a", "done"],
        ["b", "open"],
      ]);
      expect(lagging.stats.stale).toBeGreaterThanOrEqual(2);
    } finally {
      await client.send(new DeleteTableCommand({ TableName: tableName }));
    }
  });
});

describe("the byStatus index spread over shards", () => {
  it("still finds records written with the unsharded key of the layout before, once each, also once rewritten", async () => {
    const tableName = `arbor-test-${randomBytes(6).toString("hex")}`;
    await DynamoStateStore.ensureTable(client, tableName);
    const store = new DynamoStateStore({ client, tableName });
    try {
      // As the adapter wrote a record before shards: gsi2pk = <kind>#<status>.
      await client.send(
        new PutItemCommand({
          TableName: tableName,
          Item: {
            pk: { S: "R#old" },
            sk: { S: "R" },
            key: { S: "old" },
            kind: { S: "task" },
            status: { S: "open" },
            version: { N: "1" },
            updatedAt: { S: "2026-01-01T00:00:00.000Z" },
            data: { S: "{}" },
            gsi2pk: { S: "task#open" },
            gsi2sk: { S: "2026-01-01T00:00:00.000Z#old" },
          },
        }),
      );
      await store.transact([
        {
          op: "put",
          record: {
            key: "new",
            kind: "task",
            status: "open",
            updatedAt: "2026-01-02T00:00:00.000Z",
            data: {},
          },
          expectedVersion: 0,
        },
      ]);
      expect((await store.byStatus("task", "open")).items.map((r) => r.key)).toEqual(["old", "new"]);
      await store.transact([
        {
          op: "put",
          record: {
            key: "old",
            kind: "task",
            status: "open",
            updatedAt: "2026-01-03T00:00:00.000Z",
            data: {},
          },
          expectedVersion: 1,
        },
      ]);
      expect((await store.byStatus("task", "open")).items.map((r) => r.key)).toEqual(["new", "old"]);
      const raw = await client.send(
        new GetItemCommand({ TableName: tableName, Key: { pk: { S: "R#old" }, sk: { S: "R" } } }),
      );
      expect(raw.Item?.gsi2pk?.S).toMatch(/^task#open#[0-7]$/);
    } finally {
      await client.send(new DeleteTableCommand({ TableName: tableName }));
    }
  });
});

describe("DynamoDB's TTL attribute", () => {
  it("is written on event-id guards (30 days after recording) and on records that say so, never on events or other records", async () => {
    const tableName = `arbor-test-${randomBytes(6).toString("hex")}`;
    await DynamoStateStore.ensureTable(client, tableName);
    const now = Date.parse("2026-05-01T12:00:00.000Z");
    const store = new DynamoStateStore({ client, tableName, clock: () => new Date(now) });
    const raw = async (pk: string, sk: string) =>
      (await client.send(new GetItemCommand({ TableName: tableName, Key: { pk: { S: pk }, sk: { S: sk } } })))
        .Item;
    try {
      const t = taskUrn("ttl");
      const created = taskCreated(t);
      await store.transact([
        { op: "append", streamId: t, events: [created], expectedVersion: 0 },
        {
          op: "put",
          record: {
            key: "claim",
            kind: "claim",
            updatedAt: "x",
            data: {},
            expiresAt: "2026-06-01T00:00:00.100Z",
          },
          expectedVersion: 0,
        },
        {
          op: "put",
          record: { key: t, kind: "task", status: "open", updatedAt: "x", data: {} },
          expectedVersion: 0,
        },
        { op: "add", key: "usage", kind: "usage", updatedAt: "x", amounts: { n: 1 } },
      ]);
      const guard = await raw(`I#${created.id}`, "I");
      expect(guard?.[TTL_ATTRIBUTE]).toEqual({ N: String((now + RETENTION_MS.eventIdGuard) / 1000) });
      expect((await raw("R#claim", "R"))?.[TTL_ATTRIBUTE]).toEqual({
        N: String(Date.parse("2026-06-01T00:00:01.000Z") / 1000),
      });
      for (const [pk, sk] of [
        [`S#${t}`, "E#000000000001"],
        [`R#${t}`, "R"],
        ["R#usage", "R"],
      ] as const) {
        const item = await raw(pk, sk);
        expect(item).toBeDefined();
        expect(item?.[TTL_ATTRIBUTE]).toBeUndefined();
      }
    } finally {
      await client.send(new DeleteTableCommand({ TableName: tableName }));
    }
  });
});

projectionsContract("DynamoDB (DynamoDB Local, indexes lagging 3 writes)", () => laggingStore());

describe("the global log on DynamoDB: time-ordered, read behind a settling time", () => {
  const withTable = async (run: (tableName: string) => Promise<void>) => {
    const tableName = `arbor-test-${randomBytes(6).toString("hex")}`;
    await DynamoStateStore.ensureTable(client, tableName);
    try {
      await run(tableName);
    } finally {
      await client.send(new DeleteTableCommand({ TableName: tableName }));
    }
  };

  it("gives an event once it is older than the settling time, never before", async () => {
    await withTable(async (tableName) => {
      let now = Date.parse("2026-11-29T12:00:00.000Z");
      const store = new DynamoStateStore({
        client,
        tableName,
        clock: () => new Date(now),
        logSettleMs: 5_000,
      });
      const t = taskUrn("settle");
      await store.append(t, [taskCreated(t)], 0);
      expect(await store.readAll()).toEqual({ events: [] });
      now += 5_000;
      expect((await store.readAll()).events.map((e) => e.type)).toEqual(["TaskCreated"]);
    });
  });

  it("reads on from month to month, each month's shards merged in order", async () => {
    await withTable(async (tableName) => {
      let now = Date.parse("2026-11-30T23:59:59.990Z");
      const store = new DynamoStateStore({ client, tableName, clock: () => new Date(now), logSettleMs: 0 });
      const streams = Array.from({ length: 12 }, (_, i) => taskUrn(`month-${i}`));
      for (const t of streams) {
        await store.append(t, [taskCreated(t), taskStarted(t)], 0);
        now += 1; // the last ones in December
      }
      now = Date.parse("2027-02-01T00:00:00.000Z");
      const all = await store.readAll({ limit: 1000 });
      expect(all.events.map((e) => `${e.streamId}#${e.seq}`)).toEqual(
        streams.flatMap((t) => [`${t}#1`, `${t}#2`]),
      );
      expect(new Set(all.events.map((e) => e.recordedAt.slice(0, 7)))).toEqual(
        new Set(["2026-11", "2026-12"]),
      );
      // From November's last event, December's come, in order, page by page.
      const novemberLast = all.events.filter((e) => e.recordedAt.startsWith("2026-11")).at(-1)
        ?.position as string;
      const page = await store.readAll({ from: novemberLast, limit: 3 });
      expect(page.events.map((e) => e.recordedAt.slice(0, 7))).toEqual(["2026-12", "2026-12", "2026-12"]);
      expect(page.events[0]?.position).toBe(
        all.events.find((e) => e.recordedAt.startsWith("2026-12"))?.position,
      );
    });
  });
});

auditLogContract("event log of the DynamoDB state store (DynamoDB Local)", async () => {
  const tableName = `arbor-test-${randomBytes(6).toString("hex")}`;
  await DynamoStateStore.ensureTable(client, tableName);
  return {
    audit: new EventLogAudit(new DynamoStateStore({ client, tableName })),
    cleanup: async () => {
      await client.send(new DeleteTableCommand({ TableName: tableName }));
    },
  };
});
