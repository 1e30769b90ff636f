import { afterEach, describe, expect, it } from "vitest";
import type { TaskEvent } from "../../shared/domain/events.ts";
import type { TaskSpec } from "../../shared/domain/resources.ts";
import type { EngineSettings } from "../../shared/engine/context.ts";
import { leafSlotsKey } from "../../shared/engine/leaf-slots.ts";
import { ConflictError } from "../../shared/kernel/errors.ts";
import { crashWhilePlanning, isRootBatch } from "./batch-crash.ts";
import { Harness } from "./engine-harness.ts";
import { areas, GENERALIST, isEvaluation, isPlan, pass, planOf, taskName } from "./scenarios.ts";

/**
 * A plan's TaskCreated batches are written at once (engine/steps/planner.ts): a process that dies
 * while they are under way leaves some committed and others not, in any order (a batch of a
 * request's parts before the one of its root). The plan delivered again must make the rest, each
 * task once, every parent counting its children exactly, and the request must end.
 */
let h: Harness;
afterEach(() => h?.close());

async function crashedPlan(
  lost: (events: readonly TaskEvent[]) => boolean,
  groups: number[],
  settings: Partial<EngineSettings> = {},
) {
  h = await Harness.create({
    script: areas(groups).script,
    assistants: GENERALIST,
    bus: { maxAttempts: 1 },
    settings,
  });
  const { rootTaskId, seen } = await crashWhilePlanning(h, lost);
  expect(seen.lost).toBe(1);
  expect(seen.committed).toBeGreaterThan(0);
  return rootTaskId;
}

async function expectWhole(rootTaskId: string, groups: number[]) {
  await h.runToEnd(rootTaskId);
  const tree = await h.tree(rootTaskId);
  expect(tree.size).toBe(1 + groups.length + groups.reduce((a, b) => a + b, 0));
  expect([...tree.values()].map((v) => `${v.title}:${v.status}`).filter((s) => !s.endsWith(":done"))).toEqual(
    [],
  );
  expect((await h.rt.tasks.childCounts(rootTaskId))?.created).toBe(groups.length);
  for (const [i, area] of (await h.rt.tasks.children(rootTaskId)).entries()) {
    const counts = await h.rt.tasks.childCounts(area.taskId);
    expect(counts?.created).toBe(groups[i]);
    expect(counts?.ended).toBe(groups[i]);
  }
  // Each task's stream holds one TaskCreated.
  for (const view of tree.values()) expect(view.createdAt).toBeDefined();
  const replayed = await h.rt.tasks.replay();
  for (const view of tree.values()) expect(replayed.get(view.taskId)?.status).toBe("done");
  // The leaves ran once each in the process that made them (none ran in the dead one).
  const leafCalls = h.llm.calls.filter(
    (c) => !c.tools?.some((t) => ["create_plan", "report_evaluation"].includes(t.name)),
  );
  expect(leafCalls).toHaveLength(groups.reduce((a, b) => a + b, 0));
}

describe("a process that dies between a plan's concurrent TaskCreated batches", () => {
  it("the parts' batch committed, the root's not: the plan delivered again makes the rest, each once", async () => {
    const groups = [12, 12, 12];
    const rootTaskId = await crashedPlan(isRootBatch, groups);
    expect(await h.rt.tasks.view(rootTaskId)).toBeUndefined();
    await expectWhole(rootTaskId, groups);
  });

  it("the root's batch committed, the parts' not: the plan delivered again makes the rest, each once", async () => {
    const groups = [12, 12, 12];
    const rootTaskId = await crashedPlan((events) => !isRootBatch(events), groups);
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("open");
    await expectWhole(rootTaskId, groups);
  });

  it("the parts' batch committed, the root's not, two leaves at once: the watchdog offers the parts before their parents exist, and every part runs once", async () => {
    const groups = [12, 12, 12];
    const rootTaskId = await crashedPlan(isRootBatch, groups, { leavesAtOnce: 2, leavesWhenIdle: 4 });
    await expectWhole(rootTaskId, groups);
    const slots = await h.rt.state.get<{ running: string[]; parked: string[] }>(leafSlotsKey(rootTaskId));
    expect(slots?.data).toEqual({ running: [], parked: [] });
  });
});

