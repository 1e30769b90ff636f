/**
 * What keeping a request's feed costs (shared/notify/feed.ts `reconcile`) on a W1-shaped tree of
 * 111 tasks (1 root, 10 children, 10 leaves each): the store calls of one reconcile (each is one
 * DynamoDB request: a GetItem, a Query page, a TransactWriteItems) and its wall time, at the points
 * of a request's life a stream reconciles at:
 *
 *   first     the tree created and started (222 events), nothing copied yet
 *   idle      every task running, nothing new (what each recheck of a live stream costs)
 *   one       one new event somewhere in the tree
 *   ending    every task ended (111 terminal events), copied and closed
 *   complete  the feed complete (what a reconnect after the end costs)
 *
 *   node bench/feed-reconcile.ts            # SQLite (a file), then DynamoDB Local
 *   node bench/feed-reconcile.ts --sqlite   # SQLite only
 *   node bench/feed-reconcile.ts --sqlite --wide   # 1,011 tasks (10 children, 100 leaves each)
 *
 * DynamoDB Local needs Java 17 (as the integration tests). Not a test: times vary with the machine.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DeleteTableCommand, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoStateStore } from "../shared/adapters/aws/dynamo-state-store.ts";
import { SqliteObjectStore } from "../shared/adapters/local/sqlite-object-store.ts";
import { SqliteStateStore } from "../shared/adapters/local/sqlite-state-store.ts";
import type { TaskEvent } from "../shared/domain/events.ts";
import { withMeta } from "../shared/domain/resources.ts";
import { tenantUrn, type Urn } from "../shared/domain/urn.ts";
import { feedCursorKey, reconcile } from "../shared/notify/feed.ts";
import type { StateStore } from "../shared/ports/state-store.ts";
import { ResourceStore } from "../shared/store/resource-store.ts";
import { TaskLog } from "../shared/store/task-log.ts";
import { startDynamoLocal } from "../test/peers/global-setup.ts";

const CHILDREN = 10;
/** `--wide`: 100 leaves a child (1,011 tasks, as bench/run.ts's scale line). */
const LEAVES = process.argv.includes("--wide") ? 100 : 10;

function counting(store: StateStore) {
  const calls: Record<string, number> = {};
  const proxy = new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        calls[String(prop)] = (calls[String(prop)] ?? 0) + 1;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return {
    proxy,
    calls,
    reset: () => {
      for (const k of Object.keys(calls)) delete calls[k];
    },
  };
}

let at = Date.parse("2026-06-01T09:00:00.000Z");
const actor = { id: "agent_bench", kind: "agent" as const };
const ev = <T extends TaskEvent["type"]>(type: T, payload: Extract<TaskEvent, { type: T }>["payload"]) =>
  ({
    id: `e${randomBytes(8).toString("hex")}`,
    v: 1,
    at: new Date(at++).toISOString(),
    actor,
    type,
    payload,
  }) as unknown as TaskEvent;

async function run(name: string, state: StateStore, objects: SqliteObjectStore) {
  const tasks = new TaskLog(state);
  const counted = counting(state);
  const deps = {
    state: counted.proxy,
    tasks: new TaskLog(counted.proxy),
    resources: new ResourceStore(objects),
  };
  const conversation = withMeta({ type: "common.Conversation", name: "c", parent: tenantUrn("bench") }).id;
  const message = withMeta({
    type: "common.Message",
    name: `m${randomBytes(4).toString("hex")}`,
    parent: conversation,
  }).id;
  const root = withMeta({ type: "plan.Task", name: "root", parent: message }).id as Urn;
  const tree: { id: Urn; parent?: Urn }[] = [{ id: root }];
  for (let c = 0; c < CHILDREN; c++) {
    const child = withMeta({ type: "plan.Task", name: `c${c}`, parent: root }).id as Urn;
    tree.push({ id: child, parent: root });
    for (let l = 0; l < LEAVES; l++)
      tree.push({
        id: withMeta({ type: "plan.Task", name: `l${l}`, parent: child }).id as Urn,
        parent: child,
      });
  }
  for (const t of tree) {
    await objects.put(`${t.id}.json`, "{}");
    await tasks.record(
      ev("TaskCreated", {
        taskId: t.id,
        title: "a task",
        intent: "do it",
        priority: "normal",
        ...(t.parent ? { parentTaskId: t.parent } : {}),
      }),
    );
    await tasks.record(ev("TaskStarted", { taskId: t.id }));
  }
  const rows: string[] = [];
  const measure = async (label: string) => {
    counted.reset();
    const t0 = performance.now();
    const r = await reconcile(deps, root);
    const ms = performance.now() - t0;
    const stored = await state.get(feedCursorKey(root));
    const bytes = Buffer.byteLength(JSON.stringify(stored?.data ?? {}));
    const calls = Object.entries(counted.calls)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ");
    rows.push(
      `${name.padEnd(16)} ${label.padEnd(9)} ${ms.toFixed(1).padStart(8)} ms  copied ${String(r.appended).padStart(4)}  cursor ${String(bytes).padStart(6)} B  calls: ${calls}`,
    );
  };
  await measure("first");
  await measure("idle");
  await tasks.record(ev("TaskCompleted", { taskId: tree[5]?.id as Urn }));
  await measure("one");
  for (const t of [...tree].reverse().filter((x) => x.id !== tree[5]?.id))
    await tasks.record(ev("TaskCompleted", { taskId: t.id }));
  await measure("ending");
  await measure("complete");
  return rows;
}

async function main() {
  const sqliteOnly = process.argv.includes("--sqlite");
  const rows: string[] = [];
  const dir = await mkdtemp(join(tmpdir(), "arbor-feed-bench-"));
  try {
    const state = new SqliteStateStore({ path: join(dir, "state.db") });
    const objects = new SqliteObjectStore({ path: join(dir, "objects.db") });
    rows.push(...(await run("SQLite (file)", state, objects)));
    await state.close();
    if (!sqliteOnly) {
      const { endpoint, child } = await startDynamoLocal();
      try {
        const client = new DynamoDBClient({
          endpoint,
          region: "us-east-1",
          credentials: { accessKeyId: "bench", secretAccessKey: "bench" },
        });
        const tableName = `arbor-bench-${randomBytes(4).toString("hex")}`;
        await DynamoStateStore.ensureTable(client, tableName);
        rows.push(...(await run("DynamoDB Local", new DynamoStateStore({ client, tableName }), objects)));
        await client.send(new DeleteTableCommand({ TableName: tableName }));
      } finally {
        child.kill();
      }
    }
    await objects.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  process.stdout.write(
    `reconcile of a ${1 + CHILDREN + CHILDREN * LEAVES}-task tree (1 + ${CHILDREN} + ${CHILDREN * LEAVES})\n${rows.join("\n")}\n`,
  );
}

await main();
