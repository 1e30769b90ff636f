import { afterEach, describe, expect, it } from "vitest";
import type { StoredEvent } from "../../shared/domain/events.ts";
import type { FaultPoint } from "../../shared/engine/context.ts";
import { interactionMeta } from "../../shared/engine/interactions.ts";
import { askingScript, CLERK, DATE_QUESTION } from "./ask-fixture.ts";
import { CrashAt, Harness, PERSON } from "./engine-harness.ts";

/**
 * A crash right after the assistant asks, and right after the person answers: a new process opens
 * the same data folder and the watchdog re-drives what stopped. The question is asked once, the
 * answer is applied once (the model sees it once), and the leaf completes once.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const ANSWER = { inputValue: "2026-07-03" };

const CRASHES: [FaultPoint, string][] = [
  ["after-write", "turn"], // the model's turn that asks is on disk; nothing asked yet
  ["after-record", "UserInteractionRequested"], // asked: the task waits; the notice is not out
  ["before-publish", "INTERACTION_REQUESTED"],
  ["after-record", "UserInteractionResponded"], // answered: the resume is not sent
  ["before-publish", "INTERACTION_ANSWERED"],
];

describe("ask_person survives a crash at the worst moments", () => {
  for (const [point, step] of CRASHES) {
    it(`crash ${point} ${step}: asked once, answered once, completed once`, async () => {
      const seen: string[] = [];
      const crash = new CrashAt(point, step);
      h = await Harness.create({
        script: askingScript(DATE_QUESTION, seen),
        assistants: CLERK,
        settings: { electionThreshold: -1 },
        bus: { maxAttempts: 1 },
      });
      await h.restart();
      await h.open(crash);
      const { rootTaskId } = await h.submit("Book the offsite");
      await h.idle();
      if (!crash.fired) {
        // The crash comes with the answer: given in the process that dies.
        const [q] = await h.pending(rootTaskId);
        await h.engine.respond(q?.meta.id as string, ANSWER, PERSON).catch(() => undefined);
        await h.idle();
      }
      expect(crash.fired).toBe(true);
      await h.restart(); // a new process, no faults
      await h.runToEnd(rootTaskId, { answer: ANSWER });

      const { view, output } = await h.engine.result(rootTaskId);
      expect(view?.status).toBe("done");
      expect(output).toBe("booked: 2026-07-03 (told by user_ada)");
      expect(seen).toEqual([
        JSON.stringify({ question: DATE_QUESTION.title, answeredBy: "user_ada", text: "2026-07-03" }),
      ]);
      const events = (await h.rt.state.readStream(rootTaskId, { fromSeq: 1, limit: 500 })) as StoredEvent[];
      const count = (type: string) => events.filter((e) => e.type === type).length;
      expect(count("UserInteractionRequested")).toBe(1);
      expect(count("UserInteractionResponded")).toBe(1);
      expect(count("TaskCompleted")).toBe(1);
      expect(await h.rt.resources.children(rootTaskId, "uip.Interaction")).toHaveLength(1);
    });
  }

  it("a crash between storing the question and the task's move to awaiting_user: announced when driven again, once", async () => {
    const seen: string[] = [];
    const crash = new CrashAt("after-write", "turn");
    h = await Harness.create({
      script: askingScript(DATE_QUESTION, seen),
      assistants: CLERK,
      settings: { electionThreshold: -1 },
      bus: { maxAttempts: 1 },
    });
    await h.restart();
    await h.open(crash);
    const { rootTaskId } = await h.submit("Book the offsite");
    await h.idle();
    expect(crash.fired).toBe(true);
    // What the dying step had written of the question: stored, pending, the task still in progress.
    const meta = interactionMeta(rootTaskId, "ask-turn-0001-0");
    await h.rt.resources.put({
      meta,
      kind: "input",
      purpose: "request_info",
      display: { title: DATE_QUESTION.title },
      validation: DATE_QUESTION.validation,
      status: "pending",
    });
    await h.restart();
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("in_progress");
    await h.runToEnd(rootTaskId, { answer: ANSWER });
    expect((await h.engine.result(rootTaskId)).output).toBe("booked: 2026-07-03 (told by user_ada)");
    const events = (await h.rt.state.readStream(rootTaskId, { fromSeq: 1, limit: 500 })) as StoredEvent[];
    expect(events.filter((e) => e.type === "UserInteractionRequested")).toHaveLength(1);
    expect(seen).toHaveLength(1);
  });
});
