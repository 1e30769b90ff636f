import { randomBytes } from "node:crypto";
import { DeleteTableCommand, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { afterAll, afterEach, describe, expect, inject, it } from "vitest";
import { DynamoStateStore } from "../../shared/adapters/aws/dynamo-state-store.ts";
import type { TaskEvent } from "../../shared/domain/events.ts";
import { leafSlotsKey } from "../../shared/engine/leaf-slots.ts";
import { type LaggingIndex, laggingIndex } from "../peers/lagging-dynamo.ts";
import { Dies, isRootBatch, loseBatch } from "./batch-crash.ts";
import { Harness } from "./engine-harness.ts";
import { areas, GENERALIST } from "./scenarios.ts";

/**
 * A process that dies between a plan's concurrent TaskCreated batches, on DynamoDB Local with
 * byParent and byStatus indexes lagging 12 writes (test/peers/lagging-dynamo.ts): the parts of
 * an area may be on record before their area and the root, and the indexes show them late. The
 * plan delivered again makes the rest, each task once, and the request ends with exact counts.
 */
const client = new DynamoDBClient({
  endpoint: inject("dynamoEndpoint"),
  region: "us-east-1",
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
});
const tables: string[] = [];
let lagging: LaggingIndex;
let h: Harness;

afterEach(() => h?.close());
afterAll(async () => {
  for (const TableName of tables) await client.send(new DeleteTableCommand({ TableName }));
  client.destroy();
});

const GROUPS = [12, 12, 12];

async function crashedPlan(lost: (events: readonly TaskEvent[]) => boolean): Promise<string> {
  const tableName = `arbor-batches-${randomBytes(6).toString("hex")}`;
  tables.push(tableName);
  await DynamoStateStore.ensureTable(client, tableName);
  lagging = laggingIndex(client, { lag: 12 });
  h = await Harness.create({
    script: areas(GROUPS).script,
    assistants: GENERALIST,
    bus: { maxAttempts: 1 },
    settings: { leavesAtOnce: 3, leavesWhenIdle: 6 },
    state: () => new DynamoStateStore({ client: lagging.client, tableName }),
  });
  await h.restart();
  const dies = new Dies();
  await h.open(dies);
  const seen = loseBatch(h, dies, lost);
  const { rootTaskId } = await h.submit("survey every area");
  await h.idle();
  expect(seen).toEqual({ lost: 1, committed: 1 });
  await h.restart(); // a new process, no faults
  return rootTaskId;
}

async function expectWhole(rootTaskId: string): Promise<void> {
  await h.runToEnd(rootTaskId, { afterIdle: () => lagging.settle() });
  lagging.settle();
  const tree = await h.tree(rootTaskId);
  expect(tree.size).toBe(1 + GROUPS.length + 36);
  expect([...tree.values()].filter((v) => v.status !== "done").map((v) => v.title)).toEqual([]);
  for (const v of tree.values())
    expect((await h.rt.state.readStream(v.taskId)).filter((e) => e.type === "TaskCreated")).toHaveLength(1);
  expect(await h.rt.tasks.childCounts(rootTaskId)).toEqual({ created: 3, ended: 3 });
  for (const area of await h.rt.tasks.children(rootTaskId))
    expect(await h.rt.tasks.childCounts(area.taskId)).toEqual({ created: 12, ended: 12 });
  expect((await h.rt.state.get(leafSlotsKey(rootTaskId)))?.data).toEqual({ running: [], parked: [] });
}

describe("a process that dies between a plan's concurrent TaskCreated batches, on DynamoDB with lagging indexes", () => {
  it("the parts' batch on record, the root's not: the rest is made once and the request ends", async () => {
    const rootTaskId = await crashedPlan(isRootBatch);
    expect(await h.rt.tasks.view(rootTaskId)).toBeUndefined();
    await expectWhole(rootTaskId);
  });

  it("the root's batch on record, the parts' not: the rest is made once and the request ends", async () => {
    const rootTaskId = await crashedPlan((events) => !isRootBatch(events));
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("open");
    await expectWhole(rootTaskId);
  });
});
