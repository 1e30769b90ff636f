import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { teamsSurface } from "../../shared/channels/chat/teams/surface.ts";
import { ChatSendError, type TeamsThread, type ThreadSnapshot } from "../../shared/notify/chat/types.ts";
import { createGuardedFetch } from "../../shared/outbound/guard.ts";
import { outboundPolicy } from "../../shared/outbound/policy.ts";
import { type FakeTeams, startFakeTeams } from "../peers/fake-teams.ts";
import { LOOPBACK_ALLOWED } from "./tool-world.ts";

/**
 * The Teams surface against the fake Bot Connector: Arbor's own token (client credentials, kept,
 * fetched again once on a 401), activities posted and replaced, the cards they carry, and what a
 * failure means for the delivery (retry or dead).
 */
let teams: FakeTeams;
let thread: TeamsThread;
const context = {
  rootTaskUrn: "cld:common.Tenant.acme/plan.Task.r",
  conversationUrn: "cld:common.Tenant.acme/common.Conversation.c",
};

const snapshot = (over: Partial<ThreadSnapshot> = {}): ThreadSnapshot => ({
  rootTaskUrn: context.rootTaskUrn,
  conversationUrn: context.conversationUrn,
  title: "Invite",
  state: "working",
  tasks: [
    { taskId: "t1", depth: 0, title: "Invite", status: "in_progress" },
    { taskId: "t2", depth: 1, title: "Send the invitations", status: "awaiting_user", assistant: "Mailer" },
  ],
  taskCount: 2,
  truncated: false,
  questions: [],
  at: "2026-06-01T09:00:00.000Z",
  ...over,
});

const settings = () => async () => ({
  teams: teams.settings({ tenants: { t: { tenant: "acme", users: {}, admins: [], defaultRoles: [] } } }),
});
const surface = () =>
  teamsSurface(settings(), { fetch: createGuardedFetch(outboundPolicy(LOOPBACK_ALLOWED)) });

beforeAll(async () => {
  teams = await startFakeTeams();
  thread = {
    kind: "teams",
    id: "teams_x",
    tenant: "acme",
    serviceUrl: teams.serviceUrl,
    conversationId: "19:abc@thread.tacv2;messageid=1700000000000",
    aadTenantId: "t",
  };
});
afterAll(() => teams.close());
beforeEach(() => {
  teams.activities.length = 0;
  teams.plan.length = 0;
});

type Attachment = { contentType?: string; content: Record<string, unknown> };
const card = (body: Record<string, unknown>): Attachment =>
  (body.attachments as Attachment[] | undefined)?.[0] ?? { content: {} };

