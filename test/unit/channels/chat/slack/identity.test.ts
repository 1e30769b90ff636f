import { describe, expect, it } from "vitest";
import {
  personOf,
  rootTaskOf,
  slackConversationName,
  slackThread,
  workspaceOf,
} from "../../../../../shared/channels/chat/slack/identity.ts";
import type { SlackWorkspace } from "../../../../../shared/notify/chat/types.ts";

/** Who a Slack request is in Arbor, and the names derived from where it was said. */
const ws: SlackWorkspace = {
  tenant: "acme",
  botToken: "xoxb-test-token",
  users: { U1: "user_ada", "T2.U9": "user_bea" },
  admins: ["U7", "user_bea"],
  defaultRoles: ["member"],
};

describe("Slack identity", () => {
  it("maps a workspace to its tenant and refuses any other, inherited names included", () => {
    const settings = {
      signingSecret: "secret-123",
      apiUrl: "https://slack.com/api/",
      workspaces: { T1: ws },
    };
    expect(workspaceOf(settings, "T1")?.tenant).toBe("acme");
    expect(workspaceOf(settings, "T2")).toBeUndefined();
    expect(workspaceOf(settings, "constructor")).toBeUndefined();
    expect(workspaceOf(undefined, "T1")).toBeUndefined();
  });

  it("maps people: `users` to their Arbor id, others to user_slack.<team>.<user>; admins get the admin role", () => {
    expect(personOf("T1", "U1", ws)).toEqual({
      actor: { id: "user_ada", kind: "human", capabilities: ["member"] },
      caller: { tenant: "acme", roles: ["member"] },
    });
    expect(personOf("T1", "U5", ws).actor.id).toBe("user_slack.T1.U5");
    expect(personOf("T1", "U7", ws).caller.roles).toEqual(["member", "admin"]);
    // A team-qualified mapping, and an admin named by their Arbor id.
    expect(personOf("T2", "U9", ws)).toMatchObject({
      actor: { id: "user_bea" },
      caller: { roles: ["member", "admin"] },
    });
    expect(personOf("T1", "constructor", ws).actor.id).toBe("user_slack.T1.constructor");
  });

  it("names one conversation per thread and one subscription per request and thread", () => {
    const name = slackConversationName("T1", "C1", "1.2");
    expect(name).toMatch(/^slack_[A-Za-z0-9_-]{32}$/);
    expect(slackConversationName("T1", "C1", "1.2")).toBe(name);
    expect(slackConversationName("T1", "C2", "1.2")).not.toBe(name);
    const root = "cld:common.Tenant.acme/common.Conversation.c/common.Message.m/plan.Task.request";
    expect(slackThread("acme", "T1", "C1", undefined, root)).toMatchObject({
      kind: "slack",
      tenant: "acme",
      channel: "C1",
    });
    expect(slackThread("acme", "T1", "C1", undefined, root).threadTs).toBeUndefined();
    expect(slackThread("acme", "T1", "C1", "1.2", root).id).not.toBe(
      slackThread("acme", "T1", "C1", undefined, root).id,
    );
    expect(rootTaskOf(`${root}/plan.Task.sub`)).toBe(root);
    expect(rootTaskOf("cld:common.Tenant.acme/common.Conversation.c")).toBeUndefined();
  });
});
