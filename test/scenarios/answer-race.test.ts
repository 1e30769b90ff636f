import { afterEach, describe, expect, it } from "vitest";
import { ScriptedLlm } from "../../shared/adapters/llm/scripted-llm.ts";
import { answerKey } from "../../shared/engine/interactions.ts";
import { ConflictError, UnavailableError } from "../../shared/kernel/errors.ts";
import { createLocalRuntime } from "../../shared/runtime/local/local.ts";
import { createLocalEngine } from "../../shared/runtime/local/local-engine.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { countEmails, MAILER, inviteByEmail as script } from "./scenarios.ts";

/**
 * Approve and deny racing on one question (two people, two channels, a double click): exactly one
 * answer wins, every other is a conflict (409), the stored question and the event log agree on the
 * winner, and the risky call runs only when the winner approved. With resources kept as files
 * (ARBOR_OBJECT_STORE=files), whose reads and writes really wait on the disk, the answers
 * interleave as they would between requests of a loaded server.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe("answers racing on one question", () => {
  for (const objectStore of ["files", "sqlite"] as const) {
    it(`exactly one wins, and only its decision is kept and acted on (${objectStore} store)`, async () => {
      for (const first of ["approve", "deny"] as const) {
        h = await Harness.create({ script, assistants: MAILER, objectStore });
        const emails = countEmails(h.engine);
        const { rootTaskId } = await h.submit("Invite the team");
        await h.idle();
        const [ask] = await h.pending(rootTaskId);
        const urn = ask?.meta.id as string;
        const choices = Array.from({ length: 8 }, (_, i) =>
          i % 2 === 0 ? first : first === "approve" ? "deny" : "approve",
        );
        const outcomes = await Promise.allSettled(
          choices.map((selectedOptionId) => (h as Harness).engine.respond(urn, { selectedOptionId }, PERSON)),
        );
        const won = choices.filter((_, i) => outcomes[i]?.status === "fulfilled");
        expect(won).toHaveLength(1);
        for (const o of outcomes) if (o.status === "rejected") expect(o.reason).toBeInstanceOf(ConflictError);
        await h.idle();
        const stored = await h.rt.resources.getAs("uip.Interaction", urn);
        const recorded = (await h.rt.state.readStream(urn.slice(0, urn.lastIndexOf("/")))).filter(
          (e) => e.type === "UserInteractionResponded",
        );
        expect(recorded.map((e) => (e.payload as { selectedOptionId?: string }).selectedOptionId)).toEqual(
          won,
        );
        expect(stored?.response?.selectedOptionId).toBe(won[0]);
        expect(emails.sent).toBe(won[0] === "approve" ? 1 : 0);
        await h.close();
        h = undefined;
      }
    });
  }
});

describe("answers racing from two processes on one store", () => {
  it("exactly one wins: the answer is claimed with a conditional write first (as on AWS)", async () => {
    h = await Harness.create({ script, assistants: MAILER });
    const { rootTaskId } = await h.submit("Invite the team");
    await h.idle();
    const [ask] = await h.pending(rootTaskId);
    const urn = ask?.meta.id as string;
    // A question is shown to people once it is on disk; only then can another process see it.
    await h.rt.untilDurable();
    // A second engine on the same data folder, as another function instance on the same tables.
    const rt2 = createLocalRuntime({ mode: "local", tenant: "acme", dataDir: h.dataDir, durable: false });
    const other = await createLocalEngine(rt2, { llm: new ScriptedLlm(script) });
    try {
      // A busy database is a 503 the client sends again (SQLite's lock between the two connections).
      const answer = async (engine: typeof other, selectedOptionId: string): Promise<void> => {
        for (;;) {
          try {
            return await engine.respond(urn, { selectedOptionId }, PERSON);
          } catch (error) {
            if (!(error instanceof UnavailableError)) throw error;
            await new Promise((r) => setTimeout(r, 5));
          }
        }
      };
      const outcomes = await Promise.allSettled([
        answer(h.engine, "approve"),
        answer(other, "deny"),
        answer(h.engine, "deny"),
        answer(other, "approve"),
      ]);
      const won = ["approve", "deny", "deny", "approve"].filter(
        (_, i) => outcomes[i]?.status === "fulfilled",
      );
      expect(won).toHaveLength(1);
      for (const o of outcomes) if (o.status === "rejected") expect(o.reason).toBeInstanceOf(ConflictError);
      const stored = await h.rt.resources.getAs("uip.Interaction", urn);
      const recorded = (await h.rt.state.readStream(urn.slice(0, urn.lastIndexOf("/")))).filter(
        (e) => e.type === "UserInteractionResponded",
      );
      expect(recorded.map((e) => (e.payload as { selectedOptionId?: string }).selectedOptionId)).toEqual(won);
      expect(stored?.response?.selectedOptionId).toBe(won[0]);
    } finally {
      await other.close();
      await rt2.close();
    }
  });
});

describe("an answer claimed by a process that died before writing the rest", () => {
  it("is finished by the next answer, which hears 409: the question is not left claimed and unanswered", async () => {
    h = await Harness.create({ script, assistants: MAILER });
    const sent = countEmails(h.engine);
    const { rootTaskId } = await h.submit("Invite the team");
    await h.idle();
    const [ask] = await h.pending(rootTaskId);
    const urn = ask?.meta.id as string;
    // The claim alone, as a process (a Lambda instance) leaves it when it dies right after it.
    const boss = { id: "user_boss", kind: "human" as const };
    await h.rt.state.transact([
      {
        op: "put",
        record: {
          key: answerKey(urn),
          kind: "answer",
          updatedAt: new Date(h.now).toISOString(),
          data: { actor: boss, response: { selectedOptionId: "approve" } },
        },
        expectedVersion: 0,
      },
    ]);
    expect((await h.rt.resources.getAs("uip.Interaction", urn))?.status).toBe("pending");

    await expect(h.engine.respond(urn, { selectedOptionId: "deny" }, PERSON)).rejects.toBeInstanceOf(
      ConflictError,
    );
    await h.idle();
    const stored = await h.rt.resources.getAs("uip.Interaction", urn);
    expect(stored).toMatchObject({
      status: "answered",
      response: { selectedOptionId: "approve", actor: "user_boss" },
    });
    const recorded = (await h.rt.state.readStream(urn.slice(0, urn.lastIndexOf("/"))))
      .filter((e) => e.type === "UserInteractionResponded")
      .map((e) => [e.actor.id, (e.payload as { selectedOptionId?: string }).selectedOptionId]);
    expect(recorded).toEqual([["user_boss", "approve"]]);
    expect(sent.sent).toBe(1); // the claimed approval, acted on once
    expect((await h.engine.result(rootTaskId)).view?.status).toBe("done");
  });
});
