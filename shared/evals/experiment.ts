import { setTimeout as sleep } from "node:timers/promises";
import type { Actor } from "../domain/events.ts";
import type { InteractionResource, Message } from "../domain/resources.ts";
import { isTerminal, type TaskStatus } from "../domain/task-state.ts";
import type { Engine } from "../engine/engine.ts";
import { MAX_TREE_TASKS, type TreeNode } from "../engine/task-tree.ts";
import { ConflictError } from "../kernel/errors.ts";
import type { Llm } from "../ports/llm.ts";
import { collectPages, type StateRecord, type StateStore } from "../ports/state-store.ts";
import type { CaseAnswers, EvalCase } from "./dataset.ts";
import { judgeScore } from "./judge.ts";
import { type CustomScorer, customScore, meanScore, type RunFacts, type Score, scoreRun } from "./scorers.ts";

/**
 * An experiment: every case of a dataset run on an engine (`repeat` times each, at most
 * `concurrency` at once), its questions answered by the case (never by a person), each run scored
 * (scorers.ts), and the whole stored in the state store, so that two experiments can be compared
 * (compare.ts) long after, on the runtime that ran them.
 *
 *   const result = await runExperiment(engine, cases, { tenant, dataset: "offsite.jsonl" });
 *   await storeExperiment(engine.deps.state, result);
 *
 * Stored as `eval-experiment#<id>` (the summary; parent `eval-experiments#<tenant>`) and one
 * `eval-run#<id>#<case>#<repeat>` per run (parent the experiment), so no record grows with the
 * dataset. A run's answer is kept to ANSWER_CHARS; its request stays in the tenant like any other.
 */
export const ANSWER_CHARS = 4000;
export const EVAL_ACTOR: Actor = { id: "user_eval", kind: "human" };

export interface RunResult {
  caseId: string;
  repeat: number;
  rootTaskId: string;
  status: RunFacts["status"];
  answer: string;
  scores: Score[];
  score: number;
  tokens: number;
  costUsd: number;
  unpricedCalls: number;
  wallMs: number;
}

export interface Experiment {
  id: string;
  tenant: string;
  dataset: string;
  /** What ran it: the model's id, and a label the caller gives (a team file, a branch). */
  model: string;
  label?: string;
  startedAt: string;
  durationMs: number;
  cases: number;
  repeat: number;
  /** The mean of every run's mean score. */
  score: number;
  /** Each scorer's mean over the runs it scored. */
  scorers: Record<string, number>;
  costUsd: number;
  unpricedCalls: number;
  tokens: number;
  runs: RunResult[];
  /** An experiment the runtime drives (driver.ts) is `running` until its last run is scored. Absent: done. */
  status?: "running" | "done" | "stopped";
  /** Who stopped a driven experiment, and when (it ends `stopped` once what ran has ended). */
  stopped?: { by: string; at: string };
  /** Who started a driven experiment (an actor id). */
  startedBy?: string;
  /** Of a running experiment: how many runs are scored so far, of how many. */
  progress?: { scored: number; runs: number };
}

export interface ExperimentOptions {
  tenant: string;
  dataset: string;
  model: string;
  label?: string;
  repeat?: number;
  concurrency?: number;
  /** How long one run may take before it is canceled and scored as a timeout (default 120 s). */
  timeoutMs?: number;
  /** Told of each run as it ends (progress). */
  onRun?: (run: RunResult, done: number, total: number) => void;
  /** The model that judges the cases with `expect.judge` (default: the engine's own). */
  judge?: Llm;
  /** Scorers the team wrote (scorers.ts CustomScorer): each scores every run. */
  scorers?: readonly CustomScorer[];
}

export async function runExperiment(
  engine: Engine,
  cases: readonly EvalCase[],
  options: ExperimentOptions,
): Promise<Experiment> {
  const repeat = options.repeat ?? 1;
  const started = engine.deps.clock();
  const jobs = cases.flatMap((c) => Array.from({ length: repeat }, (_, r) => ({ c, r: r + 1 })));
  const runs: RunResult[] = new Array(jobs.length);
  let next = 0;
  let done = 0;
  const worker = async () => {
    for (let i = next++; i < jobs.length; i = next++) {
      const { c, r } = jobs[i] as { c: EvalCase; r: number };
      const run = await runCase(engine, c, r, options);
      runs[i] = run;
      options.onRun?.(run, ++done, jobs.length);
    }
  };
  await Promise.all(
    Array.from({ length: Math.max(1, Math.min(options.concurrency ?? 4, jobs.length)) }, worker),
  );
  return {
    ...summarize(runs, {
      id: engine.deps.newId(),
      tenant: options.tenant,
      dataset: options.dataset,
      model: options.model,
      ...(options.label ? { label: options.label } : {}),
      startedAt: started.toISOString(),
      durationMs: engine.deps.clock().getTime() - started.getTime(),
      cases: cases.length,
      repeat,
    }),
    runs,
  };
}

