import { describe, expect, it } from "vitest";
import {
  ACTION_OPEN,
  ACTION_OPTION,
  answerBlocks,
  MAX_BLOCKS,
  mrkdwn,
  parseOpenValue,
  parseOptionValue,
  progressBlocks,
  questionBlocks,
  SECTION_CHARS,
} from "../../../../../shared/channels/chat/slack/blocks.ts";
import type { ThreadQuestion, ThreadSnapshot } from "../../../../../shared/notify/chat/types.ts";

/** Block Kit as the thread shows it, within Slack's limits. */
const ROOT = "cld:common.Tenant.acme/common.Conversation.c1/common.Message.m1/plan.Task.request";
const snapshot = (over: Partial<ThreadSnapshot> = {}): ThreadSnapshot => ({
  rootTaskUrn: ROOT,
  conversationUrn: "cld:common.Tenant.acme/common.Conversation.c1",
  title: "Plan the offsite",
  state: "working",
  tasks: [
    { taskId: ROOT, depth: 0, title: "Plan the offsite", status: "in_progress" },
    {
      taskId: `${ROOT}/plan.Task.a`,
      depth: 1,
      title: "Book <venue> & food",
      status: "done",
      assistant: "Planner",
    },
  ],
  taskCount: 2,
  truncated: false,
  questions: [],
  at: "2026-06-01T09:00:00.000Z",
  ...over,
});
type Block = {
  type: string;
  text?: { text: string };
  elements?: { action_id?: string; value?: string; text?: { text: string } }[];
};
const blocksOf = (r: { payload: Record<string, unknown> }) => r.payload.blocks as Block[];
const sections = (r: { payload: Record<string, unknown> }) =>
  blocksOf(r)
    .filter((b) => b.type === "section")
    .map((b) => b.text?.text ?? "");
const buttons = (r: { payload: Record<string, unknown> }) =>
  blocksOf(r).flatMap((b) => (b.type === "actions" ? (b.elements ?? []) : []));

const risky: ThreadQuestion = {
  urn: `${ROOT}/plan.Task.a/uip.Interaction.call-1`,
  kind: "confirm",
  purpose: "confirm_risky_action",
  display: {
    title: "Allow send_email?",
    description: "The assistant wants to run this tool with exactly these arguments.",
    content: { to: "team@example.com", subject: "Offsite", body: "See you there" },
    contentKind: "Json",
  },
  options: [
    { id: "approve", label: "Allow", style: "primary" },
    { id: "deny", label: "Deny", style: "danger" },
  ],
  binding: { tool: "send_email", argumentsHash: "abcdef0123456789abcdef" },
};

