import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { slackConversationName } from "../../shared/channels/chat/slack/identity.ts";
import { threadHead } from "../../shared/channels/chat/slack/thread-heads.ts";
import {
  buttonClick,
  buttonsOf,
  commandForm,
  eventCallback,
  type FakeMessage,
  interactivityForm,
  textOf,
} from "../peers/fake-slack.ts";
import { until } from "./notify-fixture.ts";
import { countEmails, inviteByEmail, MAILER } from "./scenarios.ts";
import { ada, type SlackWorld, startSlackWorld, TEAM } from "./slack-world.ts";

/**
 * Slack end to end: the real routes on the real server, the local notify path with the Slack
 * surface, the real WebClient against the fake Slack API. A mention leads to a progress message in
 * the thread kept up to date, an approval (a risky call, its exact arguments), the answer; clicks
 * answer as the policy allows; follow-ups continue the thread's conversation; the slash command
 * starts a thread of its own; `/arbor watch` brings a request made over the HTTP API into Slack,
 * and a question shown in Slack is answered over the HTTP API by the same person.
 */
let w: SlackWorld;
beforeEach(async () => {
  w = await startSlackWorld({ script: inviteByEmail, assistants: MAILER });
});
afterEach(async () => w?.close());

const TS = "1780000000.000100";
const mention = (eventId: string, user: string, text: string, extra: Record<string, string> = {}) =>
  eventCallback({
    team: TEAM,
    eventId,
    event: {
      type: "app_mention",
      user,
      text: `<@UBOT> ${text}`,
      channel: "C1",
      ts: extra.ts ?? TS,
      ...extra,
    },
  });

/** Waits, driving the engine, until `check` finds what it looks for. */
async function waitFor<T>(what: string, check: () => T | undefined | Promise<T | undefined>): Promise<T> {
  let found: T | undefined;
  await until(
    what,
    async () => {
      await w.h.idle();
      found = await check();
      return found !== undefined;
    },
    30_000,
  );
  return found as T;
}

const withButton = (channel: string, thread: string, label: string) => () =>
  w.fake.thread(channel, thread).find((m) => buttonsOf(m).some((b) => b.text === label));

const click = (user: string, message: FakeMessage, label: string) => {
  const button = buttonsOf(message).find((b) => b.text === label);
  if (!button) throw new Error(`no button ${label}`);
  return w.post(
    "/slack/interactivity",
    interactivityForm(buttonClick({ team: TEAM, user, channel: message.channel, message, button })),
  );
};

