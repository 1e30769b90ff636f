import { describe, expect, it } from "vitest";
import {
  AskQuestionSchema,
  answerRegexProblem,
  askKindOf,
  MAX_REGEX_INPUT,
  regexProblem,
} from "../../../shared/domain/ask-question.ts";

/**
 * The questions an assistant may ask, and the rule that keeps a question's regex from hanging the
 * process that checks an answer against it. Nothing here asserts a duration: a regex that could hang
 * is refused before it is ever run, and one the rule lets through that would run for minutes is
 * stopped by the check's clock (the test asserts the refusal, and would not finish without it).
 */
describe("regexes a question may carry", () => {
  it("refuses what could take exponential or high polynomial time, and what does not compile", () => {
    for (const [regex, why] of [
      ["^(a+)+$", /repeated group/],
      ["(a|a)*b", /repeated group/],
      ["^(\\w+\\s?)*$", /repeated group/],
      ["((a+))+", /repeated group/],
      ["(?:a*)*", /repeated group/],
      ["(x+x+)+y", /repeated group/],
      ["(\\d+-){2,}", /repeated group/],
      // A fixed count repeats too: (a|a){30} tries 2^30 ways, (\d*){20} splits the digits every way.
      ["(a|a){30}b", /repeated group/],
      ["(?:\\d*){20}x", /repeated group/],
      ["(?=(a|a){25})b", /repeated group/],
      ["((a|b){2}){10}", /repeated group/],
      ["\\d*\\d*\\d*\\d*x", /at most 3 repeating/],
      ["a?a?a?a?a?a?a?aaaaaaa", /at most 6 quantifiers/],
      ["(a)\\1", /backreferences/],
      ["(?<x>a)\\k<x>", /backreferences/],
      ["([a-z", /not a valid regular expression/],
      ["a".repeat(201), /at most 200 characters/],
    ] as const)
      expect(regexProblem(regex), regex).toMatch(why);
  });

  it("takes the usual ones", () => {
    for (const regex of [
      "^\\d{4}-\\d{2}-\\d{2}$",
      "^[A-Z]{3}$",
      "^[a-z]+@[a-z]+\\.[a-z]{2,}$",
      "^(yes|no)$",
      "^(\\d{3}-)+\\d{4}$",
      "^(\\d{3}-){2}\\d{4}$",
      "^(a|b){1}$",
      "^(?:\\+\\d+)?[0-9 ]+$",
      "^[^()*+]+$",
      "(?=.*\\d)^\\w{8,}$",
    ])
      expect(regexProblem(regex), regex).toBeUndefined();
  });

  it("checks an answer only within the bounds: a refused regex or a long text is a problem, never a run", () => {
    expect(answerRegexProblem("^\\d+$", "42")).toBeUndefined();
    expect(answerRegexProblem("^\\d+$", "4x")).toBe("input must match ^\\d+$");
    expect(answerRegexProblem("^\\d+$", "4".repeat(MAX_REGEX_INPUT + 1))).toMatch(/at most 500 characters/);
    // A regex stored before the rule held (or written around it): refused, not run on the text.
    expect(answerRegexProblem("^(a+)+$", `${"a".repeat(40)}b`)).toMatch(/cannot be checked safely/);
  });

  it("stops a check the rule let through that would run for minutes, and refuses that answer", () => {
    // Within the rule (3 repeats, 500 characters) and still n^4 steps: stopped by the clock, not run out.
    expect(regexProblem("[\\s\\S]*[\\s\\S]*[\\s\\S]*x")).toBeUndefined();
    expect(answerRegexProblem("[\\s\\S]*[\\s\\S]*[\\s\\S]*x", "a".repeat(MAX_REGEX_INPUT))).toMatch(
      /could not be checked against the question's regex in time/,
    );
    expect(answerRegexProblem("\\d*\\d*\\d*x", "1".repeat(MAX_REGEX_INPUT))).toMatch(/in time/);
    // Sent again and again: a text at least half as long is refused without a run; a short one is checked.
    for (let i = 0; i < 50; i++)
      expect(answerRegexProblem("\\d*\\d*\\d*x", `${i}`.padStart(250, "1"))).toMatch(/under 250 characters/);
    expect(answerRegexProblem("\\d*\\d*\\d*x", "12x")).toBeUndefined();
    expect(answerRegexProblem("\\d*\\d*\\d*x", "12")).toBe("input must match \\d*\\d*\\d*x");
    // The usual answer is still checked and taken.
    expect(answerRegexProblem("^\\d{4}-\\d{2}-\\d{2}$", "2026-11-26")).toBeUndefined();
  });
});

describe("the ask_person question", () => {
  const parse = (q: unknown) => AskQuestionSchema.safeParse(q);

  it("its kind follows from what it offers", () => {
    const kind = (q: unknown) => askKindOf(AskQuestionSchema.parse(q));
    expect(kind({ title: "Date?" })).toBe("input");
    expect(kind({ title: "Colour?", options: ["Red", "Blue"] })).toBe("select");
    expect(kind({ title: "Colour?", options: ["Red", "Blue"], freeAnswer: true })).toBe("composite");
  });

  it("refuses what cannot be asked, naming the field", () => {
    const issues = (q: unknown) => {
      const r = parse(q);
      return r.success ? [] : r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    };
    expect(issues({ title: " " }).join()).toMatch(/^title: the question needs a title/);
    expect(issues({ title: "x", options: Array.from({ length: 21 }, (_, i) => String(i)) }).join()).toMatch(
      /options: at most 20 options/,
    );
    expect(issues({ title: "x", freeAnswer: true }).join()).toMatch(/freeAnswer needs options/);
    expect(issues({ title: "x", options: ["a"], validation: { regex: "^a$" } }).join()).toMatch(
      /validation: validation applies to a written answer/,
    );
    expect(issues({ title: "x", validation: { regex: "^(a+)+$" } }).join()).toMatch(
      /validation\.regex: a repeated/,
    );
    expect(issues({ title: "x", extra: 1 }).join()).toMatch(/extra/);
  });
});
