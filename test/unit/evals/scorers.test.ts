import { describe, expect, it } from "vitest";
import type { Expectations } from "../../../shared/evals/dataset.ts";
import { customScore, meanScore, type RunFacts, scoreRun } from "../../../shared/evals/scorers.ts";

/** Each deterministic scorer on a run that meets its expectation and on one that does not. */
const RUN: RunFacts = {
  status: "done",
  answer: '{"total": 100, "unit": "EUR"} The invitation went out to team@example.com.',
  tasks: [
    { title: "Plan the offsite", depth: 1, assistant: "event-planner" },
    { title: "Agenda", depth: 2, assistant: "facilitator" },
    { title: "Invite the team", depth: 3, assistant: "communications" },
  ],
  toolCalls: [{ name: "send_email", arguments: { to: "team@example.com", subject: "Lisbon" } }],
  usage: { tokens: 1200, costUsd: 0.004, unpricedCalls: 0 },
  wallMs: 900,
  questions: [{ purpose: "confirm_risky_action", answer: "approve" }],
};

const only = (expect: Expectations, run: RunFacts = RUN) =>
  scoreRun(expect, run).filter((s) => s.scorer !== "status");

describe("the scorers", () => {
  const cases: [string, Expectations, Expectations, RegExp][] = [
    ["contains", { contains: ["TEAM@example.com"] }, { contains: ["venue", "team@"] }, /lacks "venue"/],
    ["notContains", { notContains: ["not sent"] }, { notContains: ["went out"] }, /has "went out"/],
    ["matches", { matches: ["\\b100\\b"] }, { matches: ["^nothing$"] }, /does not match/],
    [
      "tools",
      { tools: { called: ["send_email"], notCalled: ["calculator"] } },
      { tools: { called: ["calculator"] } },
      /calculator was not called/,
    ],
    [
      "tools",
      { tools: { arguments: { send_email: { to: "team@example.com" } } } },
      { tools: { arguments: { send_email: { to: "x@y" } } } },
      /no call of send_email had/,
    ],
    [
      "tree",
      { tree: { minTasks: 3, maxTasks: 3, maxDepth: 3 } },
      { tree: { maxTasks: 2, maxDepth: 2 } },
      /3 tasks, more than 2; depth 3, deeper than 2/,
    ],
    [
      "elected",
      { elected: { "Invite the team": "communications" } },
      { elected: { "Invite the team": "generalist", Nope: "x" } },
      /went to communications, not generalist; no task is named "Nope"/,
    ],
    [
      "budget",
      { budget: { maxTokens: 1200, maxCostUsd: 0.01, maxWallMs: 1000 } },
      { budget: { maxTokens: 100 } },
      /1200 tokens, more than 100/,
    ],
    ["approval", { approval: "needed" }, { approval: "none" }, /1 approval\(s\) were asked for/],
  ];
  for (const [scorer, pass, fail, why] of cases)
    it(`${scorer}: 1 when it holds, less with the reason when it does not`, () => {
      expect(only(pass)).toEqual([{ scorer, score: 1, reason: "all held" }]);
      const [failed] = only(fail);
      expect(failed?.scorer).toBe(scorer);
      expect(failed?.score).toBeLessThan(1);
      expect(failed?.reason).toMatch(why);
    });

  it("jsonSchema: the answer must be JSON valid for the schema", () => {
    const schema = { type: "object", required: ["total"], properties: { total: { type: "number" } } };
    const json = { ...RUN, answer: '{"total": 100}' };
    expect(only({ jsonSchema: schema }, json)).toEqual([
      { scorer: "jsonSchema", score: 1, reason: "all held" },
    ]);
    expect(only({ jsonSchema: schema }, { ...RUN, answer: '{"total": "100"}' })[0]?.reason).toMatch(
      /must be number/,
    );
    expect(only({ jsonSchema: schema })[0]?.reason).toBe("the answer is not JSON");
  });

  it("scores the end state always, a cost unknown as over any dollar bound, and half a case as half", () => {
    expect(scoreRun({}, { ...RUN, status: "timeout" })).toEqual([
      { scorer: "status", score: 0, reason: "the request ended timeout, not done" },
    ]);
    expect(scoreRun({ status: "failed" }, { ...RUN, status: "failed" })[0]?.score).toBe(1);
    const unpriced = only(
      { budget: { maxCostUsd: 1 } },
      { ...RUN, usage: { ...RUN.usage, unpricedCalls: 2 } },
    );
    expect(unpriced[0]).toMatchObject({ score: 0, reason: expect.stringMatching(/cost is unknown/) });
    const half = only({ contains: ["team@example.com", "absent"] });
    expect(half[0]?.score).toBe(0.5);
    expect(meanScore(scoreRun({ contains: ["absent"] }, RUN))).toBe(0.5);
  });
});

describe("a scorer of the team's own", () => {
  const input = { case: { id: "c", request: "r" }, run: RUN };
  it("gives its number or its score and reason; anything else, or a throw, scores 0 saying why", async () => {
    expect(await customScore({ name: "n", score: () => 1 }, input)).toEqual({
      scorer: "n",
      score: 1,
      reason: "all held",
    });
    expect(
      await customScore({ name: "n", score: async () => ({ score: 0.5, reason: "half" }) }, input),
    ).toEqual({
      scorer: "n",
      score: 0.5,
      reason: "half",
    });
    for (const bad of [2, -1, Number.NaN, "1", null, { score: "1" }])
      expect((await customScore({ name: "n", score: () => bad as never }, input)).reason).toMatch(
        /not a score from 0 to 1/,
      );
    const thrown = await customScore(
      {
        name: "n",
        score: () => {
          throw new Error("boom");
        },
      },
      input,
    );
    expect(thrown).toEqual({ scorer: "n", score: 0, reason: "the scorer threw: boom" });
  });
});
