import { afterEach, describe, expect, it } from "vitest";
import { taskDepth } from "../../shared/domain/urn.ts";
import { leafSlotsKey } from "../../shared/engine/leaf-slots.ts";
import { Harness } from "./engine-harness.ts";
import { fanOut, GENERALIST, watchLeaves } from "./scenarios.ts";

/**
 * The bound of a request's leaves gives way to leavesWhenIdle only on a count of the ready steps
 * (EngineDeps.readySteps, on AWS an SQS read): a count that cannot be had, however it fails, holds
 * the bound, and never holds the request.
 */
let h: Harness;
afterEach(() => h?.close());

describe("leaf slots: a count of the ready steps that never comes", () => {
  it("a readySteps that never answers holds the bound; the request still ends", async () => {
    const { script } = fanOut(6, 5);
    let reads = 0;
    h = await Harness.create({
      script,
      assistants: GENERALIST,
      settings: { leavesAtOnce: 2, leavesWhenIdle: 5 },
      readySteps: () => {
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

describe("leaf slots: a count of the ready steps that is no count", () => {
  for (const [what, count] of [
    ["negative", -40],
    ["not a number", Number.NaN],
  ] as const)
    it(`a readySteps that answers ${what} holds the bound`, async () => {
      const { script } = fanOut(5, 5);
      h = await Harness.create({
        script,
        assistants: GENERALIST,
        settings: { leavesAtOnce: 2, leavesWhenIdle: 5 },
        readySteps: async () => count,
      });
      const leaves = watchLeaves(h, (id) => taskDepth(id) === 2);
      const { rootTaskId } = await h.submit("survey five parts");
      await h.idle();
      expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
      expect(leaves.most).toBe(2);
    });
});
