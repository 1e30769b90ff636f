import { randomBytes } from "node:crypto";
import { DeleteTableCommand, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import { ASSISTANTS, script as offsite, REQUEST } from "../../examples/offsite/scenario.ts";
import { DynamoStateStore } from "../../shared/adapters/aws/dynamo-state-store.ts";
import type { TaskEvent } from "../../shared/domain/events.ts";
import type { TaskSpec } from "../../shared/domain/resources.ts";
import { taskDepth } from "../../shared/domain/urn.ts";
import type { FaultPoint } from "../../shared/engine/context.ts";
import { leafSlotsKey } from "../../shared/engine/leaf-slots.ts";
import { type LaggingIndex, laggingIndex } from "../peers/lagging-dynamo.ts";
import { crashWhilePlanning, isRootBatch } from "./batch-crash.ts";
import { CrashAt, Harness, type HarnessOptions, PERSON } from "./engine-harness.ts";
import { areas, fanOut, GENERALIST, watchLeaves } from "./scenarios.ts";

/**
 * The engine's invariant and crash paths (engine-invariants.test.ts, engine-crash.test.ts) with
 * the state store on DynamoDB Local whose byParent and byStatus indexes lag 12 writes
 * (test/peers/lagging-dynamo.ts), everything else local. Index reads right after writes are
 * stale here, as DynamoDB's GSIs may be: no run may end otherwise than with exact indexes, nor
 * wait for the watchdog where the exact run does not.
 */
const client = new DynamoDBClient({
  endpoint: inject("dynamoEndpoint"),
  region: "us-east-1",
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
});
const tables: string[] = [];
let lagging: LaggingIndex;
let h: Harness;

/** A harness whose state lives in a fresh table seen through lagging indexes (kept across restarts). */
async function onLaggingDynamo(options: HarnessOptions): Promise<Harness> {
  const tableName = `arbor-lag-${randomBytes(6).toString("hex")}`;
  tables.push(tableName);
  await DynamoStateStore.ensureTable(client, tableName);
  lagging = laggingIndex(client, { lag: 12 });
  return Harness.create({
    ...options,
    state: () => new DynamoStateStore({ client: lagging.client, tableName }),
  });
}

/** The tree as it is: the test's own reads wait for the indexes to catch up. */
const treeOf = (hh: Harness, rootId: string) => {
  lagging?.settle();
  return hh.tree(rootId);
};

const evaluations = (hh: Harness) =>
  hh.llm.calls.filter((c) => c.tools?.some((t) => t.name === "report_evaluation")).length;

afterEach(() => h?.close());
afterAll(async () => {
  for (const TableName of tables) await client.send(new DeleteTableCommand({ TableName }));
  client.destroy();
});

describe("engine invariants on DynamoDB with lagging indexes", () => {
  it("six children finishing together, every event delivered twice: each completes once, the parent is judged once", async () => {
    h = await onLaggingDynamo({
      script: fanOut(6, 5).script,
      assistants: GENERALIST,
      bus: { deliveries: 2 },
    });
    const { rootTaskId } = await h.submit("survey six parts");
    await h.idle();
    const tree = await treeOf(h, rootTaskId);
    expect(tree.size).toBe(7);
    expect([...tree.values()].every((v) => v.status === "done")).toBe(true);
    expect(evaluations(h)).toBe(1);
    for (const v of tree.values())
      expect((await h.rt.state.readStream(v.taskId)).filter((e) => e.type === "TaskCompleted")).toHaveLength(
        1,
      );
    expect(lagging.stats.stale).toBeGreaterThan(0);
  });

  it("ten leaves, three slots of the request, every event delivered twice: three at most run, all end", async () => {
    h = await onLaggingDynamo({
      script: fanOut(10, 10).script,
      assistants: GENERALIST,
      settings: { leavesAtOnce: 3 },
      bus: { deliveries: 2 },
    });
    const leaves = watchLeaves(h, (id) => taskDepth(id) === 2);
    const { rootTaskId } = await h.submit("survey ten parts");
    await h.idle();
    const tree = await treeOf(h, rootTaskId);
    expect(tree.size).toBe(11);
    expect([...tree.values()].every((v) => v.status === "done")).toBe(true);
    expect(leaves.most).toBe(3);
    expect((await h.rt.state.get(leafSlotsKey(rootTaskId)))?.data).toEqual({ running: [], parked: [] });
  });

  it("three areas of twelve parts, every event delivered twice: the plan's two batches written at once, every child counted once", async () => {
    h = await onLaggingDynamo({
      script: areas([12, 12, 12]).script,
      assistants: GENERALIST,
      bus: { deliveries: 2 },
    });
    const { rootTaskId } = await h.submit("survey every area");
    await h.idle();
    const tree = await treeOf(h, rootTaskId);
    expect(tree.size).toBe(40);
    expect([...tree.values()].every((v) => v.status === "done")).toBe(true);
    expect((await h.rt.tasks.childCounts(rootTaskId))?.created).toBe(3);
    for (const area of await h.rt.tasks.children(rootTaskId))
      expect((await h.rt.tasks.childCounts(area.taskId))?.created).toBe(12);
  });

  it("a lazy plan, edited and approved, runs its parts and then the root's evaluation", async () => {
    h = await onLaggingDynamo({ script: fanOut(3).script, assistants: GENERALIST });
    const { rootTaskId } = await h.submit("survey three parts", "lazy");
    await h.idle();
    lagging.settle();
    const [approval] = await h.pending(rootTaskId);
    expect(approval?.purpose).toBe("approve_plan");
    const edited: TaskSpec = { name: "Survey", subtasks: [{ name: "part A" }, { name: "part B" }] };
    await h.engine.respond(
      approval?.meta.id as string,
      { selectedOptionId: "approve", inputValue: JSON.stringify(edited) },
      PERSON,
    );
    await h.idle();
    const tree = await treeOf(h, rootTaskId);
    expect([...tree].map(([title, v]) => `${title}:${v.status}`).sort()).toEqual([
      "Survey:done",
      "part A:done",
      "part B:done",
    ]);
    expect(evaluations(h)).toBe(1);
  });
});

type Outcome = { statuses: string[]; output: string | undefined };

/** As engine-crash.test.ts: the watchdog runs ten minutes on, when the indexes have long caught up. */
async function outcomeAtEnd(hh: Harness, rootId: string): Promise<Outcome> {
  await hh.runToEnd(rootId, { afterIdle: () => lagging?.settle() });
  const tree = await treeOf(hh, rootId);
  return {
    statuses: [...tree.values()].map((v) => `${v.title}:${v.status}`).sort(),
    output: (await hh.engine.result(rootId)).output,
  };
}

/** The crash points where a step reads an index right after writing (children, statuses). */
const CRASHES: [FaultPoint, string][] = [
  ["after-record", "TaskCreated"],
  ["before-publish", "TASK_READY"],
  ["after-record", "TaskStarted"],
  ["after-record", "TaskCompleted"],
  ["before-publish", "RESOURCE_PUT"],
  ["after-llm", "evaluate"],
];

describe("a process that dies between a plan's concurrent TaskCreated batches, on DynamoDB with lagging indexes", () => {
  // The parts of an area may be on record before their area and the root, and the indexes show
  // them late: the plan delivered again makes the rest, each task once, with exact counts.
  const GROUPS = [12, 12, 12];
  async function crashedPlan(lost: (events: readonly TaskEvent[]) => boolean): Promise<string> {
    h = await onLaggingDynamo({
      script: areas(GROUPS).script,
      assistants: GENERALIST,
      bus: { maxAttempts: 1 },
      settings: { leavesAtOnce: 3, leavesWhenIdle: 6 },
    });
    const { rootTaskId, seen } = await crashWhilePlanning(h, lost);
    expect(seen).toEqual({ lost: 1, committed: 1 });
    return rootTaskId;
  }

  async function expectWhole(rootTaskId: string): Promise<void> {
    await h.runToEnd(rootTaskId, { afterIdle: () => lagging.settle() });
    const tree = await treeOf(h, rootTaskId);
    expect(tree.size).toBe(1 + GROUPS.length + 36);
    expect([...tree.values()].filter((v) => v.status !== "done").map((v) => v.title)).toEqual([]);
    for (const v of tree.values())
      expect((await h.rt.state.readStream(v.taskId)).filter((e) => e.type === "TaskCreated")).toHaveLength(1);
    expect(await h.rt.tasks.childCounts(rootTaskId)).toEqual({ created: 3, ended: 3 });
    for (const area of await h.rt.tasks.children(rootTaskId))
      expect(await h.rt.tasks.childCounts(area.taskId)).toEqual({ created: 12, ended: 12 });
    expect((await h.rt.state.get(leafSlotsKey(rootTaskId)))?.data).toEqual({ running: [], parked: [] });
  }

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

describe("a crash after a step resumes to the same result on DynamoDB with lagging indexes", () => {
  let expected: Outcome;
  beforeAll(async () => {
    const reference = await Harness.create({ script: offsite, assistants: ASSISTANTS });
    const { rootTaskId } = await reference.submit(REQUEST);
    expected = await outcomeAtEnd(reference, rootTaskId);
    await reference.close();
  });

  it("the reference run (SQLite) ends with every task done", () => {
    expect(expected.statuses).toHaveLength(8);
    expect(expected.statuses.every((s) => s.endsWith(":done"))).toBe(true);
  });

  for (const [point, step] of CRASHES) {
    it(`crash ${point} ${step}`, async () => {
      const crash = new CrashAt(point, step);
      h = await onLaggingDynamo({ script: offsite, assistants: ASSISTANTS, bus: { maxAttempts: 1 } });
      await h.restart();
      await h.open(crash);
      const { rootTaskId } = await h.submit(REQUEST);
      await h.idle();
      expect(crash.fired).toBe(true);
      await h.restart();
      expect(await outcomeAtEnd(h, rootTaskId)).toEqual(expected);
    });
  }
});
