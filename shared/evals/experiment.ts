import { setTimeout as sleep } from "node:timers/promises";
import type { Actor } from "../domain/events.ts";
import type { InteractionResource, Message } from "../domain/resources.ts";
import { isTerminal } from "../domain/task-state.ts";
import type { Engine } from "../engine/engine.ts";
import { MAX_TREE_TASKS, type TreeNode } from "../engine/task-tree.ts";
import { ConflictError } from "../kernel/errors.ts";
import type { Llm } from "../ports/llm.ts";
import type { StateRecord, StateStore } from "../ports/state-store.ts";
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
  const scorers: Record<string, number[]> = {};
  for (const run of runs)
    for (const s of run.scores) {
      scorers[s.scorer] ??= [];
      scorers[s.scorer]?.push(s.score);
    }
  const sum = (pick: (r: RunResult) => number) => runs.reduce((n, r) => n + pick(r), 0);
  return {
    id: engine.deps.newId(),
    tenant: options.tenant,
    dataset: options.dataset,
    model: options.model,
    ...(options.label ? { label: options.label } : {}),
    startedAt: started.toISOString(),
    durationMs: engine.deps.clock().getTime() - started.getTime(),
    cases: cases.length,
    repeat,
    score: runs.length ? sum((r) => r.score) / runs.length : 0,
    scorers: Object.fromEntries(
      Object.entries(scorers).map(([name, s]) => [name, s.reduce((a, b) => a + b, 0) / s.length]),
    ),
    costUsd: sum((r) => r.costUsd),
    unpricedCalls: sum((r) => r.unpricedCalls),
    tokens: sum((r) => r.tokens),
    runs,
  };
}

async function runCase(
  engine: Engine,
  c: EvalCase,
  repeat: number,
  options: ExperimentOptions,
): Promise<RunResult> {
  const asker = { actor: EVAL_ACTOR, caller: { tenant: options.tenant, roles: [] } };
  const began = Date.now();
  const { rootTaskId } = await engine.submit({
    tenant: options.tenant,
    actor: EVAL_ACTOR,
    text: c.request,
    ...(c.mode ? { mode: c.mode } : {}),
  });
  const questions: RunFacts["questions"] = [];
  const answered = new Set<string>();
  const deadline = began + (options.timeoutMs ?? 120_000);
  let status: RunFacts["status"] = "open";
  let lookedAt = 0;
  for (;;) {
    const view = (await engine.result(rootTaskId, asker)).view;
    status = view?.status ?? "open";
    if (isTerminal(status)) break;
    if (Date.now() > deadline) {
      await engine.cancel(rootTaskId, EVAL_ACTOR, "the experiment's time for the case ran out", asker.caller);
      status = "timeout";
      break;
    }
    // A question may wait anywhere below the root (a leaf's risky call): looked for every 100 ms.
    if (Date.now() - lookedAt >= 100) {
      lookedAt = Date.now();
      for (const q of (await engine.pendingInteractions(rootTaskId, asker)) ?? []) {
        if (answered.has(q.meta.id)) continue;
        answered.add(q.meta.id);
        const response = answerFor(q, c.answers ?? {});
        questions.push({
          purpose: q.purpose,
          answer: response.selectedOptionId ?? response.inputValue ?? "",
        });
        try {
          await engine.respond(q.meta.id, response, EVAL_ACTOR, asker.caller);
        } catch (e) {
          if (!(e instanceof ConflictError)) throw e; // answered already: go on
        }
      }
    }
    await sleep(15);
  }
  const facts = await factsOf(engine, rootTaskId, asker, status, questions, Date.now() - began);
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
    repeat,
    rootTaskId,
    status,
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
  asker: { actor: Actor; caller: { tenant: string; roles: string[] } },
  status: RunFacts["status"],
  questions: RunFacts["questions"],
  wallMs: number,
): Promise<RunFacts> {
  const [{ output }, tree, messages] = await Promise.all([
    engine.result(rootTaskId, asker),
    engine.tree(rootTaskId, asker, MAX_TREE_TASKS),
    engine.deps.resources.descendants(rootTaskId, "common.Message") as Promise<Message[]>,
  ]);
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
    questions,
  };
}

const EXPERIMENT_KIND = "eval-experiment";
const RUN_KIND = "eval-run";
const experimentKey = (id: string) => `${EXPERIMENT_KIND}#${id}`;
const listOf = (tenant: string) => `eval-experiments#${tenant}`;

/** Stores an experiment: its summary, then a record per run (written in transactions of 50). */
export async function storeExperiment(state: StateStore, e: Experiment): Promise<void> {
  const at = new Date().toISOString();
  const { runs, ...summary } = e;
  const ops = runs.map((r) => ({
    op: "put" as const,
    record: {
      key: `${RUN_KIND}#${e.id}#${r.caseId}#${r.repeat}`,
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
        parent: listOf(e.tenant),
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
  const out: Omit<Experiment, "runs">[] = [];
  let cursor: string | undefined;
  do {
    const page = await state.byParent<Omit<Experiment, "runs">>(listOf(tenant), {
      limit: 500,
      ...(cursor ? { cursor } : {}),
    });
    out.push(...page.items.map((r) => r.data));
    cursor = page.cursor;
  } while (cursor);
  return out;
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
  const runs: RunResult[] = [];
  let cursor: string | undefined;
  do {
    const page = await state.byParent<RunResult>(experimentKey(summary.id), {
      limit: 500,
      ...(cursor ? { cursor } : {}),
    });
    runs.push(...page.items.map((r: StateRecord<RunResult>) => r.data));
    cursor = page.cursor;
  } while (cursor);
  return { ...summary, runs };
}
