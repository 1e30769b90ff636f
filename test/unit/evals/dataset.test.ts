import { describe, expect, it } from "vitest";
import type { InteractionResource } from "../../../shared/domain/resources.ts";
import { parseDataset } from "../../../shared/evals/dataset.ts";
import { answerFor } from "../../../shared/evals/experiment.ts";

describe("a dataset", () => {
  it("reads JSONL (comments and blank lines skipped) and YAML alike", () => {
    const jsonl = `# two cases\n{"id":"a","request":"Say hi","expect":{"contains":["hi"]}}\n\n{"id":"b","request":"Sum","mode":"lazy"}\n`;
    const yaml = `- id: a\n  request: Say hi\n  expect: {contains: [hi]}\n- id: b\n  request: Sum\n  mode: lazy\n`;
    const fromJsonl = parseDataset(jsonl, "d.jsonl");
    expect(fromJsonl).toEqual(parseDataset(yaml, "d.yaml"));
    expect(fromJsonl).toEqual(parseDataset(`cases:\n${yaml.replace(/^/gm, "  ")}`, "d.yaml"));
    expect(fromJsonl[1]).toEqual({ id: "b", request: "Sum", mode: "lazy", expect: {} });
  });

  it("says which case and which field is wrong", () => {
    const bad: [string, RegExp][] = [
      [`{"id":"a","request":"x"}\n{"id":"b"}`, /line 2, is not a valid case: request/],
      [`{"id":"a","request":"x","expect":{"contans":["y"]}}`, /line 1.*Unrecognized key.*contans/],
      [`{"id":"a","request":"x"}\n{"id":"a","request":"y"}`, /two cases have the id a/],
      [`{"id":"a","request":"x"\n`, /line 1, is not JSON/],
      [`{"id":"a","request":"x","expect":{"matches":["("]}}`, /not a regular expression/],
      [`id: a`, /a list of cases/],
      [`{"id":"a","request":"   "}`, /request: a request has text, not only spaces/],
      [`{"id":"a","request":"x","history":["ok","  "]}`, /history\.1: a request has text/],
      [`{"id":"a","request":"x","history":${JSON.stringify(Array(11).fill("h"))}}`, /history/],
      [``, /holds no cases/],
      [`{"id":"a b","request":"x"}`, /id: 1-100 of/],
    ];
    for (const [text, why] of bad) expect(() => parseDataset(text, "d"), text).toThrow(why);
  });
});

describe("a case's answers", () => {
  const question = (purpose: string, options?: { id: string; label: string }[]) =>
    ({ purpose, options, display: { title: "?" } }) as unknown as InteractionResource;
  it("approve plans and risky calls by default, take the first of a choice, and what the case says", () => {
    const risky = question("confirm_risky_action", [
      { id: "approve", label: "Allow" },
      { id: "deny", label: "Deny" },
    ]);
    expect(answerFor(risky, {})).toEqual({ selectedOptionId: "approve" });
    expect(answerFor(risky, { confirm_risky_action: "deny" })).toEqual({ selectedOptionId: "deny" });
    expect(answerFor(risky, { confirm_risky_action: "Deny" })).toEqual({ selectedOptionId: "deny" });
    const strategy = question("choose_strategy", [
      { id: "retry", label: "Retry" },
      { id: "stop", label: "Stop" },
    ]);
    expect(answerFor(strategy, {})).toEqual({ selectedOptionId: "retry" });
    expect(answerFor(question("request_info"), { request_info: "Lisbon" })).toEqual({ inputValue: "Lisbon" });
    const plan = question("approve_plan", [
      { id: "approve", label: "Run it" },
      { id: "reject", label: "Cancel" },
    ]);
    expect(answerFor(plan, { approve_plan: '{"name":"Edited"}' })).toEqual({
      selectedOptionId: "approve",
      inputValue: '{"name":"Edited"}',
    });
  });
});
