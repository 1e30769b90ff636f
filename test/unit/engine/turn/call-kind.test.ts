import { describe, expect, it } from "vitest";
import { type CallFacts, callKind } from "../../../../shared/engine/turn/call-kind.ts";
import type { ToolDescriptor } from "../../../../shared/ports/tools.ts";

/** What a turn does with each tool call, case by case (shared/engine/turn/call-kind.ts). */
const tool = (name: string, extra: Partial<ToolDescriptor> = {}): ToolDescriptor => ({
  name,
  description: name,
  parameters: { type: "object" },
  kind: "builtin",
  risky: false,
  pure: false,
  ...extra,
});
const facts = (extra: Partial<CallFacts> = {}): CallFacts => ({
  call: { name: "word_count" },
  assistant: { name: "Editor", tools: ["word_count", "send_email", "ask_person"] },
  descriptor: tool("word_count"),
  asksPerson: false,
  problems: [],
  ...extra,
});

describe("callKind", () => {
  it("runs a tool the assistant lists", () => {
    expect(callKind(facts())).toEqual({ kind: "run" });
  });

  it("asks a person to confirm a risky tool, with arguments that can run", () => {
    expect(
      callKind(facts({ call: { name: "send_email" }, descriptor: tool("send_email", { risky: true }) })),
    ).toEqual({ kind: "confirm" });
  });

  it("refuses a risky call whose arguments cannot run: nobody is asked to confirm it", () => {
    const kind = callKind(
      facts({
        call: { name: "send_email" },
        descriptor: tool("send_email", { risky: true }),
        problems: ["to: required", "subject: too long"],
      }),
    );
    expect(kind).toEqual({
      kind: "invalid",
      result: { content: "Invalid arguments for send_email: to: required; subject: too long", isError: true },
    });
  });

  it("refuses refused meta-properties (a bad _outputPath) before anything else about the arguments", () => {
    const error = { content: "Invalid _outputPath", isError: true };
    expect(callKind(facts({ preparedError: error, problems: ["x"] }))).toEqual({
      kind: "invalid",
      result: error,
    });
  });

  it("asks the person for ask_person, whatever the arguments", () => {
    expect(
      callKind(
        facts({
          call: { name: "ask_person" },
          descriptor: tool("ask_person"),
          asksPerson: true,
          problems: ["x"],
        }),
      ),
    ).toEqual({ kind: "ask" });
  });

  it("answers a tool the assistant does not list, or no tool has, as unavailable", () => {
    const unlisted = callKind(facts({ call: { name: "delete_all" }, descriptor: tool("delete_all") }));
    const unknown = callKind(facts({ call: { name: "word_count" }, descriptor: undefined }));
    for (const kind of [unlisted, unknown]) expect(kind.kind).toBe("unavailable");
    expect(unlisted).toMatchObject({ result: { content: 'Tool "delete_all" is not available to Editor' } });
  });

  it("takes a remote agent's recorded answer first: the call is settled, never run again", () => {
    const settled = { content: "42 venues", isError: false };
    expect(callKind(facts({ settled, descriptor: undefined }))).toEqual({ kind: "settled", result: settled });
    expect(callKind(facts({ settled, descriptor: tool("send_email", { risky: true }) }))).toEqual({
      kind: "settled",
      result: settled,
    });
  });
});
