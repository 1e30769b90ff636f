import { afterEach, describe, expect, it } from "vitest";
import { rootTaskOf, taskDepth } from "../../shared/domain/urn.ts";
import { leafSlotsKey } from "../../shared/engine/leaf-slots.ts";
import { CrashAt, Harness, PERSON } from "./engine-harness.ts";
import { fanOut, GENERALIST, watchLeaves } from "./scenarios.ts";

/**
 * The bound of a request's leaves gives way to leavesWhenIdle only on a count of the leaf steps
 * (EngineDeps.leafSteps, on AWS an SQS read): a count that cannot be had, however it fails, holds
 * the bound, and never holds the request.
 */
let h: Harness;
afterEach(() => h?.close());

describe("leaf slots: a count of the leaf steps that never comes", () => {
  it("a leafSteps that never answers holds the bound; the request still ends", async () => {
    const { script } = fanOut(6, 5);
    let reads = 0;
    h = await Harness.create({
      script,
      assistants: GENERALIST,
      settings: { leavesAtOnce: 2, leavesWhenIdle: 5 },
      leafSteps: () => {
        reads++;
        return new Promise<number>(() => {}); // a connection that never answers
      },
    });
    const leaves = watchLeaves(h, (id) => taskDepth(id) === 2);
    const { rootTaskId } = await h.submit("survey six parts");
    await h.idle();
    expect(reads).toBeGreaterThan(0);
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
    expect(leaves.most).toBe(2);
    const slots = await h.rt.state.get<{ running: string[]; parked: string[] }>(leafSlotsKey(rootTaskId));
    expect(slots?.data).toEqual({ running: [], parked: [] });
  }, 20_000);
});

describe("leaf slots: a count of the leaf steps that is no count", () => {
  for (const [what, count] of [
    ["negative", -40],
    ["not a number", Number.NaN],
  ] as const)
    it(`a leafSteps that answers ${what} holds the bound`, async () => {
      const { script } = fanOut(5, 5);
      h = await Harness.create({
        script,
        assistants: GENERALIST,
        settings: { leavesAtOnce: 2, leavesWhenIdle: 5 },
        leafSteps: async () => count,
      });
      const leaves = watchLeaves(h, (id) => taskDepth(id) === 2);
      const { rootTaskId } = await h.submit("survey five parts");
      await h.idle();
      expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
      expect(leaves.most).toBe(2);
    });
});

const leafCalls = (hh: Harness) =>
  hh.llm.calls.filter((c) => !c.tools?.some((t) => ["create_plan", "report_evaluation"].includes(t.name)));

const slotsOf = (hh: Harness, rootTaskId: string) =>
  hh.rt.state.get<{ running: string[]; parked: string[] }>(leafSlotsKey(rootTaskId));