type Totals = "score" | "scorers" | "costUsd" | "unpricedCalls" | "tokens";

/** An experiment's totals over its runs: the mean score, each scorer's mean, the cost and tokens. */
export function summarize<T extends Omit<Experiment, "runs" | Totals>>(
  runs: readonly RunResult[],
  base: T,
): T & Pick<Experiment, Totals> {
  const scorers: Record<string, number[]> = {};
  for (const run of runs)
    for (const s of run.scores) {
      scorers[s.scorer] ??= [];
      scorers[s.scorer]?.push(s.score);
    }
  const sum = (pick: (r: RunResult) => number) => runs.reduce((n, r) => n + pick(r), 0);
  return {
    ...base,
    score: runs.length ? sum((r) => r.score) / runs.length : 0,
    scorers: Object.fromEntries(
      Object.entries(scorers).map(([name, s]) => [name, s.reduce((a, b) => a + b, 0) / s.length]),
    ),
    costUsd: sum((r) => r.costUsd),
    unpricedCalls: sum((r) => r.unpricedCalls),
    tokens: sum((r) => r.tokens),
  };
}

async function runCase(
  engine: Engine,
  c: EvalCase,
  repeat: number,
  options: ExperimentOptions,
): Promise<RunResult> {
  const asker: Asker = { actor: EVAL_ACTOR, caller: { tenant: options.tenant, roles: [] } };
  const began = Date.now();
  const deadline = began + (options.timeoutMs ?? 120_000);
  // The history's requests first, each to its end, in one conversation; then the case's own.
  let conversationUrn: string | undefined;
  let run: Driven | undefined;
  for (const text of [...(c.history ?? []), c.request]) {
    run = await driveRequest(
      engine,
      asker,
      c,
      { text, ...(conversationUrn ? { conversationUrn } : {}) },
      deadline,
    );
    conversationUrn = run.conversationUrn;
    if (!isTerminal(run.status as TaskStatus)) break; // timed out: the rest is not run
  }
  const { rootTaskId, status, questions } = run as Driven;
  return scoreCase(
    engine,
    asker,
    c,
    { rootTaskId, status, questions, wallMs: Date.now() - began, repeat },
    options,
  );
}

/** Who an experiment's requests are submitted and answered as, and the tenant and roles it has. */
export interface Asker {
  actor: Actor;
  caller: { tenant: string; roles: string[] };
}

interface Driven {
  conversationUrn: string;
  rootTaskId: string;
  status: RunFacts["status"];
  questions: RunFacts["questions"];
}

/** Submits one request and waits for its end, answering its questions as the case says; canceled at `deadline`. */
async function driveRequest(
  engine: Engine,
  asker: Asker,
  c: EvalCase,
  message: { text: string; conversationUrn?: string },
  deadline: number,
): Promise<Driven> {
  const { rootTaskId, conversationUrn } = await engine.submit({
    tenant: asker.caller.tenant,
    actor: asker.actor,
    roles: asker.caller.roles,
    ...message,
    ...(c.mode ? { mode: c.mode } : {}),
  });
  const questions: RunFacts["questions"] = [];
  const answered = new Set<string>();
  let lookedAt = 0;
  for (;;) {
    const status = (await engine.result(rootTaskId, asker)).view?.status ?? "open";
    if (isTerminal(status)) return { conversationUrn, rootTaskId, status, questions };
    if (Date.now() > deadline) {
      await engine.cancel(
        rootTaskId,
        asker.actor,
        "the experiment's time for the case ran out",
        asker.caller,
      );
      return { conversationUrn, rootTaskId, status: "timeout", questions };
    }
    // A question may wait anywhere below the root (a leaf's risky call): looked for every 100 ms.
    if (Date.now() - lookedAt >= 100) {
      lookedAt = Date.now();
      questions.push(...(await answerQuestions(engine, asker, rootTaskId, c, answered)));
    }
    await sleep(15);
  }
}

/**
 * Answers the questions waiting in a run's tree as the case says (never a person), each once:
 * `answered` keeps the ids answered so far; one answered elsewhere already (a conflict) is passed.
 * Returns what was answered now.
 */