describe("Slack blocks", () => {
  it("progress: the title, the state, the tree indented with statuses and assistants, escaped", () => {
    const r = progressBlocks(snapshot());
    const text = sections(r).join("\n");
    expect(text).toContain("*Plan the offsite*");
    expect(text).toContain(":large_blue_circle: Plan the offsite");
    expect(text).toContain("\u2003:white_check_mark: Book &lt;venue&gt; &amp; food · _Planner_");
    expect(r.text).toBe("Plan the offsite: Working");
  });

  it("progress says the request's tokens and cost, and an unknown cost as unknown", () => {
    const shown = (usage: ThreadSnapshot["usage"]) =>
      JSON.stringify(progressBlocks(snapshot(usage ? { usage } : {})).payload);
    expect(shown({ tokens: 3381, costUsd: 0.004213, unpricedCalls: 0 })).toContain("3,381 tokens · $0.0042");
    expect(shown({ tokens: 120, costUsd: 0, unpricedCalls: 2 })).toContain("120 tokens · cost unknown");
    expect(shown(undefined)).not.toContain("tokens");
  });

  it("progress of a huge tree stays within 50 blocks of at most 3000 characters, and says what is left out", () => {
    const tasks = Array.from({ length: 3000 }, (_, i) => ({
      taskId: `${ROOT}/plan.Task.t${i}`,
      depth: 1 + (i % 3),
      title: `task number ${i} ${"x".repeat(40)}`,
      status: "open" as const,
    }));
    const r = progressBlocks(snapshot({ tasks, taskCount: 5000, truncated: true }));
    expect(blocksOf(r).length).toBeLessThanOrEqual(MAX_BLOCKS);
    for (const s of sections(r)) expect(s.length).toBeLessThanOrEqual(SECTION_CHARS);
    expect(sections(r).join("\n")).toMatch(/…and \d+ more tasks/);
  });

  it("a risky call's question shows its exact arguments and Allow/Deny buttons carrying the URN", () => {
    const r = questionBlocks(risky, snapshot({ state: "input-required", questions: [risky] }));
    const text = sections(r).join("\n");
    expect(text).toContain('"to": "team@example.com"');
    expect(text).toContain('"body": "See you there"');
    const b = buttons(r);
    expect(b.map((x) => x.text?.text)).toEqual(["Allow", "Deny"]);
    expect(b.every((x) => x.action_id?.startsWith(ACTION_OPTION))).toBe(true);
    expect(parseOptionValue(b[0]?.value)).toEqual({ urn: risky.urn, optionId: "approve" });
  });

  it("an answered question shows who answered what, and no buttons", () => {
    const answered = { ...risky, answered: { by: "user_slack.T1.U42", summary: "Allow" } };
    const r = questionBlocks(answered, snapshot());
    expect(buttons(r)).toHaveLength(0);
    expect(sections(r).join("\n")).toContain("<@U42> answered: *Allow*");
    const byApi = questionBlocks({ ...risky, answered: { by: "user_ada", summary: "Deny" } }, snapshot());
    expect(sections(byApi).join("\n")).toContain("`user_ada` answered: *Deny*");
    const named = questionBlocks(
      { ...risky, answered: { by: "user_ada", byName: "Ada <Lovelace>", summary: "Deny" } },
      snapshot(),
    );
    expect(sections(named).join("\n")).toContain("*Ada &lt;Lovelace&gt;* answered: *Deny*");
    expect(named.text).toContain("answered by Ada &lt;Lovelace&gt; (Deny)");
    const ended = questionBlocks(
      { ...risky, answered: { by: "system_engine", summary: "not answered: the request canceled" } },
      snapshot(),
    );
    expect(buttons(ended)).toHaveLength(0);
    expect(sections(ended).join("\n")).toContain("_not answered: the request canceled_");
  });

  it("input questions, many options and an editable plan open a modal", () => {
    const input: ThreadQuestion = { ...risky, kind: "input", purpose: "request_info", options: undefined };
    expect(parseOpenValue(buttons(questionBlocks(input, snapshot()))[0]?.value)).toEqual({
      urn: risky.urn,
      mode: "input",
    });
    const many: ThreadQuestion = {
      ...risky,
      kind: "select",
      purpose: "assign_subtask",
      options: Array.from({ length: 12 }, (_, i) => ({ id: `o${i}`, label: `Option ${i}` })),
    };
    const b = buttons(questionBlocks(many, snapshot()));
    expect(b).toHaveLength(1);
    expect(b[0]?.action_id).toBe(`${ACTION_OPEN}.select`);
    const plan: ThreadQuestion = { ...risky, purpose: "approve_plan", binding: undefined };
    expect(buttons(questionBlocks(plan, snapshot())).map((x) => x.action_id)).toEqual([
      `${ACTION_OPTION}.0`,
      `${ACTION_OPTION}.1`,
      `${ACTION_OPEN}.edit`,
    ]);
  });

  it("every value fits Slack's 2000 characters, even for the longest URN and option id", () => {
    const longUrn = `${ROOT}${"/plan.Task.abcdefghijklmnopqrstuvwxyz0123456789".repeat(20)}`.slice(0, 990);
    const q = { ...risky, urn: longUrn, options: [{ id: "x".repeat(100), label: "Go" }] };
    for (const b of buttons(questionBlocks(q, snapshot())))
      expect((b.value ?? "").length).toBeLessThanOrEqual(2000);
  });

  it("the answer is cut to Slack's limits and says where the whole of it is", () => {
    const r = answerBlocks(snapshot({ state: "completed", answer: "word ".repeat(60_000) }));
    expect(blocksOf(r).length).toBeLessThanOrEqual(MAX_BLOCKS);
    for (const s of sections(r)) expect(s.length).toBeLessThanOrEqual(SECTION_CHARS);
    const all = JSON.stringify(blocksOf(r));
    expect(all).toContain("The answer is cut here");
    expect(all).toContain(encodeURIComponent(ROOT));
    expect(r.text.length).toBeLessThanOrEqual(3000);
    const failed = answerBlocks(snapshot({ state: "failed", reason: "the budget ran out" }));
    expect(failed.text).toBe("Failed: the budget ran out");
  });

  it("the answer's Markdown reads as Slack's mrkdwn, escaped", () => {
    expect(mrkdwn("# Plan\n**Venue**: the [barn](https://example.com/barn?a=1&b=2) <3")).toBe(
      "*Plan*\n*Venue*: the <https://example.com/barn?a=1&amp;b=2|barn> &lt;3",
    );
    expect(mrkdwn("[x](javascript:alert(1))")).toBe("[x](javascript:alert(1))");
  });
});
