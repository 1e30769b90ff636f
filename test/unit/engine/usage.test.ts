import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SqliteStateStore } from "../../../shared/adapters/local/sqlite-state-store.ts";
import type { EngineDeps } from "../../../shared/engine/context.ts";
import { recordUsage, USAGE_SHARDS, usageOf } from "../../../shared/engine/usage.ts";

const root = "cld:common.Tenant.acme/common.Conversation.c/common.Message.m/plan.Task.root";
const part = (i: number) => `${root}/plan.Task.part${i}`;
const leaf = (i: number, j: number) => `${part(i)}/plan.Task.leaf${j}`;

describe("usage counters", () => {
  let store: SqliteStateStore;
  let deps: EngineDeps;
  beforeEach(() => {
    store = new SqliteStateStore({ path: ":memory:" });
    deps = {
      state: store,
      clock: () => new Date("2026-01-01T00:00:00.000Z"),
      settings: { modelPrices: { priced: { input: 1000, output: 2000 } } },
    } as unknown as EngineDeps;
  });
  afterEach(() => store.close());

  // What recording each TaskCreated adds to its parent's child count (store/task-log.ts).
  const created = (parent: string, n: number) =>
    store.transact([
      { op: "add", key: `children#${parent}`, kind: "childCounts", updatedAt: "x", amounts: { created: n } },
    ]);

  it("rolls every call up to each ancestor, spread over shards, and sums them on read", async () => {
    const calls = [
      [leaf(0, 0), 10],
      [leaf(0, 1), 20],
      [leaf(1, 0), 30],
      [leaf(1, 1), 40],
      [part(1), 5], // the part's own evaluation call
    ] as const;
    await Promise.all([created(root, 2), created(part(0), 2), created(part(1), 2)]);
    await Promise.all(
      calls.map(([task, tokens]) =>
        recordUsage(deps, task, { usage: { inputTokens: tokens, outputTokens: 1 }, model: "priced" }, true),
      ),
    );
    expect(await usageOf(deps, root)).toEqual({
      turns: 0,
      inputTokens: 105,
      outputTokens: 5,
      costUsd: 0.115,
      unpricedCalls: 0,
    });
    expect(await usageOf(deps, part(1))).toMatchObject({ turns: 1, inputTokens: 75, outputTokens: 3 });
    expect(await usageOf(deps, leaf(1, 1))).toMatchObject({ turns: 1, inputTokens: 40, outputTokens: 1 });
    // The root's own counter holds only its own calls; its descendants' went to its shards.
    expect(await store.get(`usage#${root}`)).toBeUndefined();
    const shards = await Promise.all(
      Array.from({ length: USAGE_SHARDS }, (_, n) => store.get(`usage#${root}#${n}`)),
    );
    expect(shards.filter(Boolean).length).toBeGreaterThan(1);
  });

  it("still counts what the layout before shards added to an ancestor's own counter", async () => {
    await store.transact([
      {
        op: "add",
        key: `usage#${root}`,
        kind: "usage",
        updatedAt: "x",
        amounts: { inputTokens: 1000, costUsd: 1 },
      },
    ]);
    await created(root, 1);
    await recordUsage(
      deps,
      leaf(0, 0),
      { usage: { inputTokens: 10, outputTokens: 0 }, model: "priced" },
      true,
    );
    expect(await usageOf(deps, root)).toMatchObject({ inputTokens: 1010, costUsd: 1.01 });
  });

  it("reads a task's shards only when it has children: a leaf's usage is one read of its own counter", async () => {
    await recordUsage(
      deps,
      leaf(0, 0),
      { usage: { inputTokens: 10, outputTokens: 2 }, model: "priced" },
      true,
    );
    const read: string[] = [];
    const counting = {
      ...deps,
      state: {
        get: (key: string) => {
          read.push(key);
          return store.get(key);
        },
      },
    } as unknown as EngineDeps;
    expect(await usageOf(counting, leaf(0, 0))).toMatchObject({ turns: 1, inputTokens: 10, outputTokens: 2 });
    expect(read).toEqual([`children#${leaf(0, 0)}`, `usage#${leaf(0, 0)}`]);
    read.length = 0;
    await created(part(0), 1);
    expect(await usageOf(counting, part(0))).toMatchObject({ inputTokens: 10, outputTokens: 2 });
    expect(read).toHaveLength(2 + USAGE_SHARDS);
  });

  it("prices each call at the model that answered it, and counts a model without a price as unknown, not as another's", async () => {
    await created(root, 1);
    const mixed = {
      ...deps,
      settings: { modelPrices: { cheap: { input: 1, output: 1 }, dear: { input: 10, output: 10 } } },
    } as unknown as EngineDeps;
    const call = (model: string) => ({ usage: { inputTokens: 500_000, outputTokens: 500_000 }, model });
    await recordUsage(mixed, part(0), call("cheap"), true);
    await recordUsage(mixed, part(0), call("dear"), true);
    expect(await usageOf(deps, part(0))).toMatchObject({ costUsd: 11, unpricedCalls: 0, turns: 2 });
    await recordUsage(mixed, part(0), call("self-hosted-llama"), true);
    expect(await usageOf(deps, part(0))).toMatchObject({
      costUsd: 11,
      unpricedCalls: 1,
      inputTokens: 1_500_000,
    });
    // The ancestors see the same: known dollars, and that some calls have no price.
    expect(await usageOf(deps, root)).toMatchObject({ costUsd: 11, unpricedCalls: 1 });
    // A catalogued model needs no operator price: Haiku 4.5 through the US profile, 1.1 + 5.5 per million.
    await recordUsage(deps, part(1), call("us.anthropic.claude-haiku-4-5-20251001-v1:0"), true);
    expect((await usageOf(deps, part(1))).costUsd).toBeCloseTo(0.55 + 2.75, 9);
  });
});