describe("leaf slots: a bound that gives way, under duplicate deliveries and a count that flickers", () => {
  it("every command delivered twice, the count flipping between idle and busy: each leaf runs once, never more than leavesWhenIdle, all end", async () => {
    const { script } = fanOut(12, 10);
    let reads = 0;
    h = await Harness.create({
      script,
      assistants: GENERALIST,
      settings: { leavesAtOnce: 2, leavesWhenIdle: 5 },
      bus: { deliveries: 2 },
      leafSteps: async () => (reads++ % 3 === 0 ? 0 : 100),
    });
    const leaves = watchLeaves(h, (id) => taskDepth(id) === 2);
    const { rootTaskId } = await h.submit("survey twelve parts");
    await h.idle();
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
    expect(leaves.most).toBeLessThanOrEqual(5);
    expect(leaves.most).toBeGreaterThanOrEqual(2);
    expect(leafCalls(h)).toHaveLength(12);
    expect((await slotsOf(h, rootTaskId))?.data).toEqual({ running: [], parked: [] });
  });

  it("two wide requests at once on the engine's own count: each ends, each leaf runs once, neither past leavesWhenIdle", async () => {
    const { script } = fanOut(8, 10);
    h = await Harness.create({
      script,
      assistants: GENERALIST,
      settings: { leavesAtOnce: 2, leavesWhenIdle: 6 },
    });
    // Each request's leaves running at once, by its root.
    const running = new Map<string, { now: number; most: number }>();
    const log = h.rt.tasks;
    const record = log.record.bind(log);
    log.record = async (event) => {
      const result = await record(event);
      const id = event.payload.taskId;
      if (!result.duplicate && taskDepth(id) === 2) {
        const root = String(rootTaskOf(id));
        const seen = running.get(root) ?? { now: 0, most: 0 };
        if (event.type === "TaskStarted") seen.now++;
        else if (event.type === "TaskCompleted") seen.now--;
        seen.most = Math.max(seen.most, seen.now);
        running.set(root, seen);
      }
      return result;
    };
    const submitted = await Promise.all([
      h.submit("survey eight parts"),
      h.submit("survey eight parts again"),
    ]);
    await h.idle();
    for (const { rootTaskId } of submitted) {
      expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
      expect((await slotsOf(h, rootTaskId))?.data).toEqual({ running: [], parked: [] });
      expect(running.get(rootTaskId)?.most).toBeGreaterThanOrEqual(2);
      expect(running.get(rootTaskId)?.most).toBeLessThanOrEqual(6);
    }
    expect(leafCalls(h)).toHaveLength(16);
  });

  it("leavesWhenIdle below leavesAtOnce (a misconfiguration): the bound holds, the count is never read", async () => {
    const { script } = fanOut(6, 5);
    let reads = 0;
    h = await Harness.create({
      script,
      assistants: GENERALIST,
      settings: { leavesAtOnce: 3, leavesWhenIdle: 1 },
      leafSteps: async () => {
        reads++;
        return 0;
      },
    });
    const leaves = watchLeaves(h, (id) => taskDepth(id) === 2);
    const { rootTaskId } = await h.submit("survey six parts");
    await h.idle();
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
    expect(leaves.most).toBe(3);
    expect(reads).toBe(0);
  });

  it("a request canceled while its leaves wait, the bound given way: none of the waiting starts", async () => {
    const { script } = fanOut(10, 1500);
    h = await Harness.create({
      script,
      assistants: GENERALIST,
      settings: { leavesAtOnce: 2, leavesWhenIdle: 4 },
      leafSteps: async () => 0,
    });
    const { rootTaskId } = await h.submit("survey ten parts");
    for (let i = 0; i < 200 && leafCalls(h).length < 4; i++) await new Promise((r) => setTimeout(r, 10));
    const waiting = await slotsOf(h, rootTaskId);
    expect(waiting?.data.running).toHaveLength(4);
    expect(waiting?.data.parked).toHaveLength(6);
    await h.engine.cancel(rootTaskId, PERSON, "not needed");
    await h.idle();
    const tree = await h.tree(rootTaskId);
    expect([...tree.values()].every((v) => v.status === "canceled")).toBe(true);
    expect(leafCalls(h)).toHaveLength(4);
    expect((await slotsOf(h, rootTaskId))?.data).toEqual({ running: [], parked: [] });
  });
});

describe("leaf slots: a count that throws before it answers", () => {
  it("a leafSteps that throws at once (no promise) holds the bound; the request still ends", async () => {
    const { script } = fanOut(5, 5);
    h = await Harness.create({
      script,
      assistants: GENERALIST,
      settings: { leavesAtOnce: 2, leavesWhenIdle: 5 },
      bus: { maxAttempts: 1 },
      leafSteps: () => {
        throw new Error("no queue client");
      },
    });
    const leaves = watchLeaves(h, (id) => taskDepth(id) === 2);
    const { rootTaskId } = await h.submit("survey five parts");
    await h.idle();
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
    expect(leaves.most).toBe(2);
  });
});

describe("leaf slots: the watchdog's repair with the bound given way", () => {
  it("a step that dies after a leaf's end, before its slot is freed, the count idle: the watchdog frees it and the rest run once", async () => {
    h = await Harness.create({
      script: fanOut(8, 5).script,
      assistants: GENERALIST,
      settings: { leavesAtOnce: 2, leavesWhenIdle: 4 },
      bus: { maxAttempts: 1 },
      leafSteps: async () => 0,
    });
    await h.restart();
    const crash = new CrashAt("after-record", "TaskCompleted");
    await h.open(crash);
    const { rootTaskId } = await h.submit("survey eight parts");
    await h.idle();
    expect(crash.fired).toBe(true);
    const stuck = await slotsOf(h, rootTaskId);
    expect(stuck?.data.running).toHaveLength(4);
    await h.restart();
    const leaves = watchLeaves(h, (id) => taskDepth(id) === 2);
    await h.runToEnd(rootTaskId);
    expect([...(await h.tree(rootTaskId)).values()].every((v) => v.status === "done")).toBe(true);
    // The four parked start once here; the four cut short go on (a turn of theirs may be asked again).
    expect(leafCalls(h).length).toBeGreaterThanOrEqual(4);
    expect(leafCalls(h).length).toBeLessThanOrEqual(8);
    expect(leaves.most).toBeLessThanOrEqual(4);
    expect((await slotsOf(h, rootTaskId))?.data).toEqual({ running: [], parked: [] });
  });
});
