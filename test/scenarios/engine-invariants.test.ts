import { afterEach, describe, expect, it } from "vitest";
import { ASSISTANTS, script as offsite, REQUEST } from "../../examples/offsite/scenario.ts";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import type { TaskSpec } from "../../shared/domain/resources.ts";
import { ConflictError, ForbiddenError, ValidationError } from "../../shared/kernel/errors.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import {
  fanOut,
  GENERALIST,
  GENERALIST_URN,
  isEvaluation,
  isPlan,
  pass,
  planOf,
  taskName,
} from "./scenarios.ts";

let h: Harness;
afterEach(() => h?.close());

const evaluations = (hh: Harness) =>
  hh.llm.calls.filter((c) => c.tools?.some((t) => t.name === "report_evaluation")).length;
const completions = async (hh: Harness, taskId: string) =>
  (await hh.rt.state.readStream(taskId)).filter((e) => e.type === "TaskCompleted").length;

describe("engine invariants", () => {
  it("ten children finishing together, every event delivered twice: each child completes once, the parent is judged once", async () => {
    const { script } = fanOut(10, 5);
    h = await Harness.create({ script, assistants: GENERALIST, bus: { deliveries: 2 } });
    const { rootTaskId } = await h.submit("survey ten parts");
    await h.idle();
    const tree = await h.tree(rootTaskId);
    expect(tree.size).toBe(11);
    expect([...tree.values()].every((v) => v.status === "done")).toBe(true);
    expect(evaluations(h)).toBe(1);
    for (const v of tree.values()) expect(await completions(h, v.taskId)).toBe(1);
    // One LLM call per leaf even though every command arrived twice.
    expect(
      h.llm.calls.filter((c) => !c.tools?.some((t) => ["create_plan", "report_evaluation"].includes(t.name))),
    ).toHaveLength(10);
  });

  it("lazy mode stops for approval of the whole tree, and runs the plan a person edited", async () => {
    const { script } = fanOut(3);
    h = await Harness.create({ script, assistants: GENERALIST });
    const { rootTaskId } = await h.submit("survey three parts", "lazy");
    await h.idle();
    const [approval] = await h.pending(rootTaskId);
    expect(approval?.purpose).toBe("approve_plan");
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("awaiting_user");
    expect(h.llm.calls).toHaveLength(1); // only the planner ran
    expect(await h.rt.tasks.children(rootTaskId)).toHaveLength(0);

    const bad = h.engine.respond(
      approval?.meta.id as string,
      { selectedOptionId: "approve", inputValue: '{"name":"x","subtasks":[{"name":""}]}' },
      PERSON,
    );
    await expect(bad).rejects.toBeInstanceOf(ValidationError);
    const edited: TaskSpec = { name: "Survey", subtasks: [{ name: "part A" }, { name: "part B" }] };
    await h.engine.respond(
      approval?.meta.id as string,
      { selectedOptionId: "approve", inputValue: JSON.stringify(edited) },
      PERSON,
    );
    await h.idle();
    const tree = await h.tree(rootTaskId);
    expect([...tree.keys()].sort()).toEqual(["Survey", "part A", "part B"]);
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
  });

  it("a rejected plan cancels the request and runs nothing", async () => {
    h = await Harness.create({ script: fanOut(2).script, assistants: GENERALIST });
    const { rootTaskId } = await h.submit("survey", "lazy");
    await h.idle();
    const [approval] = await h.pending(rootTaskId);
    await h.engine.respond(approval?.meta.id as string, { selectedOptionId: "reject" }, PERSON);
    await h.idle();
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("canceled");
    expect(h.llm.calls).toHaveLength(1);
  });

  it("cancels a subtree: waiting work stops, the rest of the request finishes", async () => {
    h = await Harness.create({ script: offsite, assistants: ASSISTANTS });
    const { rootTaskId } = await h.submit(REQUEST);
    await h.idle();
    const [approval] = await h.pending(rootTaskId);
    const agenda = (await h.tree(rootTaskId)).get("Agenda");
    await h.engine.cancel(agenda?.taskId as string, PERSON, "agenda postponed");
    await h.idle();
    const tree = await h.tree(rootTaskId);
    expect(tree.get("Agenda")?.status).toBe("canceled");
    expect(tree.get("Invite the team")?.status).toBe("canceled");
    expect(tree.get("Draft sessions")?.status).toBe("done"); // it had finished before
    expect(tree.get("Plan the offsite")?.status).toBe("done"); // the root judged what it had
    // The canceled task's question can no longer be answered: a conflict (409), every time.
    const late = h.engine.respond(approval?.meta.id as string, { selectedOptionId: "approve" }, PERSON);
    await expect(late).rejects.toThrow(/can no longer be answered: its task is canceled/);
    await expect(
      h.engine.respond(approval?.meta.id as string, { selectedOptionId: "approve" }, PERSON),
    ).rejects.toBeInstanceOf(ConflictError);
  });

  it("canceling a task that already ended changes nothing: its answer stays", async () => {
    h = await Harness.create({ script: offsite, assistants: ASSISTANTS });
    const { rootTaskId } = await h.submit(REQUEST);
    await h.idle();
    const drafted = (await h.tree(rootTaskId)).get("Draft sessions");
    expect(drafted?.status).toBe("done");
    const before = await h.engine.result(drafted?.taskId as string);
    await h.engine.cancel(drafted?.taskId as string, PERSON, "too late");
    await h.idle();
    expect(await h.engine.result(drafted?.taskId as string)).toEqual(before);
  });

  it("only a person of the tenant may answer: never an assistant, never another tenant's person", async () => {
    h = await Harness.create({ script: offsite, assistants: ASSISTANTS });
    const { rootTaskId } = await h.submit(REQUEST);
    await h.idle();
    const [approval] = await h.pending(rootTaskId);
    const urn = approval?.meta.id as string;
    const assistant = {
      id: "cld:common.Tenant.acme/common.Assistant.communications",
      kind: "agent" as const,
    };
    await expect(h.engine.respond(urn, { selectedOptionId: "approve" }, assistant)).rejects.toThrow(
      ForbiddenError,
    );
    await expect(
      h.engine.respond(urn, { selectedOptionId: "approve" }, PERSON, { tenant: "beta" }),
    ).rejects.toThrow(/may not answer "Allow send_email\?": it belongs to tenant acme, not to beta/);
    expect((await h.pending(rootTaskId)).map((p) => p.meta.id)).toEqual([urn]); // still waiting
    await h.engine.respond(urn, { selectedOptionId: "approve" }, PERSON, { tenant: "acme" });
    await h.idle();
    expect((await h.engine.result(rootTaskId)).view?.status).toBe("done");
  });

  it("an answer must fit the question", async () => {
    h = await Harness.create({ script: offsite, assistants: ASSISTANTS });
    const { rootTaskId } = await h.submit(REQUEST);
    await h.idle();
    const [approval] = await h.pending(rootTaskId);
    await expect(
      h.engine.respond(approval?.meta.id as string, { selectedOptionId: "maybe" }, PERSON),
    ).rejects.toThrow(/approve, deny/);
    await h.engine.respond(approval?.meta.id as string, { selectedOptionId: "deny" }, PERSON);
    await h.idle();
    const invite = (await h.tree(rootTaskId)).get("Invite the team");
    expect(invite?.status).toBe("done");
    const result = (await h.rt.state.readStream(invite?.taskId as string)).length;
    expect(result).toBeGreaterThan(0);
    // The model was told the person declined, and no email tool result claims success.
    const toolMessages = h.llm.calls.flatMap((c) => c.messages).filter((m) => m.role === "tool");
    expect(toolMessages.some((m) => m.role === "tool" && /declined/.test(m.content))).toBe(true);
    expect(toolMessages.some((m) => m.role === "tool" && /queued for/.test(m.content))).toBe(false);
  });
});

