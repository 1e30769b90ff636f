import type { TaskStatus } from "../domain/task-state.ts";
import { ValidationError } from "../kernel/errors.ts";
import { jsonSchemaChecker } from "../tools/service/json-schema.ts";
import type { Expectations } from "./dataset.ts";

/**
 * The deterministic scorers: each looks at what a run did (RunFacts, gathered by experiment.ts
 * from the engine's own records) against one kind of expectation of its case, and gives a score
 * in [0, 1] (the share of its checks that hold) and a reason naming each check that did not.
 * A case is scored by the scorers of the expectations it has, and always by `status`.
 *
 *   const scores = scoreRun(evalCase.expect, facts);   // [{scorer: "contains", score: 0.5, reason: "..."}, ...]
 */
export interface RunFacts {
  status: TaskStatus | "timeout";
  answer: string;
  /** Every task of the tree: its title, its depth (1 at the root), the id of its assistant. */
  tasks: { title: string; depth: number; assistant: string | undefined }[];
  /** Every tool call a model asked for in the run, with its arguments. */
  toolCalls: { name: string; arguments: Record<string, unknown> }[];
  usage: { tokens: number; costUsd: number; unpricedCalls: number };
  wallMs: number;
  /** The questions of the run, by purpose (answered by the case). */
  questions: { purpose: string; answer: string /** The interaction's URN. */; id?: string }[];
}

export interface Score {
  scorer: string;
  score: number;
  reason: string;
  /** A judge's score (judge.ts): the model that judged and what it was shown. */
  judge?: { model: string; prompt: string };
}

/** The share of `checks` that hold, and the ones that did not, as the reason. */
function of(scorer: string, checks: [ok: boolean, failure: string][]): Score {
  const failed = checks.filter(([ok]) => !ok).map(([, why]) => why);
  const score = checks.length === 0 ? 1 : (checks.length - failed.length) / checks.length;
  return { scorer, score, reason: failed.length ? failed.join("; ") : "all held" };
}

const quote = (s: string) => JSON.stringify(s.length > 80 ? `${s.slice(0, 79)}…` : s);

export function scoreRun(expect: Expectations, run: RunFacts): Score[] {
  const scores: Score[] = [];
  const wanted = expect.status ?? "done";
  scores.push(of("status", [[run.status === wanted, `the request ended ${run.status}, not ${wanted}`]]));
  const answer = run.answer.toLowerCase();
  if (expect.contains)
    scores.push(
      of(
        "contains",
        expect.contains.map((s) => [answer.includes(s.toLowerCase()), `the answer lacks ${quote(s)}`]),
      ),
    );
  if (expect.notContains)
    scores.push(
      of(
        "notContains",
        expect.notContains.map((s) => [!answer.includes(s.toLowerCase()), `the answer has ${quote(s)}`]),
      ),
    );
  if (expect.matches)
    scores.push(
      of(
        "matches",
        expect.matches.map((p) => [new RegExp(p, "i").test(run.answer), `the answer does not match /${p}/i`]),
      ),
    );
  if (expect.jsonSchema) scores.push(jsonScore(expect.jsonSchema, run.answer));
  if (expect.tools) {
    const names = new Set(run.toolCalls.map((c) => c.name));
    const checks: [boolean, string][] = [
      ...(expect.tools.called ?? []).map((t): [boolean, string] => [names.has(t), `${t} was not called`]),
      ...(expect.tools.notCalled ?? []).map((t): [boolean, string] => [!names.has(t), `${t} was called`]),
      ...Object.entries(expect.tools.arguments ?? {}).map(([tool, args]): [boolean, string] => [
        run.toolCalls.some((c) => c.name === tool && argumentsMatch(c.arguments, args)),
        `no call of ${tool} had ${JSON.stringify(args).slice(0, 200)}`,
      ]),
    ];
    scores.push(of("tools", checks));
  }
  if (expect.tree) {
    const count = run.tasks.length;
    const depth = Math.max(0, ...run.tasks.map((t) => t.depth));
    const { minTasks, maxTasks, maxDepth } = expect.tree;
    const checks: [boolean, string][] = [];
    if (minTasks !== undefined) checks.push([count >= minTasks, `${count} tasks, fewer than ${minTasks}`]);
    if (maxTasks !== undefined) checks.push([count <= maxTasks, `${count} tasks, more than ${maxTasks}`]);
    if (maxDepth !== undefined) checks.push([depth <= maxDepth, `depth ${depth}, deeper than ${maxDepth}`]);
    scores.push(of("tree", checks));
  }
  if (expect.elected)
    scores.push(
      of(
        "elected",
        Object.entries(expect.elected).map(([title, assistant]) => {
          const task = run.tasks.find((t) => t.title === title);
          if (!task) return [false, `no task is named ${quote(title)}`];
          return [
            task.assistant === assistant,
            `${quote(title)} went to ${task.assistant ?? "nobody"}, not ${assistant}`,
          ];
        }),
      ),
    );
  if (expect.budget) {
    const { maxTokens, maxCostUsd, maxWallMs } = expect.budget;
    const checks: [boolean, string][] = [];
    if (maxTokens !== undefined)
      checks.push([run.usage.tokens <= maxTokens, `${run.usage.tokens} tokens, more than ${maxTokens}`]);
    if (maxCostUsd !== undefined)
      checks.push([
        run.usage.unpricedCalls === 0 && run.usage.costUsd <= maxCostUsd,
        run.usage.unpricedCalls > 0
          ? `the cost is unknown (${run.usage.unpricedCalls} calls of a model without a price)`
          : `$${run.usage.costUsd} spent, more than $${maxCostUsd}`,
      ]);
    if (maxWallMs !== undefined)
      checks.push([run.wallMs <= maxWallMs, `${run.wallMs} ms, longer than ${maxWallMs} ms`]);
    scores.push(of("budget", checks));
  }
  if (expect.approval) {
    const asked = run.questions.filter(
      (q) => q.purpose === "confirm_risky_action" || q.purpose === "approve_plan",
    );
    scores.push(
      of("approval", [
        expect.approval === "needed"
          ? [asked.length > 0, "no approval was asked for"]
          : [asked.length === 0, `${asked.length} approval(s) were asked for`],
      ]),
    );
  }
  return scores;
}

