import { afterEach, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import type { InteractionResource } from "../../shared/domain/resources.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { GENERALIST, GENERALIST_URN, isEvaluation, isPlan, pass, planOf, taskName } from "./scenarios.ts";

/**
 * choose_strategy: after a failed round with more than one way forward, the parent asks a person,
 * waits with nothing running, and applies the chosen way once.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const fail = {
  toolCalls: [
    {
      name: "report_evaluation",
      arguments: {
        passed: false,
        reason: "the venue is booked out",
        corrective_subtasks: [{ name: "ask the venue again" }],
        alternative_strategies: [
          {
            name: "Find another venue",
            why: "the usual venue has no dates left",
            corrective_subtasks: [{ name: "find a venue" }, { name: "book it" }],
          },
        ],
      },
    },
  ],
};

function script(): ScriptFunction {
  let evaluations = 0;
  return (r) => {
    if (isPlan(r))
      return planOf({ name: "Offsite", purpose: "Hold the offsite", subtasks: [{ name: "book the venue" }] });
    if (isEvaluation(r)) return ++evaluations === 1 ? fail : pass("offsite held");
    return { content: `done: ${taskName(r)}` };
  };
}

async function failedRound() {
  h = await Harness.create({
    script: script(),
    assistants: GENERALIST,
    settings: { fallbackAssistant: GENERALIST_URN },
  });
  const { rootTaskId } = await h.submit("Hold the offsite");
  await h.idle();
  expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("awaiting_user");
  const [asked] = (await h.pending(rootTaskId)) as InteractionResource[];
  expect(asked).toMatchObject({ kind: "select", purpose: "choose_strategy" });
  expect(asked?.options?.map((o) => [o.id, o.label])).toEqual([
    ["strategy-1", "Corrective round"],
    ["strategy-2", "Find another venue"],
    ["accept", "Accept the result as it is"],
    ["stop", "Stop here (fail)"],
  ]);
  return { root: rootTaskId, asked: asked as InteractionResource, harness: h };
}

const calls = (harness: Harness, name: string) =>
  harness.llm.calls.filter((c) => taskName(c) === name).length;

describe("choose_strategy", () => {
  it("a person picks the second strategy: its subtasks run once, the parent completes", async () => {
    const { root, asked, harness } = await failedRound();
    const urn = asked.meta.id;
    // Two answers racing, then the resume delivered again, late, and the watchdog.
    const outcomes = await Promise.allSettled([
      harness.engine.respond(urn, { selectedOptionId: "strategy-2" }, PERSON),
      harness.engine.respond(urn, { selectedOptionId: "accept" }, PERSON),
    ]);
    expect(outcomes.filter((o) => o.status === "fulfilled")).toHaveLength(1);
    await harness.engine.deps.bus.publish([
      {
        id: "resume-late",
        source: "arbor.engine",
        detailType: "INTERACTION_ANSWERED",
        detail: { interactionUrn: urn },
      },
    ]);
    await harness.idle();
    harness.advance(60_000);
    await harness.engine.watchdog(1_000);
    await harness.idle();
    const chosen = (await harness.rt.resources.getAs("uip.Interaction", urn))?.response?.selectedOptionId;
    const { view, output } = await harness.engine.result(root);
    const tree = await harness.tree(root);
    if (chosen === "strategy-2") {
      expect(view?.status).toBe("done");
      expect(output).toBe("offsite held");
      expect(calls(harness, "find a venue")).toBe(1);
      expect(calls(harness, "book it")).toBe(1);
      expect(tree.has("ask the venue again")).toBe(false);
    } else {
      expect(chosen).toBe("accept");
      expect(view?.status).toBe("done");
    }
    expect((await harness.rt.tasks.children(root)).length).toBe(chosen === "strategy-2" ? 3 : 1);
  });

  it("the second strategy, answered alone: exactly its subtasks, once", async () => {
    const { root, asked, harness } = await failedRound();
    await harness.engine.respond(asked.meta.id, { selectedOptionId: "strategy-2" }, PERSON);
    await harness.idle();
    await harness.engine.deps.bus.publish([
      {
        id: "resume-again",
        source: "arbor.engine",
        detailType: "INTERACTION_ANSWERED",
        detail: { interactionUrn: asked.meta.id },
      },
    ]);
    await harness.idle();
    const { view, output } = await harness.engine.result(root);
    expect(view?.status).toBe("done");
    expect(output).toBe("offsite held");
    expect(calls(harness, "find a venue")).toBe(1);
    expect(calls(harness, "book it")).toBe(1);
    expect(calls(harness, "ask the venue again")).toBe(0);
    expect([...(await harness.tree(root)).keys()].sort()).toEqual(
      ["Offsite", "book it", "book the venue", "find a venue"].sort(),
    );
  });

  it("accept: the parent completes with the result as it is", async () => {
    const { root, asked, harness } = await failedRound();
    await harness.engine.respond(asked.meta.id, { selectedOptionId: "accept" }, PERSON);
    await harness.idle();
    const { view, output } = await harness.engine.result(root);
    expect(view?.status).toBe("done");
    expect(output).toBe("book the venue: done: book the venue");
    expect(harness.llm.calls.filter(isEvaluation)).toHaveLength(1);
  });

  it("stop: the parent fails, saying who stopped it and why the round failed", async () => {
    const { root, asked, harness } = await failedRound();
    await harness.engine.respond(asked.meta.id, { selectedOptionId: "stop" }, PERSON);
    await harness.idle();
    const view = await harness.rt.tasks.view(root);
    expect(view?.status).toBe("failed");
    expect(view?.failureReason).toBe("the venue is booked out (round 0 failed; user_ada chose to stop here)");
  });

  it("one way forward and rounds left: today's automatic corrective round, nobody asked", async () => {
    let evaluations = 0;
    h = await Harness.create({
      script: (r) => {
        if (isPlan(r))
          return planOf({ name: "Offsite", purpose: "Hold it", subtasks: [{ name: "book the venue" }] });
        if (isEvaluation(r))
          return ++evaluations === 1
            ? {
                toolCalls: [
                  {
                    name: "report_evaluation",
                    arguments: { passed: false, reason: "no", corrective_subtasks: [{ name: "again" }] },
                  },
                ],
              }
            : pass("held");
        return { content: "ok" };
      },
      assistants: GENERALIST,
      settings: { fallbackAssistant: GENERALIST_URN },
    });
    const { rootTaskId } = await h.submit("Hold the offsite");
    await h.idle();
    expect((await h.engine.result(rootTaskId)).output).toBe("held");
    expect(await h.rt.resources.children(rootTaskId, "uip.Interaction")).toEqual([]);
  });
});