describe("election below the threshold", () => {
  it("asks a person to assign the task when no assistant fits and there is no fallback, then runs it", async () => {
    const script: ScriptFunction = (r) =>
      isPlan(r) ? planOf({ name: "zzz qqq" }) : { content: "done by the chosen one" };
    h = await Harness.create({ script, assistants: GENERALIST });
    const { rootTaskId } = await h.submit("zzz qqq");
    await h.idle();
    const [ask] = await h.pending(rootTaskId);
    expect(ask?.purpose).toBe("assign_subtask");
    expect(ask?.options?.map((o) => o.id)).toEqual([GENERALIST_URN]);
    // The answer's step hands the leaf to the turn step (the one that may call the model on AWS).
    const turns: unknown[] = [];
    h.rt.bus.subscribe({
      name: "turn-observer",
      pattern: { "detail-type": ["TURN_REQUESTED"] },
      handler: async (e) => void turns.push(e.detail.taskId),
    });
    await h.engine.respond(ask?.meta.id as string, { selectedOptionId: GENERALIST_URN }, PERSON);
    await h.idle();
    expect(turns).toEqual([rootTaskId]);
    expect(await h.engine.result(rootTaskId)).toMatchObject({
      view: { status: "done" },
      output: "done by the chosen one",
    });
  });

  it("asks as well when an approved plan is a single task that nobody fits", async () => {
    const script: ScriptFunction = (r) =>
      isPlan(r) ? planOf({ name: "zzz qqq" }) : { content: "done once assigned" };
    h = await Harness.create({ script, assistants: GENERALIST });
    const { rootTaskId } = await h.submit("zzz qqq", "lazy");
    await h.idle();
    const [approval] = await h.pending(rootTaskId);
    await h.engine.respond(approval?.meta.id as string, { selectedOptionId: "approve" }, PERSON);
    await h.idle();
    const [ask] = await h.pending(rootTaskId);
    expect(ask?.purpose).toBe("assign_subtask");
    await h.engine.respond(ask?.meta.id as string, { selectedOptionId: GENERALIST_URN }, PERSON);
    await h.idle();
    expect(await h.engine.result(rootTaskId)).toMatchObject({
      view: { status: "done" },
      output: "done once assigned",
    });
  });
});

