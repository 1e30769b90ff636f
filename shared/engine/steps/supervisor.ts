import * as z from "zod";
import { DEFAULT_BUDGETS } from "../../domain/budgets.ts";
import {
  formatIssues,
  type TaskResource,
  type TaskSpec,
  TaskSpecSchema,
  toDescription,
  withMeta,
} from "../../domain/resources.ts";
import { isTerminal } from "../../domain/task-state.ts";
import type { TaskView } from "../../domain/task-view.ts";
import { lastElement, parentUrn } from "../../domain/urn.ts";
import { ATTR, inSpan, tracingOn, withinTask } from "../../kernel/tracing.ts";
import type { LlmToolSpec } from "../../ports/llm.ts";
import { mayAllHaveEnded } from "../../store/task-log.ts";
import { claim, finishClaim } from "../claims.ts";
import type { EngineDeps } from "../context.ts";
import { sendReadyAsAllowed } from "../leaf-slots.ts";
import { callModel, LastingModelFailure, modelFailureReason } from "../model-calls.ts";
import {
  askStrategy,
  chosenStrategy,
  correctiveProblems,
  personDecides,
  StrategySchema,
  strategyQuestionOf,
  unfinished,
  waysForward,
} from "../turn/ask-strategy.ts";
import { recordUsage } from "../usage.ts";
import { childrenOf } from "./children.ts";
import { completeTask, failTask, outputOf } from "./outcome.ts";
import { materialiseUnder } from "./planner.ts";

/**
 * Supervisory mode: a parent reacts to its children's outputs (RESOURCE_PUT of a child's `output`
 * Message, i.e. under the parent's URN prefix), never by polling. When every child of the current
 * round has ended, the parent's result is judged against its own `evaluation` exactly once per
 * round (a claim per round), and either completes, gets corrective subtasks for another round, or
 * fails clearly when no way forward was proposed. When the evaluator proposes more than one way
 * forward, or the corrective rounds are spent, a person chooses (choose_strategy, ask-strategy.ts).
 */
const EVAL_CLAIM_STALE_MS = 5 * 60_000;

const EvaluationSchema = z.object({
  passed: z.boolean(),
  reason: z.string().min(1),
  /** The combined result for the person, when passed. */
  answer: z.string().optional(),
  corrective_subtasks: z.array(TaskSpecSchema).optional(),
  /** Other ways forward than corrective_subtasks: with any, a person chooses (ask-strategy.ts). */
  alternative_strategies: z.array(StrategySchema).max(5).optional(),
});
type Evaluation = z.infer<typeof EvaluationSchema>;

export const EVALUATE_TOOL: LlmToolSpec = {
  name: "report_evaluation",
  description:
    "Report whether the subtasks' results together meet the task's evaluation criteria. If they do, give the " +
    "combined answer. If not, say why and list corrective subtasks that would fix it; if there are other " +
    "reasonable ways forward, list them as alternative_strategies (a person will choose).",
  parameters: (() => {
    const { $schema: _s, ...schema } = z.toJSONSchema(EvaluationSchema) as Record<string, unknown>;
    return schema;
  })(),
};

/** Handles a RESOURCE_PUT: if it is a child's output, the child's parent task may be ready to judge. */
export async function onResourcePut(
  deps: EngineDeps,
  detail: { urn?: unknown; name?: unknown },
): Promise<void> {
  if (detail.name !== "output" || typeof detail.urn !== "string") return;
  const child = parentUrn(detail.urn);
  const parent = child && parentUrn(child);
  if (!parent || lastElement(parent).type !== "Task") return;
  await supervise(deps, parent);
}

