import { parse as parseYaml } from "yaml";
import * as z from "zod";
import { MAX_REQUEST_CHARS } from "../domain/input-limits.ts";
import { formatIssues } from "../domain/resources.ts";
import { ValidationError } from "../kernel/errors.ts";

/**
 * A dataset: the cases an experiment runs, from a file, JSONL (a case a line) or YAML (a list of
 * cases, or `{cases: [...]}`). A case is a request, how the questions of its run are answered (an
 * experiment never waits for a person), and what is expected of the run; each expectation is
 * scored by scorers.ts, in [0, 1], with a reason.
 *
 *   {"id": "sum", "request": "What is 1200 EUR shared by 12 people?",
 *    "expect": {"contains": ["100 EUR each"], "tools": {"called": ["calculator"]}, "tree": {"maxTasks": 1}}}
 *
 *   - id: follow-up
 *     history: ["Plan a two-day team offsite in Lisbon for 12 people"]
 *     request: Now make it three days
 *
 *   - id: invite
 *     request: Plan a two-day team offsite in Lisbon for 12 people
 *     answers: {confirm_risky_action: deny}
 *     expect: {approval: needed, contains: ["not sent"]}
 */
export const MAX_CASES = 1000;
/** Earlier requests a case may run before its own (each one a whole run: see `history`). */
export const MAX_HISTORY = 10;

const Strings = z.array(z.string().min(1).max(2000)).max(50);

export const ExpectSchema = z
  .object({
    /** The request ends in this state (default: done). */
    status: z.enum(["done", "failed", "canceled"]).optional(),
    /** The answer contains each (case-insensitively). */
    contains: Strings.optional(),
    /** The answer contains none of these (case-insensitively). */
    notContains: Strings.optional(),
    /** The answer matches each regular expression (JavaScript syntax, flag i). */
    matches: Strings.optional(),
    /** The answer is JSON, valid for this JSON Schema. */
    jsonSchema: z.record(z.string(), z.unknown()).optional(),
    tools: z
      .object({
        /** Each was asked for by a model in the run. */
        called: z.array(z.string().min(1).max(64)).max(50).optional(),
        /** None was. */
        notCalled: z.array(z.string().min(1).max(64)).max(50).optional(),
        /** A call of the tool had these arguments (each given field equal, as JSON). */
        arguments: z.record(z.string().min(1).max(64), z.record(z.string(), z.unknown())).optional(),
      })
      .strict()
      .optional(),
    tree: z
      .object({
        minTasks: z.number().int().min(1).optional(),
        maxTasks: z.number().int().min(1).optional(),
        maxDepth: z.number().int().min(1).optional(),
      })
      .strict()
      .optional(),
    /** The assistant (its id, e.g. `communications`) elected for each task named here. */
    elected: z.record(z.string().min(1).max(200), z.string().min(1).max(200)).optional(),
    budget: z
      .object({
        maxTokens: z.number().int().min(1).optional(),
        maxCostUsd: z.number().min(0).optional(),
        maxWallMs: z.number().int().min(1).optional(),
      })
      .strict()
      .optional(),
    /** Whether a person's approval (a risky call, a plan) was asked for in the run. */
    approval: z.enum(["needed", "none"]).optional(),
    /** A model judges the answer against these criteria (judge.ts), as a task's evaluation is written. */
    judge: z
      .object({ criteria: z.string().min(1).max(4000) })
      .strict()
      .optional(),
  })
  .strict();
export type Expectations = z.infer<typeof ExpectSchema>;

/**
 * How the run's questions are answered, by purpose: an option's id or label (`approve`, `deny`,
 * `reject`, an assistant), `first` (the first option), or, for a question that takes a value, the
 * value. Unset: a plan is approved, a risky call allowed, a choice takes its first option.
 */
export const AnswersSchema = z
  .object({
    approve_plan: z.string().max(100_000).optional(),
    confirm_risky_action: z.string().max(200).optional(),
    choose_strategy: z.string().max(200).optional(),
    assign_subtask: z.string().max(200).optional(),
    request_info: z.string().max(100_000).optional(),
    generic: z.string().max(100_000).optional(),
  })
  .strict();
export type CaseAnswers = z.infer<typeof AnswersSchema>;

/** A request as the engine takes it: some text that is not only spaces, within its bound. */
const RequestText = z
  .string()
  .min(1)
  .max(MAX_REQUEST_CHARS)
  .refine((t) => t.trim() !== "", "a request has text, not only spaces");

export const CaseSchema = z
  .object({
    id: z.string().regex(/^[A-Za-z0-9._-]{1,100}$/, "1-100 of A-Z a-z 0-9 . _ -"),
    request: RequestText,
    /**
     * Earlier requests of the same conversation, run first, in order, each to its end (their
     * questions answered as the case says): the request is the conversation's next message, with
     * what they produced in reach. Only the request's run is scored.
     */
    history: z.array(RequestText).max(MAX_HISTORY).optional(),
    mode: z.enum(["eager", "lazy"]).optional(),
    answers: AnswersSchema.optional(),
    expect: ExpectSchema.default({}),
  })
  .strict();
export type EvalCase = z.infer<typeof CaseSchema>;

/** The cases of a dataset file's text; ValidationError naming the case (and line) and the field. */
export function parseDataset(text: string, name: string): EvalCase[] {
  const raw = looksLikeJsonl(text) ? jsonl(text, name) : yaml(text, name);
  if (raw.length === 0) throw new ValidationError(`${name} holds no cases`);
  if (raw.length > MAX_CASES)
    throw new ValidationError(`${name} holds ${raw.length} cases, more than ${MAX_CASES}: split it`);
  const cases = raw.map(({ value, where }) => {
    const parsed = CaseSchema.safeParse(value);
    if (!parsed.success)
      throw new ValidationError(`${name}, ${where}, is not a valid case`, formatIssues(parsed.error));
    return parsed.data;
  });
  const seen = new Set<string>();
  for (const c of cases) {
    if (seen.has(c.id)) throw new ValidationError(`${name}: two cases have the id ${c.id}`);
    seen.add(c.id);
  }
  for (const c of cases)
    for (const pattern of c.expect.matches ?? [])
      try {
        new RegExp(pattern, "i");
      } catch (e) {
        throw new ValidationError(
          `${name}, case ${c.id}: expect.matches ${JSON.stringify(pattern)} is not a regular expression (${(e as Error).message})`,
        );
      }
  return cases;
}

const looksLikeJsonl = (text: string) =>
  text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"))
    .every((l) => l.startsWith("{"));

function jsonl(text: string, name: string): { value: unknown; where: string }[] {
  const out: { value: unknown; where: string }[] = [];
  for (const [i, line] of text.split("\n").entries()) {
    const t = line.trim();
    if (t === "" || t.startsWith("#")) continue;
    try {
      out.push({ value: JSON.parse(t), where: `line ${i + 1}` });
    } catch (e) {
      throw new ValidationError(`${name}, line ${i + 1}, is not JSON: ${(e as Error).message}`);
    }
  }
  return out;
}

function yaml(text: string, name: string): { value: unknown; where: string }[] {
  let doc: unknown;
  try {
    doc = parseYaml(text, { maxAliasCount: 100 });
  } catch (e) {
    throw new ValidationError(`${name} is neither JSONL nor YAML: ${(e as Error).message}`);
  }
  const list = Array.isArray(doc) ? doc : (doc as { cases?: unknown } | null)?.cases;
  if (!Array.isArray(list))
    throw new ValidationError(`${name}: a YAML dataset is a list of cases, or {cases: [...]}`);
  return list.map((value, i) => ({ value, where: `case ${i + 1}` }));
}