describe("the Teams surface", () => {
  it("posts a progress card with Arbor's token and replaces it as the tree moves", async () => {
    const s = surface();
    const id = await s.post(thread, s.render.progress(snapshot()), context);
    expect(id).toMatch(/^act-/);
    await s.update(thread, id, s.render.progress(snapshot({ state: "completed" })), context);
    const [post, put] = teams.activities;
    expect(post?.method).toBe("POST");
    expect(post?.conversationId).toBe(thread.conversationId);
    expect(post?.authorization).toBe("Bearer bot-token-1");
    expect(card(post?.body ?? {}).contentType).toBe("application/vnd.microsoft.card.adaptive");
    const shown = JSON.stringify(card(post?.body ?? {}).content);
    expect(shown).toContain("Send the invitations");
    expect(shown).toContain("Mailer");
    expect(shown).toContain("needs an answer");
    expect(put).toMatchObject({ method: "PUT", activityId: id, authorization: "Bearer bot-token-1" });
    expect(JSON.stringify(card(put?.body ?? {}).content)).toContain("Done");
    // One token for both calls: it is kept until shortly before it expires.
    expect(teams.tokensIssued).toBe(1);
  });

  it("renders a risky call's question with its exact arguments, buttons that answer it and a refresh", async () => {
    const s = surface();
    const q = {
      urn: "cld:common.Tenant.acme/plan.Task.r/uip.Interaction.q",
      kind: "confirm" as const,
      purpose: "confirm_risky_action" as const,
      display: {
        title: "Allow send_email?",
        content: { to: "team@example.com", subject: "Hi" },
        contentKind: "Json" as const,
      },
      options: [
        { id: "approve", label: "Allow", style: "primary" as const },
        { id: "deny", label: "Deny", style: "danger" as const },
      ],
      binding: { tool: "send_email", argumentsHash: "h" },
    };
    const c = card(s.render.question(q, snapshot()).payload).content as Record<string, unknown>;
    const actions = c.actions as { type: string; verb: string; data: Record<string, unknown> }[];
    expect(actions.map((a) => [a.type, a.verb, a.data.option])).toEqual([
      ["Action.Execute", "arbor.answer", "approve"],
      ["Action.Execute", "arbor.answer", "deny"],
    ]);
    expect(actions[0]?.data.interaction).toBe(q.urn);
    // The exact arguments, as they will be called, in a monospace block.
    const shownArgs = JSON.stringify(c.body).includes(
      JSON.stringify(JSON.stringify({ to: "team@example.com", subject: "Hi" }, null, 2)).slice(1, -1),
    );
    expect(shownArgs).toBe(true);
    expect(JSON.stringify(c.body)).toContain("send_email");
    expect(c.refresh).toMatchObject({
      action: { type: "Action.Execute", verb: "arbor.refresh", data: { interaction: q.urn } },
    });
    // An input question: a required text input with the question's regex.
    const input = card(
      s.render.question(
        {
          ...q,
          kind: "input",
          purpose: "request_info",
          options: undefined as never,
          validation: { regex: "^[0-9]+$", required: true },
        },
        snapshot(),
      ).payload,
    ).content as { body: { type: string; regex?: string; isRequired?: boolean }[] };
    expect(input.body.find((b) => b.type === "Input.Text")).toMatchObject({
      regex: "^[0-9]+$",
      isRequired: true,
    });
    // Answered: who answered what, and no actions left.
    const answered = card(
      s.render.question({ ...q, answered: { by: "user_ada", summary: "Allow" } }, snapshot()).payload,
    ).content as Record<string, unknown>;
    expect(answered.actions).toBeUndefined();
    expect(JSON.stringify(answered.body)).toContain("Answered by **user_ada**: Allow");
  });

  it("cuts a long answer and says where the whole of it is", () => {
    const s = surface();
    const long = "x".repeat(40_000);
    const c = JSON.stringify(
      card(s.render.answer(snapshot({ state: "completed", answer: long })).payload).content,
    );
    expect(c).toContain(`cut at 16000 of 40000 characters`);
    expect(c).toContain(`GET /v1/tasks/${context.rootTaskUrn}`);
  });

  it("gets a new token once when the connector answers 401", async () => {
    const s = surface();
    await s.post(thread, s.render.progress(snapshot()), context);
    teams.revokeTokens();
    const issued = teams.tokensIssued;
    const id = await s.post(thread, s.render.progress(snapshot()), context);
    expect(id).toMatch(/^act-/);
    expect(teams.tokensIssued).toBe(issued + 1);
    expect(teams.activities.map((a) => a.answered)).toEqual([200, 401, 200]);
  });

  it("makes 429 and 5xx retryable (after Retry-After) and 404 final", async () => {
    const s = surface();
    const render = s.render.progress(snapshot());
    teams.plan.push(429);
    const throttled = await s.post(thread, render, context).catch((e: unknown) => e);
    expect(throttled).toBeInstanceOf(ChatSendError);
    expect(throttled).toMatchObject({ retryable: true, retryAfterMs: 1000 });
    teams.plan.push(500);
    await expect(s.update(thread, "act-1", render, context)).rejects.toMatchObject({ retryable: true });
    teams.plan.push(404);
    await expect(s.post(thread, render, context)).rejects.toMatchObject({ retryable: false });
    teams.plan.push(403);
    await expect(s.post(thread, render, context)).rejects.toMatchObject({ retryable: false });
  });

  it("replies to a channel post's activity when the thread names one", async () => {
    const s = surface();
    const channelPost = { ...thread, conversationId: "19:general@thread.tacv2", replyToId: "1700000000001" };
    await s.post(channelPost, s.render.progress(snapshot()), context);
    expect(teams.activities[0]).toMatchObject({
      method: "POST",
      conversationId: "19:general@thread.tacv2",
      activityId: "1700000000001",
      body: { replyToId: "1700000000001", type: "message" },
    });
  });

  it("sends nothing to a service URL that is not allowed (checked again before every call)", async () => {
    const s = surface();
    const elsewhere = { ...thread, serviceUrl: `${teams.base}/elsewhere/` };
    await expect(s.post(elsewhere, s.render.progress(snapshot()), context)).rejects.toMatchObject({
      retryable: false,
      message: expect.stringMatching(/not an allowed one/),
    });
    expect(teams.activities).toEqual([]);
  });
});