export async function supervise(deps: EngineDeps, parentId: string): Promise<void> {
  const view = await deps.tasks.view(parentId);
  if (view?.status !== "in_progress") return;
  // Most completions find siblings still running: the counts say so without listing them all.
  const counts = await deps.tasks.childCounts(parentId);
  if (!mayAllHaveEnded(counts)) return;
  // Decided on the children's own records, not on the index, which may not show the last ends yet.
  const children = await childrenOf(deps, parentId, counts);
  if (children.length === 0 || !children.every((c) => isTerminal(c.status))) return;

  // What this round's judgment reads (a stored evaluation, the children's outputs, a question of
  // how the round goes on) is read beside the parent and its children's tasks, which say which
  // round it is: the first round's evaluation and question are read on the guess that it is the
  // first (most are), a later one's once known.
  const outputs = Promise.all(children.map(async (c) => [c.taskId, await outputOf(deps, c.taskId)] as const));
  const firstStored = storedEvaluation(deps, parentId, 0);
  const firstQuestion = strategyQuestionOf(deps, parentId, 0);
  outputs.catch(() => {}); // awaited when judged (roundReads); a round not judged here leaves them
  firstStored.catch(() => {});
  firstQuestion.catch(() => {}); // awaited by chosenStrategy (a first round)
  const [parent, childTasks] = (await Promise.all([
    deps.resources.getAs("plan.Task", parentId),
    deps.resources.getMany(children.map((c) => c.taskId)),
  ])) as [TaskResource, (TaskResource | undefined)[]];
  const round = Math.max(0, ...childTasks.map((t) => t?.round ?? 0));
  const reads = roundReads(round === 0 ? firstStored : storedEvaluation(deps, parentId, round), outputs);
  reads.catch(() => {}); // awaited when judged; a round that is not judged here leaves it
  // A person was asked how this round goes on: their answer is applied once (ask-strategy.ts).
  const evaluationOf = (r: number) => evaluate(deps, parent, children, r, r === round ? reads : undefined); // stored for an earlier round
  const asked = round === 0 ? firstQuestion : undefined;
  if (await chosenStrategy(deps, parent, round, evaluationOf, () => combined(deps, children), asked)) return;
  if (await unfinishedCorrection(deps, parent, round, evaluationOf)) return;
  const claimKey = `eval#${parentId}#${round}`;
  if (!(await claim(deps, claimKey, EVAL_CLAIM_STALE_MS))) return;

  let evaluation: Evaluation;
  try {
    evaluation = await evaluationOf(round);
  } catch (error) {
    if (!(error instanceof LastingModelFailure)) throw error;
    await failTask(deps, parentId, modelFailureReason("The model could not evaluate the subtasks", error));
    await finishClaim(deps, claimKey);
    return;
  }
  const maxRounds = parent.budgets.maxCorrectiveRounds ?? DEFAULT_BUDGETS.maxCorrectiveRounds;
  if (!evaluation.passed && personDecides(waysForward(evaluation), round, maxRounds)) {
    await askStrategy(deps, parent, round, maxRounds, evaluation);
  } else if (evaluation.passed) {
    // The files of its children are the parent's (up to the request's root, which A2A answers with).
    const artifacts = [...new Set(children.flatMap((c) => c.artifacts ?? []))].slice(0, 100);
    await completeTask(
      deps,
      parentId,
      evaluation.answer ?? (await combined(deps, children)),
      parent.election?.assistant,
      undefined,
      artifacts.length ? { artifacts } : {},
    );
  } else if (round < maxRounds && evaluation.corrective_subtasks?.length) {
    const problems = correctiveProblems(parent, evaluation.corrective_subtasks);
    if (problems.length) {
      await failTask(
        deps,
        parentId,
        `round ${round} failed (${evaluation.reason}) and the corrective plan was invalid: ${problems.join("; ")}`,
      );
    } else {
      await correct(deps, parent, round + 1, evaluation.corrective_subtasks);
    }
  } else {
    const why =
      round >= maxRounds
        ? `after ${round} corrective round(s), the limit`
        : "and no corrective subtasks were proposed";
    await failTask(deps, parentId, `${evaluation.reason} (${why})`);
  }
  await finishClaim(deps, claimKey);
}

async function correct(deps: EngineDeps, parent: TaskResource, round: number, specs: TaskSpec[]) {
  await sendReadyAsAllowed(deps, await materialiseUnder(deps, specs, parent, round));
}

/**
 * The corrective round that started this round, cut short by a crash (its evaluation's claim never
 * finished, so some of its subtasks may never have been made): made whole now, before this round is
 * judged. Making it again writes the same tasks (deterministic URNs) and sends the same commands.
 */
async function unfinishedCorrection(
  deps: EngineDeps,
  parent: TaskResource,
  round: number,
  evaluationOf: (round: number) => Promise<Evaluation>,
): Promise<boolean> {
  const key = `eval#${parent.meta.id}#${round - 1}`;
  if (round === 0 || !(await unfinished(deps, key))) return false;
  if (!(await claim(deps, key, EVAL_CLAIM_STALE_MS))) return true; // its holder is still at it
  const earlier = await evaluationOf(round - 1);
  const maxRounds = parent.budgets.maxCorrectiveRounds ?? DEFAULT_BUDGETS.maxCorrectiveRounds;
  const automatic = !personDecides(waysForward(earlier), round - 1, maxRounds);
  const remade = !earlier.passed && automatic && (earlier.corrective_subtasks?.length ?? 0) > 0;
  if (remade) await correct(deps, parent, round, earlier.corrective_subtasks ?? []);
  await finishClaim(deps, key);
  return remade; // else (a person chose how it went on) this round is judged now
}

interface RoundReads {
  /** The round's evaluation, stored by an earlier judgment of it (a crash after the model's answer). */
  stored: Awaited<ReturnType<typeof storedEvaluation>>;
  /** Each child's output, by task. */
  outputs: Map<string, string | undefined>;
}

