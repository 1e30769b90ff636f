import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SqliteStateStore } from "../../shared/adapters/local/sqlite-state-store.ts";
import { slackSurface } from "../../shared/channels/chat/slack/surface.ts";
import { threadHead } from "../../shared/channels/chat/slack/thread-heads.ts";
import {
  ChatSendError,
  type ChatSettings,
  type SlackThread,
  type ThreadSnapshot,
} from "../../shared/notify/chat/types.ts";
import { type FakeSlack, startFakeSlack } from "../peers/fake-slack.ts";

/**
 * The Slack surface with the real @slack/web-api WebClient against the fake Slack API: posts in
 * the thread, updates, remembers the head of a thread it starts, and maps Slack's failures to
 * retry or dead (ChatSendError) without ever showing the token.
 */
const TOKEN = "xoxb-test-token-0001";
const ROOT = "cld:common.Tenant.acme/common.Conversation.c1/common.Message.m1/plan.Task.request";
const CONV = "cld:common.Tenant.acme/common.Conversation.c1";
const snapshot: ThreadSnapshot = {
  rootTaskUrn: ROOT,
  conversationUrn: CONV,
  title: "Plan the offsite",
  state: "working",
  tasks: [{ taskId: ROOT, depth: 0, title: "Plan the offsite", status: "in_progress" }],
  taskCount: 1,
  truncated: false,
  questions: [],
  at: "2026-06-01T09:00:00.000Z",
};
const thread: SlackThread = {
  kind: "slack",
  id: "s1",
  tenant: "acme",
  team: "T1",
  channel: "C1",
  threadTs: "1700.0001",
};
const context = { rootTaskUrn: ROOT, conversationUrn: CONV };

let fake: FakeSlack;
let state: SqliteStateStore;
let settings: ChatSettings;
beforeEach(async () => {
  fake = await startFakeSlack({ tokens: { [TOKEN]: "T1" } });
  state = new SqliteStateStore({ path: ":memory:" });
  settings = {
    slack: {
      signingSecret: "signing-secret-1",
      apiUrl: fake.apiUrl,
      workspaces: { T1: { tenant: "acme", botToken: TOKEN, users: {}, admins: [], defaultRoles: [] } },
    },
  };
});
afterEach(async () => {
  await fake.close();
  await state.close();
});

const withWorkspaces = (workspaces: NonNullable<ChatSettings["slack"]>["workspaces"]): ChatSettings => ({
  slack: { signingSecret: "signing-secret-1", apiUrl: fake.apiUrl, workspaces },
});
const surface = () => slackSurface(async () => settings, { state, timeoutMs: 5000 });

describe("the Slack surface", () => {
  it("posts in the thread with the bot token, and updates what it posted", async () => {
    const s = surface();
    const ts = await s.post(thread, s.render.progress(snapshot), context);
    const [call] = fake.calls("chat.postMessage");
    expect(call?.token).toBe(TOKEN);
    expect(call?.args).toMatchObject({
      channel: "C1",
      thread_ts: "1700.0001",
      text: "Plan the offsite: Working",
    });
    await s.update(thread, ts, s.render.progress({ ...snapshot, state: "completed" }), context);
    const m = fake.message("C1", ts);
    expect(m?.text).toBe("Plan the offsite: Done");
    expect(m?.history).toHaveLength(1);
    // Not a thread Arbor started: no head remembered.
    expect(await threadHead(state, "T1", "C1", ts)).toBeUndefined();
  });

  it("a post that starts a thread (a slash command's request) is remembered as its head; later posts go in it", async () => {
    const s = surface();
    const channelOnly: SlackThread = { kind: "slack", id: "s2", tenant: "acme", team: "T1", channel: "C9" };
    const head = await s.post(channelOnly, s.render.progress(snapshot), context);
    expect(fake.calls("chat.postMessage")[0]?.args.thread_ts).toBeUndefined();
    expect(await threadHead(state, "T1", "C9", head)).toEqual({
      tenant: "acme",
      conversationUrn: CONV,
      rootTaskUrn: ROOT,
    });
    await s.post(channelOnly, s.render.answer({ ...snapshot, state: "completed", answer: "done" }), {
      ...context,
      threadHead: head,
    });
    expect(fake.calls("chat.postMessage")[1]?.args.thread_ts).toBe(head);
    expect(fake.thread("C9", head)).toHaveLength(2);
  });

  it("maps Slack's failures: rate limits and 5xx retryable (with Retry-After), a lost channel or token dead", async () => {
    const s = surface();
    const post = () => s.post(thread, s.render.progress(snapshot), context);
    const failure = async () => {
      try {
        await post();
      } catch (e) {
        return e as ChatSendError;
      }
      throw new Error("expected the post to fail");
    };
    fake.fail("chat.postMessage", { error: "ratelimited", retryAfter: 7 });
    const limited = await failure();
    expect(limited).toBeInstanceOf(ChatSendError);
    expect(limited).toMatchObject({ retryable: true, retryAfterMs: 7000 });
    fake.fail("chat.postMessage", { status: 503 });
    expect(await failure()).toMatchObject({ retryable: true });
    fake.fail("chat.postMessage", { reset: true });
    expect(await failure()).toMatchObject({ retryable: true });
    for (const error of ["channel_not_found", "not_in_channel", "account_inactive", "invalid_auth"]) {
      fake.fail("chat.postMessage", { error });
      const e = await failure();
      expect(e).toMatchObject({ retryable: false });
      expect(e.message).toContain(error);
      expect(e.message).not.toContain(TOKEN);
    }
    // A token Slack does not know (revoked, rotated): dead, and the token is not in the message.
    settings = withWorkspaces({
      T1: { tenant: "acme", botToken: "xoxb-revoked-token-9", users: {}, admins: [], defaultRoles: [] },
    });
    const revoked = await failure();
    expect(revoked).toMatchObject({ retryable: false });
    expect(revoked.message).not.toContain("xoxb-");
    // A workspace taken out of the settings: tried again (a settings file being replaced, a secret
    // mid-rotation); one put back is posted to, one left out ends dead when the retries run out.
    settings = withWorkspaces({});
    expect(await failure()).toMatchObject({ retryable: true });
    // Every failing call reached the fake but the last (no workspace: no call at all).
    expect(fake.calls("chat.postMessage")).toHaveLength(8);
  });
});