function jsonScore(schema: Record<string, unknown>, answer: string): Score {
  let value: unknown;
  try {
    value = JSON.parse(answer);
  } catch {
    return { scorer: "jsonSchema", score: 0, reason: "the answer is not JSON" };
  }
  // The tools' checker (one JSON Schema engine for the project), on the answer as arguments.
  let check: ReturnType<typeof jsonSchemaChecker>;
  try {
    check = jsonSchemaChecker(schema, "expect.jsonSchema");
  } catch (e) {
    const issues = e instanceof ValidationError ? e.issues.join("; ") : (e as Error).message;
    return { scorer: "jsonSchema", score: 0, reason: `the case's schema is not valid: ${issues}` };
  }
  const problems = check(value as Record<string, unknown>);
  return problems.length === 0
    ? { scorer: "jsonSchema", score: 1, reason: "all held" }
    : { scorer: "jsonSchema", score: 0, reason: problems.join("; ").slice(0, 500) };
}

/** Whether every field given in `expected` is in `actual`, equal as JSON. */
function argumentsMatch(actual: Record<string, unknown>, expected: Record<string, unknown>): boolean {
  return Object.entries(expected).every(([k, v]) => JSON.stringify(actual[k]) === JSON.stringify(v));
}

/**
 * A scorer a team writes itself: a module whose default export is one function of the case and
 * what its run did, giving a score in [0, 1] (a number, or `{score, reason}`), at once or as a
 * promise. Its name is the module's file name. What it gives that is not such a score scores 0,
 * saying why; what it throws too.
 *
 *   // scorers/polite.ts
 *   export default ({ run }) => (/\bplease\b/i.test(run.answer) ? 1 : { score: 0, reason: "not polite" });
 */
export type ScorerFunction = (input: {
  case: { id: string; request: string };
  run: RunFacts;
}) => number | { score: number; reason?: string } | Promise<number | { score: number; reason?: string }>;

export interface CustomScorer {
  name: string;
  score: ScorerFunction;
}

export async function customScore(
  scorer: CustomScorer,
  input: Parameters<ScorerFunction>[0],
): Promise<Score> {
  let given: unknown;
  try {
    given = await scorer.score(input);
  } catch (e) {
    return {
      scorer: scorer.name,
      score: 0,
      reason: `the scorer threw: ${(e as Error)?.message ?? String(e)}`.slice(0, 500),
    };
  }
  const score = typeof given === "number" ? given : (given as { score?: unknown } | null)?.score;
  const reason =
    typeof given === "object" && given !== null ? (given as { reason?: unknown }).reason : undefined;
  if (typeof score !== "number" || !Number.isFinite(score) || score < 0 || score > 1)
    return {
      scorer: scorer.name,
      score: 0,
      reason: `the scorer gave ${JSON.stringify(given)?.slice(0, 100)}, not a score from 0 to 1`,
    };
  return {
    scorer: scorer.name,
    score,
    reason:
      typeof reason === "string" && reason
        ? reason.slice(0, 1000)
        : score === 1
          ? "all held"
          : "(no reason given)",
  };
}

/** A score as people read it: `87.5 %`. */
export const percent = (score: number): string => `${(score * 100).toFixed(1)} %`;

/** A run's mean over its scores (each scorer counts once). */
export const meanScore = (scores: readonly Score[]): number =>
  scores.length === 0 ? 0 : scores.reduce((n, s) => n + s.score, 0) / scores.length;
