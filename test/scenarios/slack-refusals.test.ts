import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signSlackBody } from "../../shared/channels/chat/slack/verify.ts";
import { commandForm, eventCallback, interactivityForm } from "../peers/fake-slack.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";
import { type SlackWorld, startSlackWorld, TEAM } from "./slack-world.ts";

/**
 * Requests that are not Slack's, or not for a workspace Arbor serves, are refused before anything
 * is parsed or written: a bad signature, a timestamp 301 s old, missing headers, an unknown
 * workspace, a body too large or nested too deep. Each is checked against what is stored.
 */
let w: SlackWorld;
beforeAll(async () => {
  w = await startSlackWorld({
    script: (r) =>
      isPlan(r)
        ? planOf({ name: "Answer", purpose: "Answer" })
        : isEvaluation(r)
          ? pass()
          : { content: "ok" },
    assistants: GENERALIST,
  });
});
afterAll(async () => w?.close());

const mention = (eventId: string, team = TEAM) =>
  eventCallback({
    team,
    eventId,
    event: {
      type: "app_mention",
      user: "U_ADA",
      text: "<@UBOT> plan the offsite",
      channel: "C1",
      ts: "1780000000.000100",
    },
  });

describe("Slack requests that are refused", () => {
  it("refuses bad signatures, old or future timestamps and missing headers with 401, writing nothing", async () => {
    const before = await w.written();
    const body = mention("Ev1");
    const wrongSecret = signSlackBody("not-the-secret", body, Math.floor(w.h.now / 1000));
    const cases: [string, Promise<Response>][] = [
      [
        "bad signature",
        w.post("/slack/events", body, { "x-slack-signature": wrongSecret["x-slack-signature"] }),
      ],
      ["301 s old", w.post("/slack/events", body, {}, -301)],
      ["301 s ahead", w.post("/slack/events", body, {}, 301)],
      ["missing headers", fetch(`${w.server.url}/slack/events`, { method: "POST", body })],
      [
        "garbled timestamp",
        w.post("/slack/commands", commandForm({ team: TEAM, channel: "C1", user: "U_ADA", text: "hi" }), {
          "x-slack-request-timestamp": "yesterday",
        }),
      ],
      [
        "bad interactivity signature",
        w.post("/slack/interactivity", interactivityForm({ type: "block_actions" }), {
          "x-slack-signature": `v0=${"0".repeat(64)}`,
        }),
      ],
    ];
    for (const [what, pending] of cases) {
      const res = await pending;
      expect(res.status, what).toBe(401);
      const { error } = (await res.json()) as { error: { code: string; message: string } };
      expect(error.code, what).toBe("UNAUTHENTICATED");
      expect(error.message.length, what).toBeGreaterThan(20);
    }
    expect((await (await w.post("/slack/events", body, {}, -301)).json()) as unknown).toMatchObject({
      error: { message: expect.stringMatching(/301 s from our clock/) },
    });
    expect(await w.written()).toEqual(before);
    expect(w.fake.calls()).toHaveLength(0);
  });

  it("answers url_verification with its challenge once the signature holds", async () => {
    const body = JSON.stringify({
      token: "x",
      challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
      type: "url_verification",
    });
    const res = await w.post("/slack/events", body);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" });
    const forged = await w.post("/slack/events", body, {}, -400);
    expect(forged.status).toBe(401);
  });

  it("refuses a workspace the settings do not map to a tenant, writing nothing", async () => {
    const before = await w.written();
    const res = await w.post("/slack/events", mention("Ev2", "T999"));
    expect(res.status).toBe(403);
    expect(res.headers.get("x-slack-no-retry")).toBe("1");
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      /T999 is not connected/,
    );
    const cmd = await w.post(
      "/slack/commands",
      commandForm({ team: "T999", channel: "C1", user: "U_ADA", text: "plan" }),
    );
    expect(cmd.status).toBe(200);
    expect(((await cmd.json()) as { text: string }).text).toMatch(/not connected to Arbor/);
    const click = await w.post(
      "/slack/interactivity",
      interactivityForm({ type: "block_actions", team: { id: "T999" }, user: { id: "U_ADA" }, actions: [] }),
    );
    expect(click.status).toBe(403);
    expect(await w.written()).toEqual(before);
    expect(w.fake.calls()).toHaveLength(0);
  });

  it("refuses a body over 256 KB (413) and JSON nested deeper than any Slack payload (400), writing nothing", async () => {
    const before = await w.written();
    const big = JSON.stringify({ type: "event_callback", team_id: TEAM, pad: "x".repeat(300 * 1024) });
    expect((await w.post("/slack/events", big)).status).toBe(413);
    const deep = `{"type":"event_callback","team_id":"${TEAM}","x":${"[".repeat(500)}${"]".repeat(500)}}`;
    const res = await w.post("/slack/events", deep);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/nests deeper/);
    const deepPayload = interactivityForm({
      type: "block_actions",
      team: { id: TEAM },
      user: { id: "U_ADA" },
      x: JSON.parse(`${"[".repeat(100)}${"]".repeat(100)}`),
    });
    expect((await w.post("/slack/interactivity", deepPayload)).status).toBe(400);
    expect(await w.written()).toEqual(before);
  });

  it("ignores bots, our own messages, edits and channel messages that do not mention the app", async () => {
    const before = await w.written();
    const events = [
      {
        type: "message",
        channel_type: "im",
        user: "U_ADA",
        bot_id: "B1",
        text: "a bot",
        channel: "D1",
        ts: "1.1",
      },
      { type: "message", channel_type: "im", user: "UBOT", text: "ourselves", channel: "D1", ts: "1.2" },
      {
        type: "message",
        channel_type: "im",
        subtype: "message_changed",
        user: "U_ADA",
        text: "edit",
        channel: "D1",
        ts: "1.3",
      },
      { type: "message", channel_type: "channel", user: "U_ADA", text: "chatter", channel: "C1", ts: "1.4" },
    ];
    for (const [i, event] of events.entries()) {
      const res = await w.post(
        "/slack/events",
        eventCallback({ team: TEAM, eventId: `EvIgnored${i}`, event }),
      );
      expect(res.status).toBe(200);
    }
    expect(await w.written()).toEqual(before);
    expect(w.fake.calls()).toHaveLength(0);
  });

  it("a workspace over its rate is told so, only the person sees it, and nothing is written", async () => {
    const limited = await startSlackWorld({
      script: () => ({ content: "ok" }),
      assistants: GENERALIST,
      limits: { perTenant: { burst: 0, perSecond: 0.1 } },
    });
    try {
      const before = await limited.written();
      expect((await limited.post("/slack/events", mention("Ev9"))).status).toBe(200);
      const [told] = limited.fake.calls("chat.postEphemeral");
      expect(told?.args).toMatchObject({ user: "U_ADA", channel: "C1" });
      expect(String(told?.args.text)).toMatch(/Too many requests from this workspace: try again in 10 s/);
      const cmd = await limited.post(
        "/slack/commands",
        commandForm({ team: TEAM, channel: "C1", user: "U_ADA", text: "plan" }),
      );
      expect(((await cmd.json()) as { text: string }).text).toMatch(/Too many requests/);
      expect(await limited.written()).toEqual(before);
    } finally {
      await limited.close();
    }
  });

  it("a mention with nothing to do, or `help`, is answered with the help, only to that person, writing nothing", async () => {
    const before = await w.written();
    const calls = w.fake.calls("chat.postEphemeral").length;
    const bare = eventCallback({
      team: TEAM,
      eventId: "EvHelp1",
      event: { type: "app_mention", user: "U_ADA", text: "<@UBOT>", channel: "C1", ts: "1780000000.000900" },
    });
    expect((await w.post("/slack/events", bare)).status).toBe(200);
    const told = w.fake.calls("chat.postEphemeral").slice(calls);
    expect(told).toHaveLength(1);
    expect(String(told[0]?.args.text)).toContain("/arbor watch <task URN>");
    const help = await w.post(
      "/slack/commands",
      commandForm({ team: TEAM, channel: "C1", user: "U_ADA", text: "help" }),
    );
    expect(((await help.json()) as { text: string }).text).toContain("/arbor <request>");
    expect(await w.written()).toEqual(before);
  });

  it("someone of another organisation in a shared channel is told no, and nothing is written", async () => {
    const before = await w.written();
    const calls = w.fake.calls("chat.postEphemeral").length;
    const foreign = eventCallback({
      team: TEAM,
      eventId: "EvForeign1",
      event: {
        type: "app_mention",
        user: "U_EXT",
        user_team: "T_OTHER",
        text: "<@UBOT> plan",
        channel: "C1",
        ts: "1780000000.000950",
      },
    });
    expect((await w.post("/slack/events", foreign)).status).toBe(200);
    expect(String(w.fake.calls("chat.postEphemeral").slice(calls)[0]?.args.text)).toMatch(
      /members of this workspace only/,
    );
    expect(await w.written()).toEqual(before);
  });
});
