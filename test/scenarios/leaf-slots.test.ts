import { afterEach, describe, expect, it } from "vitest";
import { taskDepth } from "../../shared/domain/urn.ts";
import {
  admitLeaves,
  LEAF_SLOTS_KIND,
  LEAVES_WAITING,
  leafSlotsKey,
  MAX_PARKED,
} from "../../shared/engine/leaf-slots.ts";
import { CrashAt, Harness, PERSON } from "./engine-harness.ts";
import { areas, fanOut, GENERALIST, watchLeaves } from "./scenarios.ts";

/**
 * At most `leavesAtOnce` leaves of one request run at once (shared/engine/leaf-slots.ts): the
 * others wait for a slot and start as running leaves end, however the steps are delivered, and
 * after a step dies between a leaf's end and the slot's release.
 */
let h: Harness;
afterEach(() => h?.close());

/** The request's slots as stored (engine/leaf-slots.ts). */
const slotsOf = (rootTaskId: string) =>
  h.rt.state.get<{ running: string[]; parked: string[] }>(leafSlotsKey(rootTaskId));

/** A request of `leaves` leaves, two slots, in a process that dies at `crash`; its root task. */
async function crashingAt(crash: CrashAt, leaves: number): Promise<string> {
  h = await Harness.create({
    script: fanOut(leaves, 5).script,
    assistants: GENERALIST,
    settings: { leavesAtOnce: 2 },
    bus: { maxAttempts: 1 },
  });
  await h.restart();
  await h.open(crash);
  const { rootTaskId } = await h.submit(`survey ${leaves} parts`);
  await h.idle();
  expect(crash.fired).toBe(true);
  return rootTaskId;
}

const leafCalls = (hh: Harness) =>
  hh.llm.calls.filter((c) => !c.tools?.some((t) => ["create_plan", "report_evaluation"].includes(t.name)));

