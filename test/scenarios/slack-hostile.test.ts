import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ACTION_OPEN, ACTION_OPTION } from "../../shared/channels/chat/slack/blocks.ts";
import { slackConversationName } from "../../shared/channels/chat/slack/identity.ts";
import type { Urn } from "../../shared/domain/urn.ts";
import { requestInteraction } from "../../shared/engine/interactions.ts";
import { rootTaskUrn } from "../../shared/engine/steps/planner.ts";
import { commandForm, eventCallback, type FakeMessage, interactivityForm } from "../peers/fake-slack.ts";
import { GENERALIST } from "./scenarios.ts";
import { oneVenue, type SlackWorld, startSlackWorld, TEAM } from "./slack-world.ts";

/**
 * Slack as its worst users (and a confused Slack) would send it, every request validly signed: a
 * button naming another tenant's question, a task, a made-up URN, an option the question does not
 * have, a value of 200 KB; a modal whose private_metadata names another question or another mode;
 * `payload` that is not JSON or not even form-decodable; the same event id with another text; a
 * retry racing its first delivery; a mention of 200 KB. Each writes nothing it should not.
 */
let w: SlackWorld;
beforeEach(async () => {
  w = await startSlackWorld({ script: oneVenue, assistants: GENERALIST });
});
afterEach(async () => w?.close());

const TS = "1780000000.000100";
const message: FakeMessage = {
  channel: "C1",
  ts: "1780000000.000200",
  threadTs: TS,
  text: "q",
  blocks: [],
  history: [],
};

const clickWith = (actionId: string, value: string, user = "U_ADA", team = TEAM) =>
  w.post(
    "/slack/interactivity",
    interactivityForm({
      type: "block_actions",
      team: { id: team },
      user: { id: user, team_id: team },
      trigger_id: "trig.attack",
      container: { channel_id: "C1", message_ts: message.ts, thread_ts: TS },
      channel: { id: "C1" },
      message: { ts: message.ts, thread_ts: TS },
      actions: [{ type: "button", action_id: actionId, value }],
    }),
  );

const submission = (privateMetadata: string, values: Record<string, unknown>, user = "U_ADA", team = TEAM) =>
  w.post(
    "/slack/interactivity",
    interactivityForm({
      type: "view_submission",
      team: { id: team },
      user: { id: user, team_id: team },
      view: { callback_id: "arbor.answer", private_metadata: privateMetadata, state: { values } },
    }),
  );

async function lazyRequest() {
  const { rootTaskId } = await w.h.submit("Plan the offsite", "lazy");
  await w.h.idle();
  const [approval] = await w.h.pending(rootTaskId);
  if (!approval) throw new Error("expected the plan's approval");
  return { rootTaskId, approval };
}
const status = async (urn: string) => (await w.h.engine.deps.resources.getAs("uip.Interaction", urn))?.status;
const lastTold = () => String(w.fake.calls("chat.postEphemeral").at(-1)?.args.text ?? "");

describe("buttons that name what they should not", () => {
  it("another tenant's question, a task, a made-up or malformed URN, a 200 KB value: told, nothing answered", async () => {
    const { rootTaskId, approval } = await lazyRequest();
    const before = await w.written();
    const foreign = approval.meta.id.replace("common.Tenant.acme", "common.Tenant.globex");
    const cases: [string, string][] = [
      ["another tenant's question", `${foreign}\napprove`],
      ["a task", `${rootTaskId}\napprove`],
      ["a made-up question", `cld:common.Tenant.acme/uip.Interaction.nope\napprove`],
      ["a climbing URN", `cld:common.Tenant.acme/../common.Tenant.globex/uip.Interaction.x\napprove`],
      ["no option at all", approval.meta.id],
      ["a value of 200 KB", `${approval.meta.id}\n${"x".repeat(200_000)}`],
    ];
    for (const [what, value] of cases) {
      const res = await clickWith(`${ACTION_OPTION}.0`, value);
      expect(res.status, what).toBe(200);
      // Refused before the engine (not a question of this workspace), or by it (no such question).
      expect(lastTold(), what).toMatch(
        /does not name a question of this workspace's requests|^Refused: user_ada may not answer/,
      );
    }
    const open = await clickWith(`${ACTION_OPEN}.0`, `edit\n${foreign}`);
    expect(open.status).toBe(200);
    expect(lastTold()).toMatch(/does not name a question/);
    expect(w.fake.calls("views.open")).toHaveLength(0);
    expect(await status(approval.meta.id)).toBe("pending");
    expect(await w.written()).toEqual(before);
  });

  it("an option the question does not have: refused with what it takes, the question still waits", async () => {
    const { approval } = await lazyRequest();
    const before = await w.written();
    const res = await clickWith(`${ACTION_OPTION}.0`, `${approval.meta.id}\nallow-everything`);
    expect(res.status).toBe(200);
    expect(lastTold()).toMatch(/selectedOptionId must be one of/);
    expect(await status(approval.meta.id)).toBe("pending");
    expect(await w.written()).toEqual(before);
  });
});