describe("budgets end runaway work with a clear terminal state", () => {
  it("a plan deeper than allowed is returned to the model once, then the request fails saying why", async () => {
    const deep: TaskSpec = {
      name: "a",
      subtasks: [
        { name: "b", subtasks: [{ name: "c", subtasks: [{ name: "d", subtasks: [{ name: "e" }] }] }] },
      ],
    };
    h = await Harness.create({
      script: () => planOf(deep),
      assistants: GENERALIST,
      settings: { defaultBudgets: { maxDepth: 3 } },
    });
    const { rootTaskId } = await h.submit("go deep");
    await h.idle();
    const view = await h.rt.tasks.view(rootTaskId);
    expect(view?.status).toBe("failed");
    expect(view?.failureReason).toMatch(/deeper than maxDepth 3/);
    expect(h.llm.calls).toHaveLength(2);
    expect(h.llm.calls[1]?.messages.some((m) => m.role === "tool" && /invalid/.test(m.content))).toBe(true);
  });

  it("a leaf that keeps calling tools stops at its turn budget", async () => {
    const script: ScriptFunction = (r) => {
      if (isPlan(r)) return planOf({ name: "loop", subtasks: [{ name: "spin", budgets: { maxTurns: 3 } }] });
      if (isEvaluation(r)) return pass();
      return { toolCalls: [{ name: "word_count", arguments: { text: "again" } }] };
    };
    h = await Harness.create({
      script,
      assistants: GENERALIST,
      settings: { fallbackAssistant: GENERALIST_URN },
    });
    const { rootTaskId } = await h.submit("spin forever");
    await h.idle();
    const spin = (await h.tree(rootTaskId)).get("spin");
    expect(spin?.status).toBe("failed");
    expect(spin?.failureReason).toMatch(/budget maxTurns exhausted \(3 of 3\)/);
    expect(h.llm.calls.filter((c) => taskName(c) === "spin")).toHaveLength(3);
  });

  it("an evaluator that is never satisfied stops after the corrective-round budget", async () => {
    const script: ScriptFunction = (r) => {
      if (isPlan(r))
        return planOf({ name: "never", budgets: { maxCorrectiveRounds: 2 }, subtasks: [{ name: "try" }] });
      if (isEvaluation(r)) {
        return {
          toolCalls: [
            {
              name: "report_evaluation",
              arguments: {
                passed: false,
                reason: "not good enough",
                corrective_subtasks: [{ name: "try harder" }],
              },
            },
          ],
        };
      }
      return { content: "an attempt" };
    };
    h = await Harness.create({
      script,
      assistants: GENERALIST,
      settings: { fallbackAssistant: GENERALIST_URN },
    });
    const { rootTaskId } = await h.submit("never satisfied");
    await h.idle();
    // With the rounds spent, a person decides how it goes on (choose_strategy): here, to stop.
    const [asked] = await h.pending(rootTaskId);
    expect(asked).toMatchObject({ kind: "select", purpose: "choose_strategy" });
    await h.engine.respond(asked?.meta.id as string, { selectedOptionId: "stop" }, PERSON);
    await h.idle();
    const view = await h.rt.tasks.view(rootTaskId);
    expect(view?.status).toBe("failed");
    expect(view?.failureReason).toMatch(
      /not good enough \(round 2 failed, after 2 corrective round\(s\); user_ada chose to stop here\)/,
    );
    expect(evaluations(h)).toBe(3);
    expect((await h.rt.tasks.children(rootTaskId)).length).toBe(3);
  });
});