const evaluationMeta = (parentId: string, round: number) =>
  withMeta({ type: "common.Message", name: `evaluation-${round}`, parent: parentId });

const storedEvaluation = (deps: EngineDeps, parentId: string, round: number) =>
  deps.resources.getAs("common.Message", evaluationMeta(parentId, round).id);

async function roundReads(
  stored: ReturnType<typeof storedEvaluation>,
  outputs: Promise<(readonly [string, string | undefined])[]>,
): Promise<RoundReads> {
  const [evaluation, read] = await Promise.all([stored, outputs]);
  return { stored: evaluation, outputs: new Map(read) };
}

/** The stored evaluation of this round, or a new one from the model (stored before it is acted on). */
async function evaluate(
  deps: EngineDeps,
  parent: TaskResource,
  children: TaskView[],
  round: number,
  prefetched?: Promise<RoundReads>,
): Promise<Evaluation> {
  const meta = evaluationMeta(parent.meta.id, round);
  const read = prefetched ? await prefetched : undefined;
  const stored = read ? read.stored : await storedEvaluation(deps, parent.meta.id, round);
  const storedArgs = stored?.toolCalls?.[0]?.arguments;
  if (storedArgs) return EvaluationSchema.parse(storedArgs);

  // The evaluation's spans are the parent task's (its step may have been woken by any child's end).
  const view = tracingOn() ? await deps.tasks.view(parent.meta.id) : undefined;
  return withinTask(view, () =>
    inSpan(
      "evaluate",
      {
        attributes: {
          [ATTR.taskUrn]: parent.meta.id,
          [ATTR.round]: round,
          "arbor.evaluation.children": children.length,
        },
      },
      async (span) => {
        const evaluation = await judge(deps, parent, children, round, meta, read?.outputs);
        span.set("arbor.evaluation.passed", evaluation.passed);
        return evaluation;
      },
    ),
  );
}

/** Asks the model to judge the children's results against the parent's criteria, and stores its answer. */
async function judge(
  deps: EngineDeps,
  parent: TaskResource,
  children: TaskView[],
  round: number,
  meta: ReturnType<typeof withMeta>,
  outputs?: Map<string, string | undefined>,
): Promise<Evaluation> {
  // In a fixed order (by title), not the children's keys (which differ from request to request):
  // the same work is judged from the same prompt, run after run (a replay finds it: shared/evals/).
  const ordered = [...children].sort(
    (a, b) => a.title.localeCompare(b.title) || a.taskId.localeCompare(b.taskId),
  );
  const results = await Promise.all(
    ordered.map(
      async (c) =>
        `## ${c.title} [${c.status}]\n${(outputs?.has(c.taskId) ? outputs.get(c.taskId) : await outputOf(deps, c.taskId)) ?? c.failureReason ?? "(no output)"}`,
    ),
  );
  const prompt = [
    `# Task: ${parent.meta.name}`,
    toDescription(parent.meta),
    `# Evaluation criteria\n${parent.meta.evaluation ?? "The subtasks' results together accomplish the task's purpose."}`,
    `# Results of the subtasks (round ${round})`,
    ...results,
  ].join("\n\n");
  const response = await callModel(deps, {
    system: "You judge work against its evaluation criteria. Call report_evaluation exactly once.",
    messages: [{ role: "user", content: prompt }],
    tools: [EVALUATE_TOOL],
    toolChoice: { name: EVALUATE_TOOL.name },
  });
  deps.faults?.hit("after-llm", "evaluate");
  const call = response.toolCalls.find((c) => c.name === EVALUATE_TOOL.name);
  const parsed = EvaluationSchema.safeParse(call?.arguments);
  const evaluation: Evaluation = parsed.success
    ? parsed.data
    : {
        passed: false,
        reason: `the evaluation was unusable: ${call ? formatIssues(parsed.error).join("; ") : "no report_evaluation call"}`,
      };
  // The verdict and what it cost, at once (a crash between: a judgment asked again is counted again).
  await Promise.all([
    deps.resources.put({
      meta,
      role: "assistant",
      toolCalls: [{ id: call?.id ?? `evaluation-${round}`, name: EVALUATE_TOOL.name, arguments: evaluation }],
    }),
    recordUsage(deps, parent.meta.id, response, false),
  ]);
  return evaluation;
}

async function combined(deps: EngineDeps, children: TaskView[]): Promise<string> {
  const parts = await Promise.all(
    children
      .filter((c) => c.status === "done")
      .map(async (c) => `${c.title}: ${(await outputOf(deps, c.taskId)) ?? ""}`),
  );
  return parts.join("\n");
}
