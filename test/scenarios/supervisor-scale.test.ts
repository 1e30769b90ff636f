import { afterEach, describe, expect, it, vi } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { childCountKey } from "../../shared/store/task-log.ts";
import { Harness } from "./engine-harness.ts";
import { fanOut, GENERALIST, isEvaluation, isPlan, pass, planOf, taskName } from "./scenarios.ts";

let h: Harness;
afterEach(() => h?.close());

/**
 * Issue 11, item 18: the cost per task must not grow with the tree. A parent used to list all its
 * children each time one of them ended (n listings of n children: quadratic in its fan-out); now
 * its child counts say when listing them can tell anything.
 */
describe("supervisor at scale", () => {
  it("lists a wide parent's children only once they may all have ended, even when every event arrives twice", async () => {
    const { spec } = fanOut(12);
    // The parts end one after another (part i after 15 * i ms), each while others still run.
    const script: ScriptFunction = (r) => {
      if (isPlan(r)) return planOf(spec);
      if (isEvaluation(r)) return pass();
      const part = Number(/part (\d+)/.exec(taskName(r))?.[1] ?? 0);
      return { content: `result of ${taskName(r)}`, delayMs: 15 * part };
    };
    h = await Harness.create({ script, assistants: GENERALIST, bus: { deliveries: 2 } });
    const listings: string[] = [];
    const children = h.rt.tasks.children.bind(h.rt.tasks);
    vi.spyOn(h.rt.tasks, "children").mockImplementation(async (taskId: string) => {
      listings.push(taskId);
      return children(taskId);
    });
    const { rootTaskId } = await h.submit("survey twelve parts");
    await h.idle();

    const tree = await h.tree(rootTaskId);
    expect(tree.size).toBe(13);
    expect([...tree.values()].every((v) => v.status === "done")).toBe(true);
    const evaluations = h.llm.calls.filter((c) => c.tools?.some((t) => t.name === "report_evaluation"));
    expect(evaluations).toHaveLength(1);
    expect((await h.rt.state.get(childCountKey(rootTaskId)))?.data).toEqual({ created: 12, ended: 12 });
    // Twelve completions, each announced twice (24 listings before): now the root's start lists them
    // (to start them; twice if its start is delivered twice), and the last completion's deliveries.
    const ofRoot = listings.filter((id) => id === rootTaskId).length;
    expect(ofRoot).toBeGreaterThan(0);
    expect(ofRoot).toBeLessThanOrEqual(4);
  });
});
