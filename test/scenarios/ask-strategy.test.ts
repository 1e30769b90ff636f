import { afterEach, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import type { InteractionResource } from "../../shared/domain/resources.ts";
import type { FaultPoint } from "../../shared/engine/context.ts";
import { SimulatedCrash } from "../../shared/engine/context.ts";
import { CrashAt, Harness, PERSON } from "./engine-harness.ts";
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

  for (const [point, step, why] of [
    ["after-record", "UserInteractionResponded", "answered, the resume not sent"],
    ["after-record", "TaskCreated", "the first of the strategy's subtasks made, the second not"],
  ] as [FaultPoint, string, string][]) {
    it(`a crash ${point} ${step} (${why}): the strategy is applied whole, once`, async () => {
      const { root, asked, harness } = await failedRound();
      const crash = new CrashAt(point, step);
      await harness.restart();
      await harness.open(crash); // the process that takes the answer dies at the point
      await harness.engine
        .respond(asked.meta.id, { selectedOptionId: "strategy-2" }, PERSON)
        .catch(() => undefined);
      await harness.idle();
      expect(crash.fired).toBe(true);
      await harness.restart(); // a new process, no faults
      for (let i = 0; i < 20 && !(await harness.engine.result(root)).view?.status.match(/done|failed/); i++) {
        harness.advance(10 * 60_000); // past every claim's staleness
        await harness.engine.watchdog(60_000);
        await harness.idle();
      }
      const { view, output } = await harness.engine.result(root);
      expect(view?.status).toBe("done");
      expect(output).toBe("offsite held");
      expect(calls(harness, "find a venue")).toBe(1);
      expect(calls(harness, "book it")).toBe(1);
      expect(calls(harness, "ask the venue again")).toBe(0);
      // This process's model (a new one at each restart) judged round 1 only: round 0 was judged before.
      expect(harness.llm.calls.filter(isEvaluation)).toHaveLength(1);
    });
  }

  it("an automatic corrective round cut short by a crash (one of its two subtasks made) is made whole", async () => {
    // Dies at the first task made after the first evaluation: inside the corrective round's making.
    class CrashInCorrection {
      armed = false;
      fired = false;
      hit(point: FaultPoint, step: string): void {
        if (point === "after-llm" && step === "evaluate") this.armed = true;
        if (this.fired || (this.armed && point === "after-record" && step === "TaskCreated")) {
          this.fired = true;
          throw new SimulatedCrash(point, step);
        }
      }
    }
    let evaluations = 0;
    const crash = new CrashInCorrection();
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
                    arguments: {
                      passed: false,
                      reason: "no venue",
                      corrective_subtasks: [{ name: "find a venue" }, { name: "book it" }],
                    },
                  },
                ],
              }
            : pass("held");
        return { content: "ok" };
      },
      assistants: GENERALIST,
      settings: { fallbackAssistant: GENERALIST_URN },
      bus: { maxAttempts: 1 },
    });
    await h.restart();
    await h.open(crash);
    const { rootTaskId } = await h.submit("Hold the offsite");
    await h.idle();
    expect(crash.fired).toBe(true);
    await h.restart();
    for (let i = 0; i < 20 && !(await h.engine.result(rootTaskId)).view?.status.match(/done|failed/); i++) {
      h.advance(10 * 60_000);
      await h.engine.watchdog(60_000);
      await h.idle();
    }
    expect((await h.engine.result(rootTaskId)).output).toBe("held");
    expect(calls(h, "find a venue")).toBe(1);
    expect(calls(h, "book it")).toBe(1);
  });
});
