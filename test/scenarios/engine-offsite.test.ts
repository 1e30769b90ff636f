import { afterEach, describe, expect, it } from "vitest";
import { ASSISTANTS, REQUEST, script } from "../../examples/offsite/scenario.ts";
import { Harness, PERSON } from "./engine-harness.ts";

describe.each(["sqlite", "files"] as const)(
  "engine: the offsite scenario end to end (local runtime, scripted model, resources in %s)",
  (objectStore) => {
    let h: Harness;
    afterEach(() => h?.close());

    it("plans a depth-3 tree, runs tools, waits for an approval, corrects the agenda once, and answers", async () => {
      h = await Harness.create({ script, assistants: ASSISTANTS, objectStore });
      const { rootId } = { rootId: (await h.submit(REQUEST)).rootTaskId };
      await h.idle();

      // The risky email waits for a person; nothing else is left running.
      const [approval, ...others] = await h.pending(rootId);
      expect(others).toHaveLength(0);
      expect(approval?.purpose).toBe("confirm_risky_action");
      expect(approval?.binding?.tool).toBe("send_email");
      const waiting = await h.tree(rootId);
      expect(waiting.get("Invite the team")?.status).toBe("awaiting_user");
      expect(waiting.get("Logistics")?.status).toBe("done");

      await h.engine.respond(approval?.meta.id as string, { selectedOptionId: "approve" }, PERSON);
      await h.idle();

      const tree = await h.tree(rootId);
      expect([...tree.values()].map((v) => `${v.title}:${v.status}`).sort()).toEqual(
        [
          "Plan the offsite:done",
          "Logistics:done",
          "Shortlist venues:done",
          "Book travel:done",
          "Agenda:done",
          "Draft sessions:done",
          "Invite the team:done",
          "Plan a team dinner:done",
        ].sort(),
      );
      // Depth 3 below the request: root -> Agenda -> Plan a team dinner (the corrective subtask).
      const dinner = tree.get("Plan a team dinner");
      expect(dinner?.parentTaskId).toBe(tree.get("Agenda")?.taskId);
      // Elections: the specialists took their tasks.
      expect(tree.get("Shortlist venues")?.assistant).toMatch(/Assistant\.event-planner$/);
      expect(tree.get("Draft sessions")?.assistant).toMatch(/Assistant\.facilitator$/);
      expect(tree.get("Invite the team")?.assistant).toMatch(/Assistant\.communications$/);

      const { view, output } = await h.engine.result(rootId);
      expect(view?.status).toBe("done");
      expect(output).toMatch(/Logistics/);
      expect(output).toMatch(/Agenda/);
      // One plan call, four evaluations (root, Logistics, Agenda twice), and the leaves' turns.
      const kinds = h.llm.calls.map((c) => c.tools?.map((t) => t.name).join(",") ?? "");
      expect(kinds.filter((k) => k === "create_plan")).toHaveLength(1);
      expect(kinds.filter((k) => k === "report_evaluation")).toHaveLength(4);
    });

    it("a tool with effects runs only once the turn that asked for it is on disk; pure tools do not wait", async () => {
      h = await Harness.create({ script, assistants: ASSISTANTS, objectStore });
      const order: string[] = [];
      const deps = h.engine.deps;
      // The entry points wait too, before they answer their caller (Engine.submit, Engine.respond):
      // told apart by who calls, as only the tools' barriers matter here (a submit's own code is in
      // engine/steps/submit.ts).
      deps.untilDurable = async () =>
        void order.push(
          /Engine\.(submit|respond|cancel)|engine\/steps\/submit\.ts/.test(new Error().stack ?? "")
            ? "answered"
            : "on disk",
        );
      const execute = deps.tools.execute.bind(deps.tools);
      // A call runs once its barrier is passed (ToolContext.after: the tool service awaits it
      // before it records or runs anything; tool-service.test.ts holds it to that).
      deps.tools.execute = async (name, args, context) => {
        await context.after;
        order.push(`run ${name}`);
        return execute(name, args, context);
      };
      const { rootTaskId } = await h.submit(REQUEST);
      await h.idle();
      const [approval] = await h.pending(rootTaskId);
      await h.engine.respond(approval?.meta.id as string, { selectedOptionId: "approve" }, PERSON);
      await h.idle();

      expect(order.filter((o) => o === "run send_email")).toHaveLength(1);
      expect(order[order.indexOf("run send_email") - 1]).toBe("on disk");
      expect(order.filter((o) => o === "on disk")).toHaveLength(1); // the others are pure
      expect(order.filter((o) => o === "answered")).toHaveLength(2); // the request, the approval
      expect(order.filter((o) => o.startsWith("run ")).length).toBeGreaterThan(1);
    });
  },
);

describe("engine: a leaf's inner loop across steps", () => {
  let h: Harness;
  afterEach(() => h?.close());

  /** Runs the scenario to its end (approving the email) and counts the turn commands sent on the bus. */
  async function run(settings: { turnStepMs: number }) {
    h = await Harness.create({ script, assistants: ASSISTANTS, settings });
    let turnCommands = 0;
    h.rt.bus.subscribe({
      name: "count-turn-commands",
      pattern: { "detail-type": ["TURN_REQUESTED"] },
      handler: async () => void turnCommands++,
    });
    const { rootTaskId } = await h.submit(REQUEST);
    await h.idle();
    const [approval] = await h.pending(rootTaskId);
    await h.engine.respond(approval?.meta.id as string, { selectedOptionId: "approve" }, PERSON);
    await h.idle();
    const tree = await h.tree(rootTaskId);
    const outcome = {
      statuses: [...tree.values()].map((v) => `${v.title}:${v.status}`).sort(),
      output: (await h.engine.result(rootTaskId)).output,
      modelCalls: h.llm.calls.length,
    };
    await h.close();
    return { outcome, turnCommands };
  }

  it("a step hands the next turn on as a command once it has run for turnStepMs, and the run ends the same", async () => {
    const inOneStep = await run({ turnStepMs: 60_000 });
    const stepByStep = await run({ turnStepMs: 0 });
    expect(stepByStep.outcome).toEqual(inOneStep.outcome);
    expect(stepByStep.outcome.statuses.every((s) => s.endsWith(":done"))).toBe(true);
    // In one step: a leaf's loop runs in the step that starts it; one command resumes the leaf a person approved.
    expect(inOneStep.turnCommands).toBe(1);
    // Step by step: also one after each turn that asked for tools, i.e. each leaf model call (all calls
    // but 1 plan and 4 evaluations) except the 5 final answers, which complete their task at once.
    const leafTurns = stepByStep.outcome.modelCalls - 1 - 4;
    expect(stepByStep.turnCommands).toBe(1 + leafTurns - 5);
  });
});