describe("two workspaces mapped to two tenants", () => {
  it("an admin of workspace B can neither answer, open, submit nor watch a request of workspace A's tenant", async () => {
    const slack = w.settings.slack;
    if (!slack) throw new Error("the world has Slack settings");
    slack.workspaces.T2 = {
      tenant: "globex",
      botToken: slack.workspaces[TEAM]?.botToken ?? "",
      users: {},
      admins: ["U_EVE"],
      defaultRoles: [],
    };
    const { rootTaskId, approval } = await lazyRequest();
    const before = await w.written();
    await clickWith(`${ACTION_OPTION}.0`, `${approval.meta.id}\napprove`, "U_EVE", "T2");
    expect(lastTold()).toMatch(/does not name a question of this workspace's requests/);
    await clickWith(`${ACTION_OPEN}.0`, `edit\n${approval.meta.id}`, "U_EVE", "T2");
    expect(lastTold()).toMatch(/does not name a question of this workspace's requests/);
    expect(w.fake.calls("views.open")).toHaveLength(0);
    const res = await submission(
      JSON.stringify({ urn: approval.meta.id, mode: "edit" }),
      {
        "arbor.value": { value: { type: "plain_text_input", value: "{}" } },
      },
      "U_EVE",
      "T2",
    );
    expect(await res.json()).toMatchObject({ response_action: "errors" });
    const watch = await w.post(
      "/slack/commands",
      commandForm({ team: "T2", channel: "C9", user: "U_EVE", text: `watch ${rootTaskId}` }),
    );
    expect(((await watch.json()) as { text: string }).text).toMatch(
      /There is no request .* that you can follow here/,
    );
    expect(await status(approval.meta.id)).toBe("pending");
    expect(await w.written()).toEqual(before);
  });
});

describe("modals whose private_metadata was not the one Arbor set", () => {
  it("naming another tenant's question, or not JSON: refused on the form's field", async () => {
    const { approval } = await lazyRequest();
    const foreign = approval.meta.id.replace("common.Tenant.acme", "common.Tenant.globex");
    for (const meta of [JSON.stringify({ urn: foreign, mode: "input" }), "{not json", "x".repeat(3001)]) {
      const res = await submission(meta, {});
      expect(await res.json()).toMatchObject({ response_action: "errors" });
    }
    expect(await status(approval.meta.id)).toBe("pending");
  });

  it("'edit' mode on a question that is no plan (a risky call): refused, not taken as its first option", async () => {
    const { rootTaskId } = await lazyRequest();
    const urn = await requestInteraction(w.h.engine.deps, rootTaskId, "risky", {
      kind: "confirm",
      purpose: "confirm_risky_action",
      display: { title: "Allow wire_money?" },
      options: [
        { id: "allow", label: "Allow" },
        { id: "deny", label: "Deny" },
      ],
    });
    const res = await submission(JSON.stringify({ urn, mode: "edit" }), {
      "arbor.value": { value: { type: "plain_text_input", value: "{}" } },
    });
    expect(await res.json()).toMatchObject({ response_action: "errors" });
    expect(await status(urn)).toBe("pending");
  });
});

describe("interactivity bodies that are not what Slack sends", () => {
  it("no payload, a payload that is not JSON, or a body that does not form-decode: 400, nothing written", async () => {
    const before = await w.written();
    for (const body of [
      "nothing=here",
      "payload=%7Bnot%20json",
      "payload=%ZZ%E0%A4%A",
      "payload=",
      "payload=%5B%5D",
    ]) {
      const res = await w.post("/slack/interactivity", body);
      expect(res.status, body).toBe(400);
    }
    expect(await w.written()).toEqual(before);
  });
});

describe("events delivered twice, or oddly", () => {
  const mention = (eventId: string, text: string) =>
    eventCallback({
      team: TEAM,
      eventId,
      event: { type: "app_mention", user: "U_ADA", text: `<@UBOT> ${text}`, channel: "C1", ts: TS },
    });
  const conversation = `cld:common.Tenant.acme/common.Conversation.${slackConversationName(TEAM, "C1", TS)}`;
  const messages = () => w.h.engine.deps.resources.childUrns(conversation, "common.Message");

  it("a retry racing its first delivery: one request", async () => {
    const body = mention("EvRace", "plan the offsite");
    const results = await Promise.all([
      w.post("/slack/events", body),
      w.post("/slack/events", body, { "x-slack-retry-num": "1", "x-slack-retry-reason": "timeout" }),
      w.post("/slack/events", body, { "x-slack-retry-num": "2", "x-slack-retry-reason": "timeout" }),
    ]);
    expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
    const [only] = await messages();
    expect(await messages()).toHaveLength(1);
    expect(await w.notify.service.subscriptions(rootTaskUrn(only as Urn))).toHaveLength(1);
  });

  it("the same event id with another text: the first stands, the second writes nothing", async () => {
    expect((await w.post("/slack/events", mention("EvSame", "plan the offsite"))).status).toBe(200);
    const settled = await w.written();
    const res = await w.post("/slack/events", mention("EvSame", "wire the money"));
    expect(res.status).toBe(200);
    await w.h.idle();
    const [only] = await messages();
    expect((await w.h.engine.deps.resources.getAs("common.Message", only as string))?.content).toBe(
      "plan the offsite",
    );
    expect(await messages()).toHaveLength(1);
    expect((await w.written()).resources).toBeGreaterThanOrEqual(settled.resources);
  });

  it("a mention of 200 KB: told it is too long, nothing written", async () => {
    const before = await w.written();
    const res = await w.post("/slack/events", mention("EvHuge", "a".repeat(199_000)));
    expect(res.status).toBe(200);
    expect(lastTold()).toMatch(/at most 100000/);
    expect(await w.written()).toEqual(before);
  });
});