describe("siblings whose names repeat: each is a task of its own", () => {
  /** A plan whose subtasks are named `names` (the model's, as it gave them); the request driven to its end. */
  async function planned(names: string[], mode: "eager" | "lazy") {
    const spec = {
      name: "Survey",
      purpose: "Collect every part",
      subtasks: names.map((name, i) => ({ name, purpose: `Report part ${i + 1}` })),
    };
    h = await Harness.create({
      script: (r) =>
        isPlan(r) ? planOf(spec) : isEvaluation(r) ? pass() : { content: `result of ${taskName(r)}` },
      assistants: GENERALIST,
    });
    const { rootTaskId } = await h.submit("survey every part", mode);
    await h.runToEnd(rootTaskId);
    return rootTaskId;
  }

  it("a renamed repeat that meets a sibling's own name (a, a, a (2)): three parts, each made and run once", async () => {
    const rootTaskId = await planned(["a", "a", "a (2)"], "eager");
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
    const children = await h.rt.tasks.children(rootTaskId);
    expect(children.map((c) => c.title).sort()).toEqual(["a", "a (2)", "a (3)"]);
    expect(children.every((c) => c.status === "done")).toBe(true);
    expect((await h.rt.tasks.childCounts(rootTaskId))?.created).toBe(3);
  });

  it("a plan approved with two subtasks of one name (lazy): both are made and run", async () => {
    const rootTaskId = await planned(["a", "a"], "lazy");
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
    const children = await h.rt.tasks.children(rootTaskId);
    expect(children.map((c) => c.title).sort()).toEqual(["a", "a (2)"]);
    expect(children.every((c) => c.status === "done")).toBe(true);
    expect((await h.rt.tasks.childCounts(rootTaskId))?.created).toBe(2);
  });
});

describe("a plan's concurrent TaskCreated batches that conflict", () => {
  it("each batch's first transaction committed but answered with a conflict (a lost answer tried again): each task once, counts exact", async () => {
    const groups = [12, 12, 12];
    h = await Harness.create({ script: areas(groups).script, assistants: GENERALIST });
    const state = h.rt.state;
    const transact = state.transact.bind(state);
    let conflicted = 0;
    const answered = new Set<string>();
    state.transact = async (ops) => {
      const result = await transact(ops);
      // A batch of TaskCreated (it adds to child counts), told apart by its first task.
      const first = ops.find((op) => op.op === "append");
      const isBatch = ops.some((op) => op.op === "add") && first?.op === "append";
      if (isBatch && ops.filter((op) => op.op === "append").length > 1 && !answered.has(first.streamId)) {
        answered.add(first.streamId);
        conflicted++;
        throw new ConflictError("the transaction's answer was lost; tried again, it conflicts with itself");
      }
      return result;
    };
    const { rootTaskId } = await h.submit("survey every area");
    await h.idle();
    expect(conflicted).toBe(2); // both batches
    state.transact = transact;
    await expectWhole(rootTaskId, groups);
  });
});

describe("a corrective round's concurrent TaskCreated batches, a process dying between them", () => {
  it("the leaves' batch of a corrective subtree on record, its top's not: the round is made whole once and the request ends", async () => {
    // The root's first evaluation fails with one corrective subtask of three areas of ten parts:
    // 34 tasks, in two batches (the top, its areas and twenty parts; the last area's ten parts).
    const fix: TaskSpec = {
      name: "fix",
      purpose: "Collect every part of every area",
      subtasks: [1, 2, 3].map((a) => ({
        name: `missed ${a}`,
        purpose: `Collect the parts of area ${a}`,
        subtasks: Array.from({ length: 10 }, (_, p) => ({
          name: `missed ${a} part ${p + 1}`,
          purpose: "Report it",
        })),
      })),
    };
    let evaluated = 0;
    h = await Harness.create({
      script: (r) => {
        if (isPlan(r))
          return planOf({
            name: "Survey",
            purpose: "Collect every part",
            subtasks: [{ name: "part 1", purpose: "Report part 1" }],
          });
        if (isEvaluation(r) && evaluated++ === 0)
          return {
            toolCalls: [
              {
                name: "report_evaluation",
                arguments: { passed: false, reason: "areas were missed", corrective_subtasks: [fix] },
              },
            ],
          };
        if (isEvaluation(r)) return pass();
        return { content: `result of ${taskName(r)}` };
      },
      assistants: GENERALIST,
      bus: { maxAttempts: 1 },
    });
    const isFixBatch = (events: readonly TaskEvent[]) =>
      events.some((e) => e.type === "TaskCreated" && e.payload.title === "fix");
    const { rootTaskId, seen } = await crashWhilePlanning(
      h,
      (events) => events.length > 1 && isFixBatch(events),
      "survey it",
    );
    expect(seen.lost).toBe(1);
    await h.runToEnd(rootTaskId);
    const tree = await h.tree(rootTaskId);
    expect(tree.size).toBe(2 + 34);
    expect([...tree.values()].filter((v) => v.status !== "done").map((v) => v.title)).toEqual([]);
    for (const v of tree.values())
      expect((await h.rt.state.readStream(v.taskId)).filter((e) => e.type === "TaskCreated")).toHaveLength(1);
    expect(await h.rt.tasks.childCounts(rootTaskId)).toEqual({ created: 2, ended: 2 });
    const top = [...tree.values()].find((v) => v.title === "fix");
    expect(await h.rt.tasks.childCounts(String(top?.taskId))).toEqual({ created: 3, ended: 3 });
    // The corrective parts ran once each, all in the new process.
    const partCalls = h.llm.calls.filter((c) => /^missed \d+ part/.test(taskName(c)));
    expect(partCalls).toHaveLength(30);
  });
});
