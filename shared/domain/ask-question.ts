import { createContext, runInContext } from "node:vm";
import * as z from "zod";

/**
 * A question an assistant asks a person (the `ask_person` tool), and the rules every answer's
 * `validation.regex` is held to. The tool's JSON Schema is generated from AskQuestionSchema, and the
 * engine parses the model's arguments with the same schema before anything is asked.
 *
 * The kind of question follows from what it offers:
 *   - options only                          -> `select`:    the answer is one of the options;
 *   - no options                            -> `input`:     the answer is a text;
 *   - options and `freeAnswer: true`        -> `composite`: the answer is EITHER one of the options
 *     OR a text of the person's own, never both and never neither. The text is held to
 *     `validation` (regex), an option is not. `required` has no meaning for a composite question
 *     (some answer is always required).
 */
export const MAX_ASK_OPTIONS = 20;

export const AskQuestionSchema = z
  .object({
    title: z.string().trim().min(1, "the question needs a title").max(300),
    description: z.string().max(4000).optional(),
    options: z
      .array(z.string().trim().min(1).max(200))
      .min(1)
      .max(MAX_ASK_OPTIONS, `at most ${MAX_ASK_OPTIONS} options`)
      .optional()
      .describe("Choices the person picks one of (labels). Leave out for a free answer."),
    freeAnswer: z
      .boolean()
      .optional()
      .describe("With options: the person may also write an answer of their own instead of choosing one."),
    validation: z
      .object({
        regex: z
          .string()
          .min(1)
          .max(200)
          .optional()
          .describe(
            "A JavaScript regular expression the written answer must match (e.g. ^\\d{4}-\\d{2}-\\d{2}$).",
          ),
        required: z.boolean().optional().describe("A written answer may not be empty."),
      })
      .strict()
      .optional(),
  })
  .strict()
  .superRefine((q, ctx) => {
    if (q.options && new Set(q.options).size !== q.options.length)
      ctx.addIssue({ code: "custom", path: ["options"], message: "options must differ from each other" });
    if (q.freeAnswer && !q.options)
      ctx.addIssue({
        code: "custom",
        path: ["freeAnswer"],
        message: "freeAnswer needs options (without options every answer is free)",
      });
    const free = !q.options || q.freeAnswer === true;
    if (q.validation && !free)
      ctx.addIssue({
        code: "custom",
        path: ["validation"],
        message: "validation applies to a written answer: give no options, or freeAnswer: true",
      });
    const problem = q.validation?.regex === undefined ? undefined : regexProblem(q.validation.regex);
    if (problem) ctx.addIssue({ code: "custom", path: ["validation", "regex"], message: problem });
  });
export type AskQuestion = z.infer<typeof AskQuestionSchema>;

export const askKindOf = (q: AskQuestion): "select" | "input" | "composite" =>
  !q.options ? "input" : q.freeAnswer ? "composite" : "select";

/** The option ids a question gets: `option-1`, `option-2`, ... in the order given. */
export const askOptionId = (index: number) => `option-${index + 1}`;

/**
 * Regexes that cannot hang the server. A regex is run on every answer in the process that takes it
 * (the HTTP API, a Slack or Teams route, the API function), so a question may only carry one whose
 * worst case is bounded. The rule, checked when the question is asked and again when it is answered:
 *   - at most MAX_REGEX_CHARS characters, and it compiles;
 *   - no backreferences (`\1`, `\k<name>`): they need backtracking;
 *   - star height 1: a repeated group (`*`, `+`, `{n,}`, `{n,m}` with m > 1, and `{n}` with n > 1)
 *     contains no quantifier and no alternation (`(a+)+`, `(a|a)*`, `(a|a){30}`, `(\d*){20}` are
 *     refused; `(\d+-)?` and `(\d{3}-)+` are fine: `{n}` inside a group is a fixed length);
 *   - at most MAX_REPEATS repeating quantifiers in all, and at most MAX_QUANTIFIERS quantifiers of
 *     any kind (`?` included; `{n}` is not one): `\d*\d*\d*\d*x` is polynomial in the input;
 * and an answer held to a regex is at most MAX_REGEX_INPUT characters. The rule keeps the worst case
 * polynomial, not small (`\d*\d*\d*x` on 500 digits runs for minutes), so an answer is also checked
 * under a clock: a check that takes longer than REGEX_CHECK_MS is stopped and the answer refused
 * (and longer texts for that regex are refused without a run: slowAt).
 */
export const MAX_REGEX_CHARS = 200;
export const MAX_REGEX_INPUT = 500;
const MAX_REPEATS = 3;
const MAX_QUANTIFIERS = 6;
/** How long one answer's regex check may run before it is stopped (V8 interrupts the match). */
export const REGEX_CHECK_MS = 100;
/**
 * Each regex's shortest text whose check was stopped, in this process: a text at least half as long
 * is refused without a run (the rule keeps the worst case polynomial, so half the length is at least
 * four times faster), so a caller who sends slow answers again and again blocks the process for a
 * few checks per regex, not one per answer. Forgotten whole when it holds MAX_SLOW_REGEXES.
 */
const slowAt = new Map<string, number>();
const MAX_SLOW_REGEXES = 1000;

