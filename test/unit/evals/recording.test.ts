import { describe, expect, it } from "vitest";
import { modelKey, parseRecording, RecordingBook, Replay, whereOf } from "../../../shared/evals/recording.ts";
import { ArborError } from "../../../shared/kernel/errors.ts";
import type { LlmRequest, LlmResponse } from "../../../shared/ports/llm.ts";

const leaf = (urn: string, related = "") =>
  ({
    messages: [{ role: "user", content: `# Task: Invite the team\n- The request: see ${urn}${related}` }],
    tools: [{ name: "send_email", description: "", parameters: {} }],
  }) as LlmRequest;
const answer = (content: string): LlmResponse => ({
  content,
  toolCalls: [],
  stopReason: "end_turn",
  usage: { inputTokens: 1, outputTokens: 1 },
  model: "scripted",
});

describe("a recording's keys", () => {
  it("ignore what differs from run to run (URNs, ids, times, related results), not what was asked", () => {
    const a = leaf(
      "cld:common.Tenant.acme/common.Conversation.01M8JR5H7JYBK35QRC0DPEYBBC at 2026-11-29T04:13:10.485Z",
    );
    const b = leaf(
      "cld:common.Tenant.acme/common.Conversation.01M8JR5JD5EREBBZH199PMHMBH at 2026-11-30T01:00:00Z",
      "\n# Related results\n- an earlier output",
    );
    expect(modelKey(a)).toBe(modelKey(b));
    expect(modelKey(a)).not.toBe(modelKey({ ...a, tools: [] }));
    expect(whereOf(a)).toBe('task "Invite the team", turn 1');
    expect(whereOf({ messages: [], tools: [{ name: "create_plan", description: "", parameters: {} }] })).toBe(
      "the planner",
    );
  });

  it("answer in recorded order, and a call the recording has not is a divergence that fails, saying where", async () => {
    const book = new RecordingBook("scripted");
    book.model(leaf("cld:common.Tenant.a/x"), answer("first"));
    book.model(leaf("cld:common.Tenant.a/x"), answer("second"));
    const replay = new Replay(parseRecording(JSON.stringify(book.recording), "r.json"));
    expect((await replay.llm.complete(leaf("cld:common.Tenant.b/y"))).content).toBe("first");
    expect((await replay.llm.complete(leaf("cld:common.Tenant.c/z"))).content).toBe("second");
    expect((await replay.llm.complete(leaf("cld:common.Tenant.c/z"))).content).toBe("second"); // the last one again
    const other = {
      ...leaf("cld:common.Tenant.a/x"),
      messages: [{ role: "user" as const, content: "# Task: Something new" }],
    };
    await expect(replay.llm.complete(other)).rejects.toSatisfy(
      (e) =>
        e instanceof ArborError &&
        e.code === "CONFIG" &&
        /diverged at task "Something new", turn 1/.test(e.message),
    );
    expect(replay.divergences).toEqual([
      { kind: "model call", where: 'task "Something new", turn 1', detail: "# Task: Something new" },
    ]);
    expect(replay.modelAnswers).toBe(3);
    expect(() => parseRecording('{"version":1}', "r.json")).toThrow(/r\.json is not a recording/);
    expect(() => parseRecording("nope", "r.json")).toThrow(/not JSON/);
  });
});
