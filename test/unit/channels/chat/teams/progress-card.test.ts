import { describe, expect, it } from "vitest";
import { progressCard } from "../../../../../shared/channels/chat/teams/cards.ts";
import type { ThreadSnapshot } from "../../../../../shared/notify/chat/types.ts";

/** The progress card of a Teams thread: its state line says the request's tokens and cost. */
const ROOT = "cld:common.Tenant.acme/common.Conversation.c1/common.Message.m1/plan.Task.request";
const snapshot = (usage?: ThreadSnapshot["usage"]): ThreadSnapshot => ({
  rootTaskUrn: ROOT,
  conversationUrn: "cld:common.Tenant.acme/common.Conversation.c1",
  title: "Plan the offsite",
  state: "working",
  tasks: [{ taskId: ROOT, depth: 0, title: "Plan the offsite", status: "in_progress" }],
  taskCount: 1,
  truncated: false,
  questions: [],
  at: "2026-11-28T00:00:00.000Z",
  ...(usage ? { usage } : {}),
});

describe("Teams progress card", () => {
  it("shows the tokens and cost beside the state, and an unknown cost as unknown", () => {
    expect(
      JSON.stringify(progressCard(snapshot({ tokens: 12_345, costUsd: 1.256, unpricedCalls: 0 }))),
    ).toContain("1 task · 12,345 tokens · $1.26");
    expect(JSON.stringify(progressCard(snapshot({ tokens: 9, costUsd: 0.5, unpricedCalls: 1 })))).toContain(
      "9 tokens · $0.50 + unknown",
    );
    expect(JSON.stringify(progressCard(snapshot()))).not.toContain("tokens");
  });
});