export async function answerQuestions(
  engine: Engine,
  asker: Asker,
  rootTaskId: string,
  c: EvalCase,
  answered: Set<string> = new Set(),
): Promise<RunFacts["questions"]> {
  const out: RunFacts["questions"] = [];
  for (const q of (await engine.pendingInteractions(rootTaskId, asker)) ?? []) {
    if (answered.has(q.meta.id)) continue;
    answered.add(q.meta.id);
    const response = answerFor(q, c.answers ?? {});
    out.push({
      id: q.meta.id,
      purpose: q.purpose,
      answer: response.selectedOptionId ?? response.inputValue ?? "",
    });
    try {
      await engine.respond(q.meta.id, response, asker.actor, asker.caller);
    } catch (e) {
      if (!(e instanceof ConflictError)) throw e; // answered already: go on
    }
  }
  return out;
}

/** A finished run scored: the case's expectations, the team's scorers, and the judge when the case asks. */
export async function scoreCase(
  engine: Engine,
  asker: Asker,
  c: EvalCase,
  run: {
    rootTaskId: string;
    status: RunFacts["status"];
    questions: RunFacts["questions"];
    wallMs: number;
    repeat: number;
  },
  options: Pick<ExperimentOptions, "judge" | "scorers">,
): Promise<RunResult> {
  const facts = await factsOf(engine, run.rootTaskId, asker, run.status, run.questions, run.wallMs);
  const scores = scoreRun(c.expect, facts);
  for (const scorer of options.scorers ?? [])
    scores.push(await customScore(scorer, { case: { id: c.id, request: c.request }, run: facts }));
  if (c.expect.judge)
    scores.push(
      await judgeScore(options.judge ?? engine.deps.llm, {
        request: c.request,
        answer: facts.answer,
        criteria: c.expect.judge.criteria,
      }),
    );
  return {
    caseId: c.id,
    repeat: run.repeat,
    rootTaskId: run.rootTaskId,
    status: run.status,
    answer: facts.answer.slice(0, ANSWER_CHARS),
    scores,
    score: meanScore(scores),
    tokens: facts.usage.tokens,
    costUsd: facts.usage.costUsd,
    unpricedCalls: facts.usage.unpricedCalls,
    wallMs: facts.wallMs,
  };
}

/** The case's answer to a question: an option (by id, label, or `first`), or a value. */
export function answerFor(
  q: InteractionResource,
  answers: CaseAnswers,
): { selectedOptionId?: string; inputValue?: string } {
  const given = answers[q.purpose as keyof CaseAnswers];
  const options = q.options ?? [];
  if (options.length === 0) return { inputValue: given ?? "" };
  const defaults: Record<string, string> = { approve_plan: "approve", confirm_risky_action: "approve" };
  const wanted = given ?? defaults[q.purpose] ?? "first";
  const option =
    wanted === "first"
      ? options[0]
      : options.find((o) => o.id === wanted || o.label.toLowerCase() === wanted.toLowerCase());
  // A lazy plan answered with a plan (JSON) approves it as edited.
  if (!option && q.purpose === "approve_plan") return { selectedOptionId: "approve", inputValue: wanted };
  return { selectedOptionId: (option ?? options[0])?.id as string };
}

async function factsOf(
  engine: Engine,
  rootTaskId: string,
  asker: Asker,
  status: RunFacts["status"],
  questions: RunFacts["questions"],
  wallMs: number,
): Promise<RunFacts> {
  const [{ output }, tree, messages, interactions] = await Promise.all([
    engine.result(rootTaskId, asker),
    engine.tree(rootTaskId, asker, MAX_TREE_TASKS),
    engine.deps.resources.descendants(rootTaskId, "common.Message") as Promise<Message[]>,
    engine.deps.resources.descendants(rootTaskId, "uip.Interaction") as Promise<InteractionResource[]>,
  ]);
  // The questions the request asked, as it keeps them (not as whoever answered them remembers:
  // a process that answered one and died before noting it would forget it was asked).
  const known = new Map(questions.map((q) => [q.id, q]));
  const asked: RunFacts["questions"] = interactions.map(
    (i) =>
      known.get(i.meta.id) ?? {
        id: i.meta.id,
        purpose: i.purpose,
        answer: i.response?.selectedOptionId ?? i.response?.inputValue ?? "",
      },
  );
  const tasks: RunFacts["tasks"] = [];
  const walk = (n: TreeNode, depth: number) => {
    tasks.push({ title: n.title, depth, assistant: n.assistant?.name });
    for (const child of n.children) walk(child, depth + 1);
  };
  if (tree) walk(tree.root, 1);
  const usage = tree?.root.usage ?? { tokens: 0, costUsd: 0, unpricedCalls: 0 };
  return {
    status,
    answer: output ?? "",
    tasks,
    toolCalls: messages.flatMap((m) =>
      (m.toolCalls ?? []).map((t) => ({ name: t.name, arguments: t.arguments })),
    ),
    usage: { tokens: usage.tokens, costUsd: usage.costUsd, unpricedCalls: usage.unpricedCalls },
    wallMs,
    questions: asked,
  };
}

