import { describe, expect, it } from "vitest";
import {
  answerBlocks,
  progressBlocks,
  questionBlocks,
} from "../../../../../shared/channels/chat/slack/blocks.ts";
import type { ThreadQuestion, ThreadSnapshot } from "../../../../../shared/notify/chat/types.ts";

/**
 * The top-level `text` of every message Arbor posts in Slack (what mobile notifications show) is
 * escaped as the blocks are: a request titled `<!channel>`, a model's answer with `<!everyone>` or a
 * disguised link, a person's answer value with `<!here>`: no ping, no link, in the text or the blocks.
 */
const HOSTILE = "<!channel> <!here|here> <!everyone> <@U_BOSS> <https://evil.example|your bank>";
const snapshot = (over: Partial<ThreadSnapshot> = {}): ThreadSnapshot => ({
  rootTaskUrn: "cld:common.Tenant.acme/common.Conversation.c/common.Message.m/plan.Task.r",
  conversationUrn: "cld:common.Tenant.acme/common.Conversation.c",
  title: `Plan ${HOSTILE}`,
  state: "working",
  tasks: [],
  taskCount: 0,
  truncated: false,
  questions: [],
  at: "2026-06-01T09:00:00.000Z",
  ...over,
});
const question: ThreadQuestion = {
  urn: "cld:common.Tenant.acme/uip.Interaction.q",
  kind: "input",
  purpose: "request_info",
  display: { title: `Which airport? ${HOSTILE}` },
  answered: { by: "user_ada", summary: HOSTILE },
};

const noMarkup = (what: string, text: string) => {
  expect(text, what).not.toMatch(/<[!@#]|<https?:/);
  expect(text, what).toContain("&lt;!channel&gt;");
};

describe("Slack's notification text is escaped like the blocks", () => {
  it("progress, an answered question, a completed answer and a failure", () => {
    const renders = {
      progress: progressBlocks(snapshot()),
      question: questionBlocks(question, snapshot()),
      answer: answerBlocks(snapshot({ state: "completed", answer: `Done. ${HOSTILE}` })),
      failed: answerBlocks(snapshot({ state: "failed", reason: `tool said ${HOSTILE}` })),
    };
    for (const [what, r] of Object.entries(renders)) {
      noMarkup(`${what} text`, r.text);
      expect(JSON.stringify(r.payload), `${what} blocks`).not.toMatch(
        /<!channel>|<!everyone>|<https:\/\/evil/,
      );
    }
  });
});
