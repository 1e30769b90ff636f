import * as z from "zod";
import { DEFAULT_BUDGETS } from "../../domain/budgets.ts";
import { actorLabel } from "../../domain/events.ts";
import {
  type InteractionResource,
  type TaskResource,
  type TaskSpec,
  TaskSpecSchema,
} from "../../domain/resources.ts";
import { taskDepth } from "../../domain/urn.ts";
import { claim, finishClaim } from "../claims.ts";
import type { EngineDeps } from "../context.ts";
import { announceStored, interactionMeta, requestInteraction } from "../interactions.ts";
import { sendReadyAsAllowed } from "../leaf-slots.ts";
import { completeTask, failTask } from "../steps/outcome.ts";
import { checkPlan, materialiseUnder } from "../steps/planner.ts";

/**
 * `choose_strategy`: after a failed round, a parent asks a person how to go on, instead of going on
 * by itself, when the evaluator proposed more than one way forward (its corrective subtasks and its
 * `alternative_strategies`), or when the corrective-round budget is spent. The question (`select`,
 * named `strategy-<round>`) offers one option per valid strategy (`strategy-<n>`), "accept the
 * result as it is" (`accept`: the parent completes with its children's results) and "stop here"
 * (`stop`: the parent fails, saying who stopped it and why the round failed). The parent waits in
 * `awaiting_user` with nothing running.
 *
 * The rule that makes the answer take effect exactly once: the answer of round N is applied only by
 * the supervise step of round N (children of round N all ended, parent in progress), under the
 * claim `strategy#<parent>#<N>`, which is finished once it is applied and never taken again. So a
 * resume delivered twice, a resume that comes after the round moved on (new children, or the parent
 * ended), and the watchdog driving a parent whose resume was lost all apply it at most once; two
 * answers racing are one answer already (Engine.respond's claim). A crash while applying leaves the
 * claim held: it is taken over (stale, or at once by a sole worker), and applying again writes the
 * same tasks (deterministic URNs: `r<N+1>:<name>`) and sends the same commands.
 */
export const StrategySchema = z.object({
  name: z.string().min(1).max(100),
  why: z.string().min(1).max(2000),
  corrective_subtasks: z.array(TaskSpecSchema).min(1).max(20),
});
export type Strategy = z.infer<typeof StrategySchema>;

export const ACCEPT = "accept";
export const STOP = "stop";
const strategyQuestion = (round: number) => `strategy-${round}`;
const strategyClaim = (parentId: string, round: number) => `strategy#${parentId}#${round}`;
const STRATEGY_CLAIM_STALE_MS = 5 * 60_000;

interface Evaluated {
  reason: string;
  corrective_subtasks?: Strategy["corrective_subtasks"] | undefined;
  alternative_strategies?: Strategy[] | undefined;
}

/** The ways forward an evaluation proposes: its corrective subtasks first, then its alternatives. */
export function waysForward(evaluation: Evaluated): Strategy[] {
  const main = evaluation.corrective_subtasks?.length
    ? [
        {
          name: "Corrective round",
          why: evaluation.reason,
          corrective_subtasks: evaluation.corrective_subtasks,
        },
      ]
    : [];
  return [...main, ...(evaluation.alternative_strategies ?? [])];
}

/** Whether this failed round is for a person to decide (see the rule above). */
export const personDecides = (ways: Strategy[], round: number, maxRounds: number) =>
  ways.length > 1 || round >= maxRounds;

/** Asks the person (once per round; asking again is a no-op). Strategies whose plan is invalid are not offered. */
export async function askStrategy(
  deps: EngineDeps,
  parent: TaskResource,
  round: number,
  maxRounds: number,
  evaluation: Evaluated,
): Promise<void> {
  const valid = validWays(parent, waysForward(evaluation));
  const spent = round >= maxRounds ? ` The ${maxRounds} corrective round(s) it may take are spent.` : "";
  const listed = valid.ways.map((w, i) => `${i + 1}. ${w.name}: ${w.why}`).join("\n");
  await requestInteraction(deps, parent.meta.id, strategyQuestion(round), {
    kind: "select",
    purpose: "choose_strategy",
    display: {
      title: `"${parent.meta.name.slice(0, 200)}" did not pass round ${round}: how should it go on?`,
      description:
        `Why it failed: ${evaluation.reason}.${spent}\n${listed}${valid.dropped.length ? `\nNot offered (invalid plans): ${valid.dropped.join("; ")}` : ""}`.slice(
          0,
          4000,
        ),
      content: valid.ways.map((w) => ({
        name: w.name,
        why: w.why,
        subtasks: w.corrective_subtasks.map((s) => s.name),
      })),
      contentKind: "Json",
    },
    options: [
      ...valid.ways.map((w, i) => ({
        id: `strategy-${i + 1}`,
        label: w.name,
        ...(i === 0 ? { style: "primary" as const } : {}),
      })),
      { id: ACCEPT, label: "Accept the result as it is" },
      { id: STOP, label: "Stop here (fail)", style: "danger" as const },
    ],
  });
}

function validWays(parent: TaskResource, ways: Strategy[]): { ways: Strategy[]; dropped: string[] } {
  const out: Strategy[] = [];
  const dropped: string[] = [];
  for (const w of ways) {
    const problems = correctiveProblems(parent, w.corrective_subtasks);
    if (problems.length) dropped.push(`${w.name} (${problems.join(", ")})`);
    else out.push(w);
  }
  return { ways: out, dropped };
}