export function regexProblem(source: string): string | undefined {
  if (source.length > MAX_REGEX_CHARS) return `a regex may be at most ${MAX_REGEX_CHARS} characters`;
  try {
    new RegExp(source);
  } catch (e) {
    return `not a valid regular expression: ${(e as Error).message}`;
  }
  if (/\\[1-9]|\\k</.test(source)) return "backreferences are not allowed in a regex";
  // One frame per open group: whether it holds a quantifier or an alternation.
  const stack: { inner: boolean }[] = [{ inner: false }];
  let repeats = 0;
  let quantifiers = 0;
  let lastGroupInner: boolean | undefined; // set right after a group closes
  for (let i = 0; i < source.length; i++) {
    const ch = source[i] as string;
    const top = stack[stack.length - 1] as { inner: boolean };
    if (ch === "\\") {
      i++;
      lastGroupInner = undefined;
      continue;
    }
    if (ch === "[") {
      // A class: skip to its unescaped end.
      for (i++; i < source.length && source[i] !== "]"; i++) if (source[i] === "\\") i++;
      lastGroupInner = undefined;
      continue;
    }
    if (ch === "(") {
      stack.push({ inner: false });
      // `(?:`, `(?=`, `(?!`, `(?<=`, `(?<!`, `(?<name>`: the `?` is no quantifier.
      const head = /^\(\?(:|=|!|<=|<!|<[A-Za-z_$][\w$]*>)/.exec(source.slice(i));
      if (head) i += head[0].length - 1;
      lastGroupInner = undefined;
      continue;
    }
    if (ch === ")") {
      const closed = stack.pop() ?? { inner: false };
      if (closed.inner) (stack[stack.length - 1] as { inner: boolean }).inner = true;
      lastGroupInner = closed.inner;
      continue;
    }
    if (ch === "|") {
      top.inner = true;
      lastGroupInner = undefined;
      continue;
    }
    const q = quantifierAt(source, i);
    if (q) {
      if (lastGroupInner && (q.kind === "repeat" || (q.kind === "exact" && q.min > 1)))
        return "a repeated group may not contain a quantifier or an alternation (it could take exponential time)";
      if (q.kind !== "exact") {
        quantifiers++;
        if (q.kind === "repeat") repeats++;
        top.inner = true;
      }
      i = q.end;
      if (source[i + 1] === "?") i++; // lazy
      lastGroupInner = undefined;
      continue;
    }
    lastGroupInner = undefined;
  }
  if (repeats > MAX_REPEATS) return `at most ${MAX_REPEATS} repeating quantifiers (*, +, {n,m}) in a regex`;
  if (quantifiers > MAX_QUANTIFIERS) return `at most ${MAX_QUANTIFIERS} quantifiers in a regex`;
  return undefined;
}

/** A quantifier starting at `i` (`*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}`): where it ends and what it does. */
function quantifierAt(
  s: string,
  i: number,
): { end: number; min: number; kind: "repeat" | "optional" | "exact" } | undefined {
  const ch = s[i];
  if (ch === "*" || ch === "+") return { end: i, min: ch === "*" ? 0 : 1, kind: "repeat" };
  if (ch === "?") return { end: i, min: 0, kind: "optional" };
  if (ch !== "{") return undefined;
  const m = /^\{(\d+)(,(\d*))?\}/.exec(s.slice(i));
  if (!m) return undefined;
  const min = Number(m[1]);
  const max = m[2] === undefined ? min : m[3] === "" ? Number.POSITIVE_INFINITY : Number(m[3]);
  const end = i + m[0].length - 1;
  // `{n}` matches one fixed length: no choice, so no quantifier for the rule.
  return { end, min, kind: max === min ? "exact" : max > 1 ? "repeat" : "optional" };
}

/**
 * Whether an answer's text matches a question's regex, under the rule above: a regex that breaks
 * the rule (stored before it held) or a text too long to check is a problem, never a hang.
 */
export function answerRegexProblem(regex: string, value: string): string | undefined {
  const unsafe = regexProblem(regex);
  if (unsafe)
    return `this question's regex cannot be checked safely (${unsafe}): it cannot be answered with text`;
  if (value.length > MAX_REGEX_INPUT)
    return `an answer held to a regex may be at most ${MAX_REGEX_INPUT} characters`;
  const slow = slowAt.get(regex);
  const tooSlow = (chars: number) =>
    `this answer could not be checked against the question's regex in time: write a shorter answer (under ${chars} characters)`;
  if (slow !== undefined && value.length >= Math.ceil(slow / 2)) return tooSlow(Math.ceil(slow / 2));
  const matched = boundedTest(regex, value);
  if (matched === "timeout") {
    if (slowAt.size >= MAX_SLOW_REGEXES) slowAt.clear();
    slowAt.set(regex, Math.min(slow ?? value.length, value.length));
    return tooSlow(Math.ceil(value.length / 2));
  }
  return matched ? undefined : `input must match ${regex}`;
}

/** `new RegExp(regex).test(value)`, stopped after REGEX_CHECK_MS (the match runs in a vm context with a timeout). */
function boundedTest(regex: string, value: string): boolean | "timeout" {
  try {
    return runInContext("new RegExp(regex).test(value)", createContext({ regex, value }), {
      timeout: REGEX_CHECK_MS,
    }) as boolean;
  } catch (e) {
    if ((e as { code?: string }).code === "ERR_SCRIPT_EXECUTION_TIMEOUT") return "timeout";
    throw e;
  }
}
