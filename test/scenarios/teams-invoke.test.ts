import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PERSON } from "./engine-harness.ts";
import { ADA, BOB, ROOT, startTeamsWorld, stopTeamsWorld, type TeamsWorld } from "./teams-world.ts";

/**
 * Answering in Teams a question of a request started over the HTTP API (as user_ada, whom the
 * Teams settings map her Entra account to): the Action.Execute invoke answers as the person, the
 * policy decides, and the invoke's response is the refreshed card (who answered what) or an error.
 */
interface InvokeBody {
  statusCode: number;
  type: string;
  value: { code?: string; message?: string; actions?: unknown[]; body?: unknown[] };
}

let w: TeamsWorld;
let rootTaskId: string;
let question: string;
beforeAll(async () => {
  w = await startTeamsWorld();
  ({ rootTaskId } = await w.h.engine.submit({ tenant: "acme", text: "Invite the team", actor: PERSON }));
  await w.h.idle();
  const pending = await w.h.pending(rootTaskId);
  expect(pending).toHaveLength(1);
  question = pending[0]?.meta.id as string;
});
afterAll(() => stopTeamsWorld(w));

const invoke = async (data: Record<string, unknown>, options: { from?: string; verb?: string } = {}) => {
  const res = await w.send(w.invoke(data, options));
  expect(res.status).toBe(200);
  return (await res.json()) as InvokeBody;
};

const status = async () => (await w.h.engine.deps.resources.getAs("uip.Interaction", question))?.status;

describe("Teams card actions", () => {
  it("refuses someone the policy does not let answer, and answers nothing", async () => {
    const body = await invoke({ interaction: question, option: "approve" }, { from: BOB });
    expect(body).toMatchObject({ statusCode: 403, type: "application/vnd.microsoft.error" });
    expect(body.value.message).toMatch(/may not answer/);
    expect(await status()).toBe("pending");
  });

  it("refuses an answer that does not fit the question, and answers nothing", async () => {
    const body = await invoke({ interaction: question, option: "maybe" });
    expect(body).toMatchObject({ statusCode: 400, type: "application/vnd.microsoft.error" });
    expect(body.value.message).toMatch(/approve, deny/);
    expect(await status()).toBe("pending");
    const notUrn = await invoke({ interaction: "not a urn", option: "approve" });
    expect(notUrn.statusCode).toBe(400);
    const unknown = await invoke({ interaction: question, option: "approve" }, { verb: "arbor.delete" });
    expect(unknown.statusCode).toBe(400);
    expect(await status()).toBe("pending");
  });

  it("lets whoever may read it refresh the card, and nobody else", async () => {
    const bob = await invoke({ interaction: question }, { from: BOB, verb: "arbor.refresh" });
    expect(bob.statusCode).toBe(403);
    const admin = await invoke({ interaction: question }, { from: ROOT, verb: "arbor.refresh" });
    expect(admin).toMatchObject({ statusCode: 200, type: "application/vnd.microsoft.card.adaptive" });
    expect(admin.value.actions).toHaveLength(2);
  });

  it("answers as the person who started it: the response is the card showing who answered what", async () => {
    const body = await invoke({ interaction: question, option: "approve" }, { from: ADA });
    expect(body).toMatchObject({ statusCode: 200, type: "application/vnd.microsoft.card.adaptive" });
    expect(body.value.actions).toBeUndefined();
    expect(JSON.stringify(body.value.body)).toContain("Answered by **Ada Lovelace**: Allow");
    expect(await status()).toBe("answered");
    // The work resumes: the email is sent and the request completes.
    await w.h.idle();
    expect((await w.h.engine.result(rootTaskId)).view?.status).toBe("done");
  });

  it("shows a question already answered as answered, to a second click", async () => {
    const again = await invoke({ interaction: question, option: "deny" }, { from: ADA });
    expect(again).toMatchObject({ statusCode: 200, type: "application/vnd.microsoft.card.adaptive" });
    expect(JSON.stringify(again.value.body)).toContain("Answered by **Ada Lovelace**: Allow");
  });
});