/**
 * What is wrong with a round of corrective subtasks under `parent`, whoever proposed it (the
 * evaluator's own round, or a strategy a person may choose): each subtask is a valid plan within
 * the parent's budgets; together they are at most maxFanOut subtasks and maxTasks tasks (each one
 * alone within them is not enough); and their names differ (a round's subtasks are named
 * `r<N>:<name>`: two of one name would be one task).
 */
export function correctiveProblems(parent: TaskResource, subtasks: readonly unknown[]): string[] {
  const maxFanOut = parent.budgets.maxFanOut ?? DEFAULT_BUDGETS.maxFanOut;
  const maxTasks = parent.budgets.maxTasks ?? DEFAULT_BUDGETS.maxTasks;
  const problems: string[] = [];
  if (subtasks.length > maxFanOut)
    problems.push(`${subtasks.length} corrective subtasks, more than maxFanOut ${maxFanOut}`);
  const names = new Set<string>();
  let total = 0;
  for (const s of subtasks) {
    const check = checkPlan(s, parent.budgets, taskDepth(parent.meta.id) + 1);
    if (!check.ok) {
      problems.push(...check.errors);
      continue;
    }
    total += countTasks(check.spec);
    if (names.has(check.spec.name))
      problems.push(
        `two corrective subtasks are named "${check.spec.name.slice(0, 100)}": names must differ`,
      );
    names.add(check.spec.name);
  }
  if (total > maxTasks)
    problems.push(`the corrective subtasks hold ${total} tasks, more than maxTasks ${maxTasks}`);
  return problems;
}

const countTasks = (t: TaskSpec): number => 1 + (t.subtasks ?? []).reduce((n, s) => n + countTasks(s), 0);

/**
 * The supervise step of round `round`: when that round's question was answered, applies the answer
 * (once, see the rule) and says so; when it is still waiting, makes sure it is announced.
 */
export async function chosenStrategy(
  deps: EngineDeps,
  parent: TaskResource,
  round: number,
  evaluationOf: (round: number) => Promise<Evaluated>,
  results: () => Promise<string>,
  /** The round's question, when the caller has read it already (strategyQuestionOf). */
  asked?: Promise<InteractionResource | undefined>,
): Promise<boolean> {
  // The strategy that started this round, cut short by a crash (some of its subtasks never made):
  // made whole now, before the round is judged. Its claim still held by a live applier: wait for it.
  if (round > 0 && (await unfinished(deps, strategyClaim(parent.meta.id, round - 1)))) {
    const earlier = await strategyQuestionOf(deps, parent.meta.id, round - 1);
    if (earlier?.status === "answered") await once(deps, parent, round - 1, earlier, evaluationOf, results);
    return true;
  }
  const question = await (asked ?? strategyQuestionOf(deps, parent.meta.id, round));
  if (!question) return false;
  if (question.status !== "answered") {
    // Asked, but a crash came before the parent moved to awaiting_user: announced now.
    await announceStored(deps, question);
    return true;
  }
  await once(deps, parent, round, question, evaluationOf, results);
  return true;
}

/** The question of how round `round` of a parent goes on, if one was asked. */
export const strategyQuestionOf = (deps: EngineDeps, parentId: string, round: number) =>
  deps.resources.getAs("uip.Interaction", interactionMeta(parentId, strategyQuestion(round)).id);

/** A claim taken and not finished (its holder is at work, or crashed). */
export async function unfinished(deps: EngineDeps, key: string): Promise<boolean> {
  const record = await deps.state.get<{ state?: string }>(key);
  return record !== undefined && record.data?.state !== "done";
}

async function once(
  deps: EngineDeps,
  parent: TaskResource,
  round: number,
  question: InteractionResource,
  evaluationOf: (round: number) => Promise<Evaluated>,
  results: () => Promise<string>,
): Promise<void> {
  const key = strategyClaim(parent.meta.id, round);
  if (!(await claim(deps, key, STRATEGY_CLAIM_STALE_MS))) return;
  await apply(deps, parent, round, question, await evaluationOf(round), results);
  await finishClaim(deps, key);
}

async function apply(
  deps: EngineDeps,
  parent: TaskResource,
  round: number,
  question: InteractionResource,
  evaluation: Evaluated,
  results: () => Promise<string>,
): Promise<void> {
  const chosen = question.response?.selectedOptionId;
  const who = question.response
    ? actorLabel({ id: question.response.actor, name: question.response.actorName })
    : "a person";
  if (chosen === ACCEPT)
    return completeTask(deps, parent.meta.id, await results(), parent.election?.assistant);
  const n = /^strategy-(\d+)$/.exec(chosen ?? "")?.[1];
  const way = n ? validWays(parent, waysForward(evaluation)).ways[Number(n) - 1] : undefined;
  if (!way)
    return failTask(
      deps,
      parent.meta.id,
      `${evaluation.reason} (round ${round} failed${round > 0 ? `, after ${round} corrective round(s)` : ""}; ${who} chose to stop here)`,
    );
  await sendReadyAsAllowed(deps, await materialiseUnder(deps, way.corrective_subtasks, parent, round + 1));
}
