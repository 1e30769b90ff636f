import { describe, expect, it } from "vitest";
import {
  type Activity,
  messageText,
  sameServiceUrl,
  serviceUrlAllowed,
  teamsConversationName,
} from "../../../../../shared/channels/chat/teams/activity.ts";
import { personOf } from "../../../../../shared/channels/chat/teams/invoke.ts";

/** What the Teams channel reads of an activity: the text as written, the service URL, the person. */
const activity = (text: string): Activity => ({
  type: "message",
  serviceUrl: "https://smba.trafficmanager.net/emea/",
  from: { id: "29:x" },
  conversation: { id: "a:1" },
  text,
});

describe("Teams activities", () => {
  it("cuts the bot's mention and the HTML Teams wraps text in", () => {
    expect(messageText(activity("<at>Arbor</at> plan the offsite"))).toBe("plan the offsite");
    expect(messageText(activity("<p><at>Arbor</at>&nbsp;a &amp; b &lt;c&gt;</p><p>second</p>"))).toBe(
      "a & b <c>\nsecond",
    );
    expect(messageText(activity("<at>Arbor</at>"))).toBe("");
  });

  it("allows only service URLs under an allowed prefix, compared as URLs", () => {
    const allowed = ["https://smba.trafficmanager.net/"];
    expect(serviceUrlAllowed("https://smba.trafficmanager.net/emea/", allowed)).toBe(true);
    expect(serviceUrlAllowed("https://smba.trafficmanager.net/amer", allowed)).toBe(true);
    for (const bad of [
      "https://smba.trafficmanager.net.evil.example/emea/",
      "https://evil.example/smba.trafficmanager.net/",
      "http://smba.trafficmanager.net/emea/",
      "https://smba.trafficmanager.net:8443/emea/",
      "https://user:pw@smba.trafficmanager.net/emea/",
      "https://smba.trafficmanager.net/emea/?x=1",
      "not a url",
    ])
      expect(serviceUrlAllowed(bad, allowed), bad).toBe(false);
    expect(
      serviceUrlAllowed("https://smba.trafficmanager.net/emeax/", ["https://smba.trafficmanager.net/emea"]),
    ).toBe(false);
    expect(
      sameServiceUrl("https://smba.trafficmanager.net/emea", "https://smba.trafficmanager.net/emea/"),
    ).toBe(true);
  });

  it("names one Arbor conversation per Teams conversation, as a conversation name may be", () => {
    const a = teamsConversationName("aad", "19:abc@thread.tacv2;messageid=1");
    expect(a).toMatch(/^[A-Za-z0-9_-]{1,100}$/);
    expect(teamsConversationName("aad", "19:abc@thread.tacv2;messageid=1")).toBe(a);
    expect(teamsConversationName("aad", "19:abc@thread.tacv2;messageid=2")).not.toBe(a);
    expect(teamsConversationName("other", "19:abc@thread.tacv2;messageid=1")).not.toBe(a);
  });

  it("maps a person to their Arbor actor, an admin to the admin role, anyone else to user_teams.<id>", () => {
    const tenant = {
      tenant: "acme",
      users: { "aaa-1": "user_ada" },
      admins: ["bbb-2"],
      defaultRoles: ["member"],
    };
    expect(personOf(tenant, "aaa-1")).toEqual({
      actor: { id: "user_ada", kind: "human", capabilities: ["member"] },
      tenant: "acme",
      roles: ["member"],
    });
    expect(personOf(tenant, "bbb-2")?.roles).toEqual(["member", "admin"]);
    expect(personOf(tenant, "ccc-3")?.actor.id).toBe("user_teams.ccc-3");
    expect(personOf(tenant, undefined)).toBeUndefined();
    expect(personOf(tenant, "../../x")).toBeUndefined();
  });
});