export const EXPERIMENT_KIND = "eval-experiment";
export const RUN_KIND = "eval-run";
export const experimentKey = (id: string) => `${EXPERIMENT_KIND}#${id}`;
export const experimentsOf = (tenant: string) => `eval-experiments#${tenant}`;
export const runKey = (id: string, caseId: string, repeat: number) => `${RUN_KIND}#${id}#${caseId}#${repeat}`;

/** Stores an experiment: its summary, then a record per run (written in transactions of 50). */
export async function storeExperiment(state: StateStore, e: Experiment): Promise<void> {
  const at = new Date().toISOString();
  const { runs, ...summary } = e;
  const ops = runs.map((r) => ({
    op: "put" as const,
    record: {
      key: runKey(e.id, r.caseId, r.repeat),
      kind: RUN_KIND,
      parent: experimentKey(e.id),
      updatedAt: at,
      data: r,
    },
    expectedVersion: 0,
  }));
  for (let i = 0; i < ops.length; i += 50) await state.transact(ops.slice(i, i + 50));
  await state.transact([
    {
      op: "put",
      record: {
        key: experimentKey(e.id),
        kind: EXPERIMENT_KIND,
        parent: experimentsOf(e.tenant),
        updatedAt: at,
        data: summary,
      },
      expectedVersion: 0,
    },
  ]);
}

/** The tenant's experiments (summaries, without runs), oldest first. */
export async function listExperiments(
  state: StateStore,
  tenant: string,
): Promise<Omit<Experiment, "runs">[]> {
  const records = await collectPages((cursor) =>
    state.byParent<Omit<Experiment, "runs">>(experimentsOf(tenant), {
      limit: 500,
      ...(cursor ? { cursor } : {}),
    }),
  );
  return records.map((r) => r.data);
}

/**
 * An experiment's run records. An index (DynamoDB's) may list a run as it was before it was
 * scored: when at most `fresh` are listed so, they are read from their own records (at once).
 */
export async function listRuns<T extends { state?: string }>(
  state: StateStore,
  experimentId: string,
  fresh: number,
): Promise<StateRecord<T>[]> {
  const runs = await collectPages((cursor) =>
    state.byParent<T>(experimentKey(experimentId), { limit: 500, ...(cursor ? { cursor } : {}) }),
  );
  const stale = runs.flatMap((r, i) => (r.data.state !== undefined && r.data.state !== "scored" ? [i] : []));
  if (stale.length > 0 && stale.length <= fresh) {
    const reread = await Promise.all(stale.map((i) => state.get<T>((runs[i] as StateRecord<T>).key)));
    for (const [n, i] of stale.entries()) runs[i] = reread[n] ?? (runs[i] as StateRecord<T>);
  }
  return runs;
}

/** One experiment with its runs, or undefined; `id` may be the id's last characters (as `ls` shows them). */
export async function loadExperiment(
  state: StateStore,
  tenant: string,
  id: string,
): Promise<Experiment | undefined> {
  let summary = (await state.get<Omit<Experiment, "runs">>(experimentKey(id)))?.data;
  if (!summary) {
    const matching = (await listExperiments(state, tenant)).filter((e) => e.id.endsWith(id));
    if (matching.length !== 1) return undefined;
    summary = matching[0];
  }
  if (!summary || summary.tenant !== tenant) return undefined;
  // A driven experiment's runs not scored yet (driver.ts) are counted, not listed.
  const all = (await listRuns<RunResult & { state?: string }>(state, summary.id, 100)).map((r) => r.data);
  const runs = all
    .filter((r) => r.state === undefined || r.state === "scored")
    .map(({ state: _, ...r }) => r as RunResult);
  if (summary.status !== "running") return { ...summary, runs };
  return {
    ...summary,
    ...summarize(runs, summary),
    progress: { scored: runs.length, runs: all.length },
    runs,
  };
}
