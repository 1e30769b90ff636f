import { afterEach, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import type { InteractionResource } from "../../shared/domain/resources.ts";
import { Harness } from "./engine-harness.ts";
import { GENERALIST, GENERALIST_URN, isEvaluation, isPlan, pass, planOf, taskName } from "./scenarios.ts";

/**
 * Corrective rounds an evaluator gets wrong: more subtasks than the parent's fan-out, two of one name
 * (one URN: one task where two were meant), more tasks in all than maxTasks though each alone is
 * within it. Neither a strategy offered to a person nor the evaluator's own round may hold them.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const many = (n: number, prefix = "fix") =>
  Array.from({ length: n }, (_, i) => ({ name: `${prefix} ${i + 1}` }));
/** A subtask of 11 children with 2 each (within maxFanOut 12): 34 tasks, within maxTasks 200 alone. */
const wide = (i: number) => ({
  name: `part ${i}`,
  subtasks: many(11, `part ${i} step`).map((s) => ({ ...s, subtasks: many(2, `${s.name} half`) })),
});

function evaluating(evaluation: Record<string, unknown>): ScriptFunction {
  let evaluations = 0;
  return (r) => {
    if (isPlan(r))
      return planOf({ name: "Offsite", purpose: "Hold the offsite", subtasks: [{ name: "book the venue" }] });
    if (isEvaluation(r))
      return ++evaluations === 1
        ? {
            toolCalls: [
              {
                name: "report_evaluation",
                arguments: { passed: false, reason: "booked out", ...evaluation },
              },
            ],
          }
        : pass("held");
    return { content: `done: ${taskName(r)}` };
  };
}

async function run(evaluation: Record<string, unknown>) {
  h = await Harness.create({
    script: evaluating(evaluation),
    assistants: GENERALIST,
    settings: { fallbackAssistant: GENERALIST_URN },
  });
  const { rootTaskId } = await h.submit("Hold the offsite");
  await h.idle();
  return { h, root: rootTaskId };
}

describe("corrective rounds beyond the parent's budgets", () => {
  it("a strategy with too many subtasks, twice one name, or too many tasks in all is not offered", async () => {
    const { h, root } = await run({
      corrective_subtasks: [{ name: "ask again" }],
      alternative_strategies: [
        { name: "Wide", why: "w", corrective_subtasks: many(13) },
        { name: "Twins", why: "t", corrective_subtasks: [{ name: "call" }, { name: "call" }] },
        {
          name: "Huge",
          why: "h",
          corrective_subtasks: Array.from({ length: 12 }, (_, i) => wide(i)),
        },
        { name: "Fine", why: "f", corrective_subtasks: many(2, "other") },
      ],
    });
    const [asked] = (await h.pending(root)) as InteractionResource[];
    expect(asked?.purpose).toBe("choose_strategy");
    expect(asked?.options?.map((o) => o.label)).toEqual([
      "Corrective round",
      "Fine",
      "Accept the result as it is",
      "Stop here (fail)",
    ]);
    const why = asked?.display.description ?? "";
    expect(why).toMatch(/Wide \(13 corrective subtasks, more than maxFanOut 12\)/);
    expect(why).toMatch(/Twins \(two corrective subtasks are named "call": names must differ\)/);
    expect(why).toMatch(/Huge \(the corrective subtasks hold 408 tasks, more than maxTasks/);
  });

  it("the evaluator's own round with two subtasks of one name fails the parent, saying why; nothing is made", async () => {
    const { h, root } = await run({ corrective_subtasks: [{ name: "call" }, { name: "call" }] });
    const view = await h.rt.tasks.view(root);
    expect(view?.status).toBe("failed");
    expect(JSON.stringify(await h.engine.result(root))).toMatch(/names must differ/);
    expect((await h.rt.tasks.children(root)).map((c) => c.taskId).filter((id) => id.includes("r1"))).toEqual(
      [],
    );
  });

  it("the evaluator's own round of more subtasks than the fan-out fails the parent; nothing is made", async () => {
    const { h, root } = await run({ corrective_subtasks: many(13) });
    const view = await h.rt.tasks.view(root);
    expect(view?.status).toBe("failed");
    expect(JSON.stringify(await h.engine.result(root))).toMatch(/more than maxFanOut 12/);
    expect((await h.rt.tasks.children(root)).length).toBe(1);
  });
});
