import { afterEach, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { argumentsHash, type StoredEvent } from "../../shared/domain/events.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import { interactionMeta } from "../../shared/engine/interactions.ts";
import { CrashAt, Harness, PERSON } from "./engine-harness.ts";
import { isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * Approvals of risky calls: each is bound to one call and a hash of its exact arguments. It is
 * single use (the same call asked again needs a new one), and changed arguments need a new one.
 */
const MAILER: AssistantDefinition[] = [
  {
    name: "Mailer",
    id: "mailer",
    purpose: "Invite the team by email: invitations and announcements",
    tools: ["send_email"],
  },
];
const email = (to: string) => ({
  name: "send_email",
  arguments: { to, subject: "Offsite", body: "See you there" },
});

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe("approvals of risky calls", () => {
  it("are single use, and changed arguments need a new approval", async () => {
    let sent = 0;
    // The model sends to the team, then the same again, then to someone else, then answers.
    const script: ScriptFunction = (r) => {
      if (isPlan(r)) return planOf({ name: "Invite", purpose: "Invite the team by email" });
      if (isEvaluation(r)) return pass();
      const results = r.messages.filter((m) => m.role === "tool").length;
      if (results === 0) return { toolCalls: [email("team@example.com")] };
      if (results === 1) return { toolCalls: [email("team@example.com")] };
      if (results === 2) return { toolCalls: [email("boss@example.com")] };
      return { content: "invited" };
    };
    h = await Harness.create({ script, assistants: MAILER });
    const execute = h.engine.deps.tools.execute.bind(h.engine.deps.tools);
    h.engine.deps.tools.execute = async (name, args, context) => {
      if (name === "send_email") sent++;
      return execute(name, args, context);
    };
    const { rootTaskId } = await h.submit("Invite the team");
    const approveNext = async () => {
      await h?.idle();
      const pending = (await h?.pending(rootTaskId)) ?? [];
      expect(pending).toHaveLength(1);
      await h?.engine.respond(pending[0]?.meta.id as string, { selectedOptionId: "approve" }, PERSON);
      return pending[0];
    };

    const first = await approveNext();
    await h.idle();
    expect(sent).toBe(1);
    // The same call again: the first approval does not cover it.
    const second = await approveNext();
    expect(second?.meta.id).not.toBe(first?.meta.id);
    expect(second?.binding?.argumentsHash).toBe(first?.binding?.argumentsHash);
    await h.idle();
    expect(sent).toBe(2);
    // Other arguments: a new approval, bound to their own hash.
    const third = await approveNext();
    expect(third?.binding?.argumentsHash).not.toBe(first?.binding?.argumentsHash);
    expect(third?.display.content).toMatchObject({ to: "boss@example.com" });
    await h.idle();
    expect(sent).toBe(3);
    expect((await h.engine.result(rootTaskId)).view?.status).toBe("done");
  });

  it("a denial is final for that call: the tool does not run and the model is told", async () => {
    const script: ScriptFunction = (r) => {
      if (isPlan(r)) return planOf({ name: "Invite", purpose: "Invite the team by email" });
      if (isEvaluation(r)) return pass();
      const told = r.messages.find((m) => m.role === "tool");
      return told ? { content: `noted: ${told.content}` } : { toolCalls: [email("team@example.com")] };
    };
    h = await Harness.create({ script, assistants: MAILER });
    const { rootTaskId } = await h.submit("Invite the team");
    await h.idle();
    const [pending] = await h.pending(rootTaskId);
    await h.engine.respond(pending?.meta.id as string, { selectedOptionId: "deny" }, PERSON);
    await h.idle();
    const { view, output } = await h.engine.result(rootTaskId);
    expect(view?.status).toBe("done");
    expect(output).toMatch(/^noted: A person declined to run send_email/);
    expect((await h.rt.audit.forTask(rootTaskId)).filter((r) => r.tool === "send_email")).toEqual([]);
  });
});

describe("an approval stored before a crash that came before the task waited", () => {
  it("is announced when the task is driven again, once, and the call runs once on the answer", async () => {
    let sent = 0;
    const script: ScriptFunction = (r) => {
      if (isPlan(r)) return planOf({ name: "Invite", purpose: "Invite the team by email" });
      if (isEvaluation(r)) return pass();
      return r.messages.some((m) => m.role === "tool")
        ? { content: "invited" }
        : { toolCalls: [email("team@example.com")] };
    };
    const crash = new CrashAt("after-write", "turn");
    h = await Harness.create({ script, assistants: MAILER, bus: { maxAttempts: 1 } });
    await h.restart();
    await h.open(crash);
    const { rootTaskId } = await h.submit("Invite the team");
    await h.idle();
    expect(crash.fired).toBe(true);
    // What the dying step had written of the question: stored and pending, the task in progress.
    const call = email("team@example.com");
    await h.rt.resources.put({
      meta: interactionMeta(rootTaskId, "confirm-turn-0001-0"),
      kind: "confirm",
      purpose: "confirm_risky_action",
      display: { title: "Allow send_email?", content: call.arguments, contentKind: "Json" },
      options: [
        { id: "approve", label: "Allow", style: "primary" },
        { id: "deny", label: "Deny", style: "danger" },
      ],
      binding: { tool: "send_email", argumentsHash: argumentsHash(call.arguments) },
      status: "pending",
    });
    await h.restart();
    const execute = h.engine.deps.tools.execute.bind(h.engine.deps.tools);
    h.engine.deps.tools.execute = async (name, args, context) => {
      if (name === "send_email") sent++;
      return execute(name, args, context);
    };
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("in_progress");
    h.advance(10 * 60_000); // past the turn's claim
    await h.engine.watchdog(60_000);
    await h.idle();
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("awaiting_user");
    const [question] = await h.pending(rootTaskId);
    expect(question?.meta.name).toBe("confirm-turn-0001-0");
    expect(sent).toBe(0);
    await h.engine.respond(question?.meta.id as string, { selectedOptionId: "approve" }, PERSON);
    await h.idle();
    expect((await h.engine.result(rootTaskId)).view?.status).toBe("done");
    expect(sent).toBe(1);
    const events = (await h.rt.state.readStream(rootTaskId, { fromSeq: 1, limit: 500 })) as StoredEvent[];
    expect(events.filter((e) => e.type === "UserInteractionRequested")).toHaveLength(1);
  });
});
