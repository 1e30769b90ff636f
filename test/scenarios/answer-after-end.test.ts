import { afterEach, describe, expect, it } from "vitest";
import { ConflictError } from "../../shared/kernel/errors.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { countEmails, MAILER, inviteByEmail as script } from "./scenarios.ts";

/**
 * An answer that arrives after its task ended (canceled while the question waited, or a cancel
 * racing the answer) is refused as a conflict (409 on the HTTP API): not an internal error, the
 * interaction keeps what it had, no answer is recorded and the risky call never runs.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

async function askedAndCounted() {
  h = await Harness.create({ script, assistants: MAILER });
  const counter = countEmails(h.engine);
  const { rootTaskId } = await h.submit("Invite the team");
  await h.idle();
  const [ask] = await h.pending(rootTaskId);
  expect(ask?.purpose).toBe("confirm_risky_action");
  return { harness: h, rootTaskId, ask: ask?.meta.id as string, counter };
}

const responded = async (harness: Harness, taskId: string) =>
  (await harness.rt.state.readStream(taskId)).filter((e) => e.type === "UserInteractionResponded");

describe("an answer to a task that has ended", () => {
  it("is a conflict, changes nothing and runs nothing, when the task was canceled first", async () => {
    const { harness, rootTaskId, ask, counter } = await askedAndCounted();
    await harness.engine.cancel(rootTaskId, PERSON, "not now");
    const answer = harness.engine.respond(ask, { selectedOptionId: "approve" }, PERSON);
    await expect(answer).rejects.toBeInstanceOf(ConflictError);
    await expect(answer).rejects.toThrow(/can no longer be answered: its task is canceled/);
    await harness.idle();
    expect((await harness.rt.resources.getAs("uip.Interaction", ask))?.status).toBe("pending");
    expect(await responded(harness, ask.slice(0, ask.lastIndexOf("/")))).toEqual([]);
    expect(counter.sent).toBe(0);
    // Nor is the question listed as waiting any more.
    const asker = { actor: PERSON, caller: { tenant: "acme", roles: [] } };
    expect(await harness.engine.pendingInteractions(rootTaskId, asker)).toEqual([]);
  });

  it("is a conflict when a cancel lands between the answer's checks and its record", async () => {
    const { harness, rootTaskId, ask, counter } = await askedAndCounted();
    const taskId = ask.slice(0, ask.lastIndexOf("/"));
    // The cancel is recorded at the moment the answer is written, as a concurrent request would.
    const resources = harness.rt.resources;
    const put = resources.put.bind(resources);
    let canceled = false;
    resources.put = async (resource) => {
      const out = await put(resource);
      if (!canceled && (resource as { meta?: { id?: string } }).meta?.id === ask) {
        canceled = true;
        await harness.engine.cancel(rootTaskId, PERSON, "not now");
      }
      return out;
    };
    await expect(harness.engine.respond(ask, { selectedOptionId: "approve" }, PERSON)).rejects.toBeInstanceOf(
      ConflictError,
    );
    resources.put = put;
    await harness.idle();
    expect(canceled).toBe(true);
    expect((await harness.rt.resources.getAs("uip.Interaction", ask))?.status).toBe("pending");
    expect(await responded(harness, taskId)).toEqual([]);
    expect((await harness.engine.result(rootTaskId)).view?.status).toBe("canceled");
    expect(counter.sent).toBe(0);
  });
});
