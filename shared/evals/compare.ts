import type { Experiment, RunResult } from "./experiment.ts";

/**
 * Two experiments side by side: per case and per scorer, the score before (`a`) and after (`b`),
 * each the mean over the case's repeats, and what got worse (a regression) or better. A case or a
 * scorer only one side has is listed apart, never counted as a change.
 *
 *   const c = compareExperiments(before, after);
 *   if (c.regressions.length > 0) process.exitCode = 1;      // --fail-on-regression
 */
export interface ScoreChange {
  caseId: string;
  scorer: string;
  before: number;
  after: number;
  /** The reason the after side gives (why it scored what it did). */
  reason: string;
}

export interface Comparison {
  a: { id: string; score: number; costUsd: number; durationMs: number };
  b: { id: string; score: number; costUsd: number; durationMs: number };
  /** Each scorer's mean, before and after. */
  scorers: { scorer: string; before: number | undefined; after: number | undefined }[];
  regressions: ScoreChange[];
  improvements: ScoreChange[];
  /** Cases only one side ran. */
  onlyIn: { a: string[]; b: string[] };
}

/** Two scores closer than this are the same (a mean over repeats is not exact). */
const SAME = 1e-9;

export function compareExperiments(a: Experiment, b: Experiment): Comparison {
  const before = byCase(a.runs);
  const after = byCase(b.runs);
  const regressions: ScoreChange[] = [];
  const improvements: ScoreChange[] = [];
  for (const [caseId, then] of before) {
    const now = after.get(caseId);
    if (!now) continue;
    for (const [scorer, was] of then) {
      const is = now.get(scorer);
      if (!is) continue;
      const change = { caseId, scorer, before: was.score, after: is.score, reason: is.reason };
      if (is.score < was.score - SAME) regressions.push(change);
      else if (is.score > was.score + SAME) improvements.push(change);
    }
  }
  const names = [...new Set([...Object.keys(a.scorers), ...Object.keys(b.scorers)])].sort();
  const side = (e: Experiment) => ({
    id: e.id,
    score: e.score,
    costUsd: e.costUsd,
    durationMs: e.durationMs,
  });
  return {
    a: side(a),
    b: side(b),
    scorers: names.map((scorer) => ({ scorer, before: a.scorers[scorer], after: b.scorers[scorer] })),
    regressions,
    improvements,
    onlyIn: {
      a: [...before.keys()].filter((k) => !after.has(k)),
      b: [...after.keys()].filter((k) => !before.has(k)),
    },
  };
}

/** Case -> scorer -> its mean over the case's repeats, with the last reason given. */
function byCase(runs: readonly RunResult[]): Map<string, Map<string, { score: number; reason: string }>> {
  const sums = new Map<string, Map<string, { total: number; n: number; reason: string }>>();
  for (const run of runs) {
    const scorers = sums.get(run.caseId) ?? new Map();
    sums.set(run.caseId, scorers);
    for (const s of run.scores) {
      const kept = scorers.get(s.scorer) ?? { total: 0, n: 0, reason: s.reason };
      scorers.set(s.scorer, {
        total: kept.total + s.score,
        n: kept.n + 1,
        reason: s.score < 1 ? s.reason : kept.reason,
      });
    }
  }
  return new Map(
    [...sums].map(([caseId, scorers]) => [
      caseId,
      new Map([...scorers].map(([name, v]) => [name, { score: v.total / v.n, reason: v.reason }])),
    ]),
  );
}