describe("a request's leaves run at most leavesAtOnce at once", () => {
  it("ten leaves, three slots, every command delivered twice: three at most run, each leaf runs once, all end", async () => {
    const { script } = fanOut(10, 15);
    h = await Harness.create({
      script,
      assistants: GENERALIST,
      settings: { leavesAtOnce: 3 },
      bus: { deliveries: 2 },
    });
    const leaves = watchLeaves(h, (id) => taskDepth(id) === 2);
    const { rootTaskId } = await h.submit("survey ten parts");
    await h.idle();
    const tree = await h.tree(rootTaskId);
    expect(tree.size).toBe(11);
    expect([...tree.values()].every((v) => v.status === "done")).toBe(true);
    expect(leaves.most).toBe(3);
    expect(leafCalls(h)).toHaveLength(10);
    const slots = await slotsOf(rootTaskId);
    expect(slots?.data).toEqual({ running: [], parked: [] });
    expect(slots?.status).toBeUndefined(); // nothing waits: the watchdog does not list it
    expect(slots?.expiresAt).toBeDefined();
  });

  it("parents hold no slot: two areas of five leaves with two slots end without a deadlock", async () => {
    h = await Harness.create({
      script: areas([5, 5], 10).script,
      assistants: GENERALIST,
      settings: { leavesAtOnce: 2 },
    });
    const leaves = watchLeaves(h, (id) => taskDepth(id) === 3);
    const { rootTaskId } = await h.submit("survey two areas");
    await h.idle();
    const tree = await h.tree(rootTaskId);
    expect(tree.size).toBe(13);
    expect([...tree.values()].every((v) => v.status === "done")).toBe(true);
    expect(leaves.most).toBe(2);
    expect(leafCalls(h)).toHaveLength(10);
  });

  it("no bound (0): every leaf starts at once and no slots are kept", async () => {
    const { script } = fanOut(6, 15);
    h = await Harness.create({ script, assistants: GENERALIST, settings: { leavesAtOnce: 0 } });
    const leaves = watchLeaves(h, (id) => taskDepth(id) === 2);
    const { rootTaskId } = await h.submit("survey six parts");
    await h.idle();
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
    expect(leaves.most).toBe(6);
    expect(await h.rt.state.get(leafSlotsKey(rootTaskId))).toBeUndefined();
  });

  it("while the leaf steps have room, the bound gives way to leavesWhenIdle: ten leaves, three slots, seven when idle", async () => {
    const { script } = fanOut(10, 15);
    // In one process the engine's own step queue counts the steps running and waiting.
    h = await Harness.create({
      script,
      assistants: GENERALIST,
      settings: { leavesAtOnce: 3, leavesWhenIdle: 7 },
    });
    const leaves = watchLeaves(h, (id) => taskDepth(id) === 2);
    const { rootTaskId } = await h.submit("survey ten parts");
    await h.idle();
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
    expect(leaves.most).toBe(7);
    expect(leafCalls(h)).toHaveLength(10);
  });

  it("while the leaf steps have no room, or cannot be counted, the bound holds", async () => {
    for (const leafSteps of [
      async () => 20,
      async (): Promise<number> => Promise.reject(new Error("SQS is away")),
    ]) {
      const { script } = fanOut(10, 15);
      h = await Harness.create({
        script,
        assistants: GENERALIST,
        settings: { leavesAtOnce: 3, leavesWhenIdle: 7 },
        leafSteps,
      });
      const leaves = watchLeaves(h, (id) => taskDepth(id) === 2);
      const { rootTaskId } = await h.submit("survey ten parts");
      await h.idle();
      expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
      expect(leaves.most).toBe(3);
      expect(leafCalls(h)).toHaveLength(10);
      await h.close();
    }
  });

  it("once other requests' steps take the room, freed slots are refilled only up to the bound again", async () => {
    const { script } = fanOut(10, 15);
    let reads = 0;
    h = await Harness.create({
      script,
      assistants: GENERALIST,
      settings: { leavesAtOnce: 2, leavesWhenIdle: 6 },
      // Room when the plan takes its slots; from then on, other requests' steps fill the ready step.
      leafSteps: async () => (reads++ === 0 ? 0 : 40),
    });
    const running = { now: 0, mostStartedAfterAnEnd: 0, ended: 0 };
    const log = h.rt.tasks;
    const record = log.record.bind(log);
    log.record = async (event) => {
      const result = await record(event);
      if (!result.duplicate && taskDepth(event.payload.taskId) === 2) {
        if (event.type === "TaskStarted") {
          running.now++;
          if (running.ended > 0)
            running.mostStartedAfterAnEnd = Math.max(running.mostStartedAfterAnEnd, running.now);
        } else if (event.type === "TaskCompleted") {
          running.now--;
          running.ended++;
        }
      }
      return result;
    };
    const leaves = watchLeaves(h, (id) => taskDepth(id) === 2);
    const { rootTaskId } = await h.submit("survey ten parts");
    await h.idle();
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
    expect(leaves.most).toBe(6);
    expect(running.mostStartedAfterAnEnd).toBeLessThanOrEqual(2);
    expect(running.ended).toBe(10);
    expect(reads).toBeGreaterThan(1);
  });

  it("a step that dies after a leaf's end, before its slot is freed: the watchdog frees it and the rest run", async () => {
    const rootTaskId = await crashingAt(new CrashAt("after-record", "TaskCompleted"), 5);
    const stuck = await slotsOf(rootTaskId);
    expect(stuck?.status).toBe(LEAVES_WAITING);
    expect(stuck?.data.parked.length).toBeGreaterThan(0);

    await h.restart(); // a new process, no faults
    await h.runToEnd(rootTaskId);
    const tree = await h.tree(rootTaskId);
    expect([...tree.values()].every((v) => v.status === "done")).toBe(true);
    expect(leafCalls(h).length).toBeLessThanOrEqual(5); // this process's calls: none ran twice here
    const slots = await slotsOf(rootTaskId);
    expect(slots?.data).toEqual({ running: [], parked: [] });
    const waiting = await h.rt.state.byStatus(LEAF_SLOTS_KIND, LEAVES_WAITING, {});
    expect(waiting.items).toHaveLength(0);
  });

  it("a request canceled while leaves wait for slots: none of them starts, and the slots are left idle", async () => {
    const { script } = fanOut(8, 1500); // the running leaves take a while: the others wait
    h = await Harness.create({ script, assistants: GENERALIST, settings: { leavesAtOnce: 2 } });
    const { rootTaskId } = await h.submit("survey eight parts");
    // Until the first two leaves are running (their model calls out) and six wait.
    for (let i = 0; i < 200 && leafCalls(h).length < 2; i++) await new Promise((r) => setTimeout(r, 10));
    const waiting = await slotsOf(rootTaskId);
    expect(waiting?.data.running).toHaveLength(2);
    expect(waiting?.data.parked).toHaveLength(6);

    await h.engine.cancel(rootTaskId, PERSON, "not needed");
    await h.idle();
    const tree = await h.tree(rootTaskId);
    expect([...tree.values()].every((v) => v.status === "canceled")).toBe(true);
    expect(leafCalls(h)).toHaveLength(2); // the waiting leaves never ran
    const slots = await slotsOf(rootTaskId);
    expect(slots?.data).toEqual({ running: [], parked: [] });
  });

  it("a step that dies after taking slots, before sending the leaves' commands: the watchdog sends them", async () => {
    const rootTaskId = await crashingAt(new CrashAt("before-publish", "TASK_READY"), 4);
    const held = await slotsOf(rootTaskId);
    expect(held?.data.running).toHaveLength(2);
    expect(leafCalls(h)).toHaveLength(0);

    await h.restart();
    await h.runToEnd(rootTaskId);
    expect([...(await h.tree(rootTaskId)).values()].every((v) => v.status === "done")).toBe(true);
    expect(leafCalls(h)).toHaveLength(4);
  });

  it("at most MAX_PARKED leaves wait in the record; one past it stays open for the watchdog to offer again", async () => {
    h = await Harness.create({
      script: fanOut(1).script,
      assistants: GENERALIST,
      settings: { leavesAtOnce: 2 },
    });
    const root = "cld:common.Tenant.acme/common.Conversation.c/common.Message.m/plan.Task.root";
    const ids = Array.from({ length: MAX_PARKED + 5 }, (_, i) => `${root}/plan.Task.leaf${i}`);
    const admitted = await admitLeaves(h.engine.deps, ids);
    expect(admitted).toEqual(ids.slice(0, 2));
    const slots = await h.rt.state.get<{ running: string[]; parked: string[] }>(leafSlotsKey(root));
    expect(slots?.data.parked).toHaveLength(MAX_PARKED);
    expect(JSON.stringify(slots?.data).length).toBeLessThan(100_000); // well under a DynamoDB item
    // Offered again (a stale open leaf), the same leaves change nothing.
    expect(await admitLeaves(h.engine.deps, ids.slice(0, 3))).toEqual(ids.slice(0, 2));
    expect((await h.rt.state.get(leafSlotsKey(root)))?.version).toBe(slots?.version);
  });

  it("another process changing the slots between a read and a write: the write conflicts, is tried again, and both changes hold", async () => {
    h = await Harness.create({
      script: fanOut(1).script,
      assistants: GENERALIST,
      settings: { leavesAtOnce: 2 },
    });
    const root = "cld:common.Tenant.acme/common.Conversation.c/common.Message.m/plan.Task.root";
    const leaf = (n: number) => `${root}/plan.Task.leaf${n}`;
    const state = h.rt.state;
    // The other process: it took a slot for leaf 0 right after this one read the record (once).
    let raced = false;
    const racing = new Proxy(state, {
      get(target, property) {
        if (property === "get")
          return async (key: string) => {
            const read = await target.get(key);
            if (!raced && key === leafSlotsKey(root)) {
              raced = true;
              await target.transact([
                {
                  op: "put",
                  record: {
                    key,
                    kind: LEAF_SLOTS_KIND,
                    updatedAt: new Date(0).toISOString(),
                    data: { running: ["/plan.Task.leaf0"], parked: [] },
                  },
                  expectedVersion: read?.version ?? 0,
                },
              ]);
            }
            return read;
          };
        const value = Reflect.get(target, property);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const deps = { ...h.engine.deps, state: racing };
    // This process starts leaves 1, 2 and 3: one slot is left after the other's leaf 0.
    expect(await admitLeaves(deps, [leaf(1), leaf(2), leaf(3)])).toEqual([leaf(1)]);
    expect(raced).toBe(true);
    const slots = await state.get<{ running: string[]; parked: string[] }>(leafSlotsKey(root));
    expect(slots?.data).toEqual({
      running: ["/plan.Task.leaf0", "/plan.Task.leaf1"],
      parked: ["/plan.Task.leaf2", "/plan.Task.leaf3"],
    });
  });
});
