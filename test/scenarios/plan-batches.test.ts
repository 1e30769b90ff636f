import { afterEach, describe, expect, it } from "vitest";
import { DEFAULT_BUDGETS } from "../../shared/domain/budgets.ts";
import type { TaskEvent } from "../../shared/domain/events.ts";
import { RECORD_MANY_LIMIT } from "../../shared/store/task-log.ts";
import { Harness } from "./engine-harness.ts";
import { areas, GENERALIST } from "./scenarios.ts";

/**
 * A plan's TaskCreated events are written in batches of RECORD_MANY_LIMIT, each atomic
 * (engine/steps/planner.ts): batches that change no common child count (each sibling group whole
 * in one) are written at once; a sibling group larger than a batch is written batch after batch.
 * Either way every task is created once and every parent counts its children right.
 */
let h: Harness;
afterEach(() => h?.close());

/** The TaskCreated transactions of a run: how many, and how many were under way at once. */
function watchBatches(hh: Harness): { batches: number; most: number } {
  const seen = { batches: 0, most: 0, now: 0 };
  const log = hh.rt.tasks;
  const recordMany = log.recordMany.bind(log);
  log.recordMany = async (events: readonly TaskEvent[]) => {
    seen.batches++;
    seen.most = Math.max(seen.most, ++seen.now);
    try {
      return await recordMany(events);
    } finally {
      seen.now--;
    }
  };
  return seen;
}

async function run(groups: number[], maxFanOut: number) {
  const { script } = areas(groups);
  h = await Harness.create({
    script,
    assistants: GENERALIST,
    settings: { defaultBudgets: { ...DEFAULT_BUDGETS, maxFanOut } },
  });
  const batches = watchBatches(h);
  const { rootTaskId } = await h.submit("survey every area");
  await h.idle();
  const tree = await h.tree(rootTaskId);
  return { rootTaskId, tree, batches };
}

describe("a plan's tasks are created in batches", () => {
  it("sibling groups that fit a batch: the batches are written at once, each parent counts its children", async () => {
    const groups = [12, 12, 12];
    const { rootTaskId, tree, batches } = await run(groups, 12);
    expect(tree.size).toBe(1 + groups.length + 36);
    expect([...tree.values()].every((v) => v.status === "done")).toBe(true);
    expect(batches.batches).toBe(2); // [root, 3 areas, 12 parts], [12 parts, 12 parts]
    expect(batches.most).toBe(2);
    expect((await h.rt.tasks.childCounts(rootTaskId))?.created).toBe(groups.length);
    for (const child of await h.rt.tasks.children(rootTaskId))
      expect((await h.rt.tasks.childCounts(child.taskId))?.created).toBe(12);
  });

  it("a sibling group larger than a batch: written batch after batch, its parent counts every child", async () => {
    const groups = [RECORD_MANY_LIMIT + 5];
    const { rootTaskId, tree, batches } = await run(groups, RECORD_MANY_LIMIT + 5);
    expect(tree.size).toBe(2 + RECORD_MANY_LIMIT + 5);
    expect([...tree.values()].every((v) => v.status === "done")).toBe(true);
    expect(batches.most).toBe(1);
    const [area] = await h.rt.tasks.children(rootTaskId);
    expect((await h.rt.tasks.childCounts(String(area?.taskId)))?.created).toBe(RECORD_MANY_LIMIT + 5);
  });
});