describe("Slack, end to end", () => {
  it("a mention: 200 at once, progress in the thread, an approval with the exact arguments, a refused click, the starter's click, the answer", async () => {
    const emails = countEmails(w.h.engine);
    const res = await w.post("/slack/events", mention("Ev100", "U_ADA", "invite the team"));
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("");
    const progress = await waitFor("the progress message", () => w.fake.thread("C1", TS)[0]);
    expect(progress.threadTs).toBe(TS);
    // It shows the request as it moves (before the plan, what was asked; then its tasks), the same
    // message updated: once planned, the task and the assistant elected for it.
    await waitFor("the plan in the progress message", () =>
      textOf(progress).includes("Invite · _Mailer_") ? true : undefined,
    );
    const question = await waitFor("the approval", withButton("C1", TS, "Allow"));
    expect(textOf(question)).toContain('"to": "team@example.com"');
    expect(buttonsOf(question).map((b) => b.text)).toEqual(["Allow", "Deny"]);

    // Someone else in the workspace: refused, told only them, nothing answered.
    expect((await click("U_BOB", question, "Allow")).status).toBe(200);
    expect(w.fake.calls("chat.postEphemeral").at(-1)?.args).toMatchObject({ user: "U_BOB", channel: "C1" });
    expect(emails.sent).toBe(0);

    // The person who asked.
    expect((await click("U_ADA", question, "Allow")).status).toBe(200);
    const answer = await waitFor("the answer", () =>
      w.fake.thread("C1", TS).find((m) => textOf(m).includes("invited")),
    );
    expect(answer.threadTs).toBe(TS);
    expect(emails.sent).toBe(1);
    await waitFor("the question shown answered", () => {
      const q = w.fake.message("C1", question.ts);
      return q && buttonsOf(q).length === 0 && textOf(q).includes("`user_ada` answered: *Allow*")
        ? q
        : undefined;
    });
    await waitFor("the progress message updated to done", () => {
      const p = w.fake.message("C1", progress.ts);
      return p?.text.endsWith("Done") ? p : undefined;
    });
    expect(w.fake.message("C1", progress.ts)?.history.length).toBeGreaterThan(0);
    // Every call carried the workspace's bot token.
    expect(new Set(w.fake.calls().map((c) => c.token))).toEqual(
      new Set([w.settings.slack?.workspaces[TEAM]?.botToken]),
    );
  });

  it("a direct message starts a request answered in its own thread in the DM", async () => {
    const dm = eventCallback({
      team: TEAM,
      eventId: "EvDm1",
      event: {
        type: "message",
        channel_type: "im",
        user: "U_ADA",
        text: "invite the team",
        channel: "D1",
        ts: "1780000002.000100",
      },
    });
    expect((await w.post("/slack/events", dm)).status).toBe(200);
    const question = await waitFor(
      "the approval in the DM's thread",
      withButton("D1", "1780000002.000100", "Allow"),
    );
    expect(question.threadTs).toBe("1780000002.000100");
  });

  it("a retried event (X-Slack-Retry-Num) writes nothing new; a retry after a crashed first attempt completes it", async () => {
    const body = mention("Ev200", "U_ADA", "invite the team");
    const conversation = `cld:common.Tenant.acme/common.Conversation.${slackConversationName(TEAM, "C1", TS)}`;
    const messages = () => w.h.engine.deps.resources.childUrns(conversation, "common.Message");
    // The first attempt dies after the request was recorded, before the thread was subscribed.
    const subscribe = w.notify.service.subscribe.bind(w.notify.service);
    let crashes = 1;
    w.notify.service.subscribe = async (...args) => {
      if (crashes-- > 0) throw new Error("the process died here");
      return subscribe(...args);
    };
    expect((await w.post("/slack/events", body)).status).toBe(500);
    expect(await messages()).toHaveLength(1);
    expect((await w.written()).subscriptions).toBe(0);
    // Slack's retry: the same request (no second message), and now the thread is subscribed.
    const retry = await w.post("/slack/events", body, {
      "x-slack-retry-num": "1",
      "x-slack-retry-reason": "http_error",
    });
    expect(retry.status).toBe(200);
    expect(await messages()).toHaveLength(1);
    expect((await w.written()).subscriptions).toBe(1);
    await waitFor("the progress message", () => w.fake.thread("C1", TS)[0]);
    await waitFor("the approval", withButton("C1", TS, "Allow"));
    const settled = await w.written();
    const posts = w.fake.calls("chat.postMessage").length;
    expect(
      (await w.post("/slack/events", body, { "x-slack-retry-num": "2", "x-slack-retry-reason": "timeout" }))
        .status,
    ).toBe(200);
    await w.h.idle();
    expect(await w.written()).toEqual(settled);
    expect(await messages()).toHaveLength(1);
    expect(w.fake.calls("chat.postMessage")).toHaveLength(posts);
  });

  it("a follow-up in the thread continues its conversation; one by someone else is refused and writes nothing", async () => {
    await w.post("/slack/events", mention("Ev300", "U_ADA", "invite the team"));
    const question = await waitFor("the approval", withButton("C1", TS, "Allow"));
    await click("U_ADA", question, "Allow");
    await waitFor("the answer", () => w.fake.thread("C1", TS).find((m) => textOf(m).includes("invited")));
    const conversation = `cld:common.Tenant.acme/common.Conversation.${slackConversationName(TEAM, "C1", TS)}`;
    const messages = () => w.h.engine.deps.resources.childUrns(conversation, "common.Message");
    expect(await messages()).toHaveLength(1);

    const before = await w.written();
    const other = await w.post(
      "/slack/events",
      mention("Ev301", "U_BOB", "and me", { ts: "1780000000.000500", thread_ts: TS }),
    );
    expect(other.status).toBe(200);
    expect(await w.written()).toEqual(before);
    expect(String(w.fake.calls("chat.postEphemeral").at(-1)?.args.text)).toMatch(/^Refused/);

    await w.post(
      "/slack/events",
      mention("Ev302", "U_ADA", "invite them again", { ts: "1780000000.000600", thread_ts: TS }),
    );
    await waitFor("a second request in the conversation", async () =>
      (await messages()).length === 2 ? true : undefined,
    );
    await waitFor("its approval in the same thread", () =>
      w.fake.thread("C1", TS).filter((m) => buttonsOf(m).some((b) => b.text === "Allow")).length >= 1 &&
      w.fake.thread("C1", TS).filter((m) => textOf(m).includes("Allow send_email?")).length === 2
        ? true
        : undefined,
    );
  });

  it("/arbor <request> starts a thread with Arbor's first message; a follow-up there continues it", async () => {
    const res = await w.post(
      "/slack/commands",
      commandForm({ team: TEAM, channel: "C7", user: "U_ADA", text: "invite the team", triggerId: "trig.1" }),
    );
    expect(res.status).toBe(200);
    expect((await res.json()) as { response_type: string; text: string }).toMatchObject({
      response_type: "ephemeral",
      text: expect.stringMatching(/^On it/),
    });
    const head = await waitFor("the thread's head", () => w.fake.messages("C7").find((m) => !m.threadTs));
    const remembered = await waitFor("the head remembered", () =>
      threadHead(w.h.engine.deps.state, TEAM, "C7", head.ts),
    );
    await waitFor("the approval in the head's thread", withButton("C7", head.ts, "Allow"));
    // The same command delivered again starts nothing new.
    const before = await w.written();
    await w.post(
      "/slack/commands",
      commandForm({ team: TEAM, channel: "C7", user: "U_ADA", text: "invite the team", triggerId: "trig.1" }),
    );
    expect((await w.written()).resources).toBe(before.resources);

    await w.post(
      "/slack/events",
      eventCallback({
        team: TEAM,
        eventId: "Ev400",
        event: {
          type: "app_mention",
          user: "U_ADA",
          text: "<@UBOT> also the board",
          channel: "C7",
          ts: "1780000001.000100",
          thread_ts: head.ts,
        },
      }),
    );
    await waitFor("the follow-up in the command's conversation", async () =>
      (await w.h.engine.deps.resources.childUrns(remembered.conversationUrn, "common.Message")).length === 2
        ? true
        : undefined,
    );
  });

  it("/arbor watch shows a request made over the HTTP API; Slack and the HTTP API answer its questions as one person", async () => {
    const made = await fetch(`${w.server.url}/v1/messages`, {
      method: "POST",
      headers: { authorization: `Bearer ${ada.key}`, "content-type": "application/json" },
      body: JSON.stringify({ text: "invite the team", mode: "lazy" }),
    });
    expect(made.status).toBe(202);
    const { rootTaskId } = (await made.json()) as { rootTaskId: string };
    await w.h.idle();

    // Someone who may not read it cannot watch it.
    const refused = await w.post(
      "/slack/commands",
      commandForm({ team: TEAM, channel: "C2", user: "U_BOB", text: `watch ${rootTaskId}` }),
    );
    expect(((await refused.json()) as { text: string }).text).toMatch(/^Refused/);
    expect((await w.written()).subscriptions).toBe(0);

    const watch = await w.post(
      "/slack/commands",
      commandForm({ team: TEAM, channel: "C2", user: "U_ADA", text: `watch ${rootTaskId}` }),
    );
    expect(((await watch.json()) as { text: string }).text).toMatch(/^Following/);
    const head = await waitFor("the head in C2", () => w.fake.messages("C2").find((m) => !m.threadTs));
    const approval = await waitFor("the plan's approval in Slack", withButton("C2", head.ts, "Run it"));
    await click("U_ADA", approval, "Run it");

    // The risky call's approval, shown in Slack, answered over the HTTP API by the same person.
    const risky = await waitFor("the risky call's question in Slack", withButton("C2", head.ts, "Allow"));
    const listed = (await (
      await fetch(`${w.server.url}/v1/tasks/${encodeURIComponent(rootTaskId)}/interactions`, {
        headers: { authorization: `Bearer ${ada.key}` },
      })
    ).json()) as { interactions: { urn: string }[] };
    const urn = listed.interactions[0]?.urn as string;
    expect(buttonsOf(risky)[0]?.value).toContain(urn);
    const answered = await fetch(`${w.server.url}/v1/interactions/${encodeURIComponent(urn)}/answer`, {
      method: "POST",
      headers: { authorization: `Bearer ${ada.key}`, "content-type": "application/json" },
      body: JSON.stringify({ selectedOptionId: "approve" }),
    });
    expect(answered.status).toBe(204);
    await waitFor("the Slack question shown answered", () => {
      const q = w.fake.message("C2", risky.ts);
      return q && buttonsOf(q).length === 0 && textOf(q).includes("`user_ada` answered") ? q : undefined;
    });
    await waitFor("the answer in the thread", () =>
      w.fake.thread("C2", head.ts).find((m) => textOf(m).includes("invited")),
    );
  });
});
