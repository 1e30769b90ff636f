import { isTerminal, type TaskStatus } from "../domain/task-state.ts";
import { COMMANDS, SOURCE } from "../engine/context.ts";
import type { Engine, Submitted } from "../engine/engine.ts";
import { INTERACTION_REQUESTED } from "../engine/interactions.ts";
import { ERROR_EDGES } from "../kernel/error-edges.ts";
import { ArborError, ConflictError, NotFoundError } from "../kernel/errors.ts";
import type { EventPattern } from "../kernel/event-pattern/index.ts";
import { requestOf } from "../notify/wakeups.ts";
import type { BusEnvelope } from "../ports/event-bus.ts";
import type { StateRecord, StateStore, WriteOp } from "../ports/state-store.ts";
import type { EvalCase } from "./dataset.ts";
import {
  type Asker,
  answerQuestions,
  EXPERIMENT_KIND,
  type Experiment,
  experimentKey,
  experimentsOf,
  listRuns,
  RUN_KIND,
  type RunResult,
  runKey,
  scoreCase,
  summarize,
} from "./experiment.ts";
import type { RunFacts } from "./scorers.ts";

/**
 * Experiments the runtime drives (started over the HTTP API, the console, or `arbor eval run` with
 * ARBOR_URL), on both runtimes, without a process that waits for them: every case's request is a
 * request like any other, and its events move the experiment on.
 *
 *   const started = await startExperiment(engine, asker, { dataset, cases, repeat, concurrency });
 *   bus.subscribe({ name: EVAL_ROUTE.name, pattern: EVAL_ROUTE.pattern, handler: (e) => onEvalEvent(engine, e) });
 *   await sweepExperiments(engine);   // now and then: deadlines, and any event that was lost
 *
 * The records (experiment.ts names them): the summary `eval-experiment#<id>` (status `running`, then
 * `done`), the plan `eval-plan#<id>` (the cases and who runs them), one `eval-run#<id>#<case>#<n>` per
 * run (`pending` -> `running` -> `scored`, each move a conditional write), and `eval-root#<root task>`
 * naming the run a request belongs to. A run's requests go to the conversation `eval-<id>-<n>`
 * (their URNs say so: EVAL_ROUTE's pattern takes only their events), each submitted with an
 * idempotency key, so a launch repeated after a crash finds the request the first one made.
 *
 * An event for a run's request (an output, a question) advances the run: its questions are
 * answered as the case says, the history's next request is sent, or the run is scored (a conditional
 * write: scored once) and the next pending run launched, at most `concurrency` running. The last
 * run scored makes the experiment `done` with its totals. A run past its deadline is canceled by the
 * sweep and scored `timeout`. Scorers of the team's own (modules on a disk) are for the local CLI only.
 */
export const EVAL_CONVERSATION_PREFIX = "eval-";
const PLAN_KIND = "eval-plan";
const planKey = (id: string) => `${PLAN_KIND}#${id}`;
const rootKey = (rootTaskId: string) => `eval-root#${rootTaskId}`;

/** The events that move a driven experiment: its requests' outputs and questions, and nothing else. */
const OF_EVAL_REQUESTS = [{ wildcard: `*/common.Conversation.${EVAL_CONVERSATION_PREFIX}*` }];
export const EVAL_ROUTE: { name: "eval"; pattern: EventPattern; description: string } = {
  name: "eval",
  pattern: {
    $or: [
      {
        source: ["arbor"],
        "detail-type": [COMMANDS.resourcePut],
        detail: { name: ["output"], urn: OF_EVAL_REQUESTS },
      },
      { source: [SOURCE], "detail-type": [INTERACTION_REQUESTED], detail: { taskId: OF_EVAL_REQUESTS } },
    ],
  },
  description:
    "Moves an experiment on when one of its requests ends or asks: answers, scores, launches the next",
};

interface Plan {
  cases: EvalCase[];
  repeat: number;
  asker: Asker;
  concurrency: number;
  timeoutMs: number;
}

/** A run of a driven experiment before it is scored. */
interface OpenRun {
  state: "pending" | "running";
  caseId: string;
  repeat: number;
  /** The run's place in the experiment: its conversation is `eval-<id>-<index>`. */
  index: number;
  /** Which of the case's requests runs: the history's, then (history.length) the case's own. */
  phase: number;
  rootTaskId?: string;
  startedAt?: string;
  deadline?: string;
  questions: RunFacts["questions"];
}
type RunData = OpenRun | (RunResult & { state: "scored" });

export interface StartInput {
  dataset: string;
  cases: readonly EvalCase[];
  model: string;
  label?: string;
  repeat?: number;
  concurrency?: number;
  timeoutMs?: number;
}

/** Stores the experiment (running) with every run pending, and launches the first runs. */
export async function startExperiment(
  engine: Engine,
  asker: Asker,
  input: StartInput,
): Promise<Omit<Experiment, "runs">> {
  const d = engine.deps;
  const id = d.newId();
  const at = d.clock().toISOString();
  const repeat = input.repeat ?? 1;
  const summary: Omit<Experiment, "runs"> = {
    ...summarize([], {
      id,
      tenant: asker.caller.tenant,
      dataset: input.dataset,
      model: input.model,
      ...(input.label ? { label: input.label } : {}),
      startedAt: at,
      durationMs: 0,
      cases: input.cases.length,
      repeat,
    }),
    status: "running",
    startedBy: asker.actor.id,
  };
  const plan: Plan = {
    cases: [...input.cases],
    repeat,
    asker,
    concurrency: input.concurrency ?? 4,
    timeoutMs: input.timeoutMs ?? 120_000,
  };
  const runs: WriteOp[] = input.cases.flatMap((c, i) =>
    Array.from({ length: repeat }, (_, r) => ({
      op: "put" as const,
      record: {
        key: runKey(id, c.id, r + 1),
        kind: RUN_KIND,
        parent: experimentKey(id),
        updatedAt: at,
        data: {
          state: "pending",
          caseId: c.id,
          repeat: r + 1,
          index: i * repeat + r,
          phase: 0,
          questions: [],
        },
      },
      expectedVersion: 0,
    })),
  );
  const put = (key: string, kind: string, parent: string | undefined, data: unknown, status?: string) => ({
    op: "put" as const,
    record: { key, kind, ...(parent ? { parent } : {}), ...(status ? { status } : {}), updatedAt: at, data },
    expectedVersion: 0,
  });
  await d.state.transact([put(planKey(id), PLAN_KIND, undefined, plan)]);
  for (let i = 0; i < runs.length; i += 50) await d.state.transact(runs.slice(i, i + 50));
  // The summary last: listed (and swept) only once everything it names is there.
  await d.state.transact([
    put(experimentKey(id), EXPERIMENT_KIND, experimentsOf(asker.caller.tenant), summary, "running"),
  ]);
  await d.untilDurable();
  await pump(engine, id);
  return summary;
}

/** Handles one EVAL_ROUTE event: the run whose request it is moves on. */
export async function onEvalEvent(
  engine: Engine,
  event: Pick<BusEnvelope, "detail-type" | "detail">,
): Promise<void> {
  const urn = String(event.detail.urn ?? event.detail.taskId ?? "");
  const root = requestOf(urn);
  if (!root) return;
  const owner = await engine.deps.state.get<{ experimentId: string; runKey: string }>(rootKey(root));
  if (!owner) return; // a request of a conversation so named, not an experiment's
  await advance(engine, owner.data.experimentId, owner.data.runKey);
}

/**
 * Every running experiment: runs past their deadline canceled, runs whose request ended without
 * the event reaching us scored, free slots filled. Locally every few seconds; on AWS by the watchdog.
 */
export async function sweepExperiments(engine: Engine): Promise<number> {
  let swept = 0;
  let cursor: string | undefined;
  do {
    const page = await engine.deps.state.byStatus<Omit<Experiment, "runs">>(EXPERIMENT_KIND, "running", {
      limit: 100,
      ...(cursor ? { cursor } : {}),
    });
    for (const e of page.items) {
      const plan = await planOf(engine, e.data.id);
      for (const run of await runsOf(engine.deps.state, e.data.id, plan))
        if (run.data.state === "running") await advance(engine, e.data.id, run.key, plan);
      await pump(engine, e.data.id, plan);
      swept++;
    }
    cursor = page.cursor;
  } while (cursor);
  return swept;
}

async function planOf(engine: Engine, id: string): Promise<Plan> {
  const plan = await engine.deps.state.get<Plan>(planKey(id));
  if (!plan) throw new NotFoundError("Experiment", id);
  return plan.data;
}

/**
 * The experiment's runs: as its index lists them, and any it does not list yet read by key (an
 * index on DynamoDB may serve reads from before the runs were written: an experiment whose runs
 * it does not show yet is not one with no runs). What the index shows may be a state behind;
 * every move is a conditional write on the run's own record, so a stale one only loses the race.
 */
async function runsOf(state: StateStore, id: string, plan: Plan): Promise<StateRecord<RunData>[]> {
  const out = await listRuns<RunData>(state, id, FRESH_READS);
  const listed = new Set(out.map((r) => r.key));
  const missing = plan.cases.flatMap((c) =>
    Array.from({ length: plan.repeat }, (_, r) => runKey(id, c.id, r + 1)).filter((k) => !listed.has(k)),
  );
  for (const run of await Promise.all(missing.map((key) => state.get<RunData>(key)))) if (run) out.push(run);
  return out;
}

/**
 * Writes a record's next data (and status) over the version read; false when another writer moved
 * it first (a run advanced, an experiment finished or stopped meanwhile).
 */
async function putOver<T>(
  state: StateStore,
  current: StateRecord<T>,
  data: T,
  at: string,
  status?: string,
): Promise<boolean> {
  const { version, ...record } = current;
  try {
    await state.transact([
      {
        op: "put",
        record: { ...record, ...(status ? { status } : {}), updatedAt: at, data },
        expectedVersion: version,
      },
    ]);
    return true;
  } catch (e) {
    if (e instanceof ConflictError) return false;
    throw e;
  }
}

/** One run moves on as its request stands: questions answered, the next request sent, or scored. */
async function advance(engine: Engine, experimentId: string, key: string, known?: Plan): Promise<void> {
  const d = engine.deps;
  const plan = known ?? (await planOf(engine, experimentId));
  for (let attempt = 0; attempt < 5; attempt++) {
    const run = await d.state.get<RunData>(key);
    if (!run || run.data.state === "scored") break;
    const open = run.data;
    const c = plan.cases.find((x) => x.id === open.caseId);
    if (!c) break;
    if (open.state === "pending") break;
    if (!open.rootTaskId) {
      // Claimed, but the launch did not get to record its request: launch it again (idempotent).
      await launch(engine, experimentId, plan, run);
      break;
    }
    const status = (await engine.result(open.rootTaskId, plan.asker)).view?.status ?? "open";
    const now = d.clock();
    const late = open.deadline !== undefined && now.toISOString() > open.deadline;
    if (!isTerminal(status as TaskStatus)) {
      const stopped = (await d.state.get<Omit<Experiment, "runs">>(experimentKey(experimentId)))?.data
        .stopped;
      if (late || stopped) {
        const why = late ? "the experiment's time for the case ran out" : "the experiment was stopped";
        await engine.cancel(open.rootTaskId, plan.asker.actor, why, plan.asker.caller).catch((e) => {
          if (!(e instanceof ConflictError)) throw e; // not planned yet: the next sweep cancels it
        });
        break;
      }
      const asked = await answerQuestions(
        engine,
        plan.asker,
        open.rootTaskId,
        c,
        new Set(open.questions.map((q) => q.id ?? "")),
      );
      if (
        asked.length === 0 ||
        (await putOver(
          d.state,
          run,
          { ...open, questions: [...open.questions, ...asked] },
          now.toISOString(),
        ))
      )
        break;
      continue;
    }
    const history = c.history ?? [];
    if (open.phase < history.length && status === "done" && !late) {
      // The history's next request, in the same conversation.
      const next = { ...open, phase: open.phase + 1 };
      delete next.rootTaskId;
      if (!(await putOver(d.state, run, next, now.toISOString()))) continue;
      const moved = await d.state.get<RunData>(key);
      if (moved) await launch(engine, experimentId, plan, moved);
      break;
    }
    const result = await scoreCase(
      engine,
      plan.asker,
      c,
      {
        rootTaskId: open.rootTaskId,
        status: late && status === "canceled" ? "timeout" : (status as TaskStatus),
        questions: open.questions,
        wallMs: now.getTime() - Date.parse(open.startedAt ?? now.toISOString()),
        repeat: open.repeat,
      },
      {},
    );
    if (await putOver(d.state, run, { ...result, state: "scored" }, now.toISOString())) {
      await d.untilDurable();
      await pump(engine, experimentId, plan);
      return;
    }
  }
}

/** Launches pending runs while fewer than `concurrency` run; the last one scored ends the experiment. */
async function pump(engine: Engine, experimentId: string, known?: Plan): Promise<void> {
  const d = engine.deps;
  const plan = known ?? (await planOf(engine, experimentId));
  const summary = await d.state.get<Omit<Experiment, "runs">>(experimentKey(experimentId));
  if (summary?.status !== "running") return;
  const runs = await runsOf(d.state, experimentId, plan);
  let running = runs.filter((r) => r.data.state === "running").length;
  // A stopped experiment launches nothing more: it ends once what runs has ended.
  const pending = summary.data.stopped
    ? []
    : runs.filter((r) => r.data.state === "pending").sort((a, b) => index(a) - index(b));
  for (const run of pending) {
    if (running >= plan.concurrency) break;
    const at = d.clock();
    const claimed: OpenRun = {
      ...(run.data as OpenRun),
      state: "running",
      startedAt: at.toISOString(),
      deadline: new Date(at.getTime() + plan.timeoutMs).toISOString(),
    };
    if (!(await putOver(d.state, run, claimed, at.toISOString()))) continue; // another launched it
    running++;
    const mine = await d.state.get<RunData>(run.key);
    if (mine) await launch(engine, experimentId, plan, mine);
  }
  if (pending.length === 0 && running === 0) await finish(engine, summary, runs);
}

/**
 * Near the end, what the index says is not scored yet (at most this many runs) is read from the
 * runs' own records: a run just scored is seen so, and the experiment ends now, not at the next sweep.
 */
const FRESH_READS = 50;

const index = (r: StateRecord<RunData>) => (r.data.state === "scored" ? 0 : r.data.index);

/** Submits the run's current request (the same one on every try: its idempotency key) and records it. */
async function launch(
  engine: Engine,
  experimentId: string,
  plan: Plan,
  run: StateRecord<RunData>,
): Promise<void> {
  const d = engine.deps;
  const open = run.data;
  if (open.state !== "running") return;
  const c = plan.cases.find((x) => x.id === open.caseId);
  if (!c) return;
  const text = [...(c.history ?? []), c.request][open.phase] as string;
  let submitted: Submitted;
  try {
    submitted = await engine.submit({
      tenant: plan.asker.caller.tenant,
      actor: plan.asker.actor,
      roles: plan.asker.caller.roles,
      text,
      ...(c.mode ? { mode: c.mode } : {}),
      conversationName: `${EVAL_CONVERSATION_PREFIX}${experimentId}-${open.index}`,
      idempotencyKey: `eval:${experimentId}:${open.index}:${open.phase}`,
    });
  } catch (e) {
    // Refused (the policy, a rule of the request): trying again gives the same answer. The run is
    // scored as failed, saying why, and the experiment goes on; anything else is tried again.
    if (!(e instanceof ArborError) || ERROR_EDGES[e.code].retryable) throw e;
    const refused: RunResult = {
      caseId: open.caseId,
      repeat: open.repeat,
      rootTaskId: "",
      status: "failed",
      answer: "",
      scores: [{ scorer: "status", score: 0, reason: `the request was refused: ${e.message}` }],
      score: 0,
      tokens: 0,
      costUsd: 0,
      unpricedCalls: 0,
      wallMs: 0,
    };
    if (await putOver<RunData>(d.state, run, { ...refused, state: "scored" }, d.clock().toISOString()))
      await pump(engine, experimentId, plan);
    return;
  }
  const at = d.clock().toISOString();
  // The owner first: an event of the request that comes before the run names it finds its run.
  await d.state
    .transact([
      {
        op: "put",
        record: {
          key: rootKey(submitted.rootTaskId),
          kind: "eval-root",
          updatedAt: at,
          data: { experimentId, runKey: run.key },
        },
        expectedVersion: 0,
      },
    ])
    .catch((e) => {
      if (!(e instanceof ConflictError)) throw e; // written by the launch before this one
    });
  if (await putOver(d.state, run, { ...open, rootTaskId: submitted.rootTaskId }, at)) {
    await d.untilDurable();
    // It may have ended (or asked) before it was recorded: look at it now.
    await advance(engine, experimentId, run.key, plan);
  }
}

/** Every run scored: the summary gets its totals and is `done` (once: a conditional write). */
async function finish(
  engine: Engine,
  record: StateRecord<Omit<Experiment, "runs">>,
  runs: StateRecord<RunData>[],
): Promise<void> {
  const d = engine.deps;
  const scored = runs.flatMap((r) => (r.data.state === "scored" ? [r.data as RunResult] : []));
  const now = d.clock();
  const summary = {
    ...summarize(scored, record.data),
    durationMs: now.getTime() - Date.parse(record.data.startedAt),
    status: record.data.stopped ? ("stopped" as const) : ("done" as const),
  };
  // A conditional write: finished once, whoever else saw the last run scored.
  if (await putOver(d.state, record, summary, now.toISOString(), summary.status)) await d.untilDurable();
}

/**
 * The local runtime's driver: EVAL_ROUTE on the in-process bus, and a sweep now (what a process
 * that is gone left running goes on) and every `sweepEveryMs`. Returns a function that stops both.
 */
export function driveExperiments(engine: Engine, options: { sweepEveryMs?: number } = {}): () => void {
  const log = engine.deps.log;
  const off = engine.deps.bus.subscribe({
    name: EVAL_ROUTE.name,
    pattern: EVAL_ROUTE.pattern,
    handler: (event) => onEvalEvent(engine, event),
  });
  const sweep = () =>
    void sweepExperiments(engine).catch((error: Error) => log.error("experiments: sweep failed", { error }));
  sweep();
  const timer = setInterval(sweep, options.sweepEveryMs ?? 5_000).unref();
  return () => {
    off();
    clearInterval(timer);
  };
}

/**
 * Stops a running experiment: no run is launched any more, the requests running are canceled (their
 * runs scored as they end), and the experiment ends `stopped` with what was scored. Returns the
 * summary, or undefined when the tenant has no such experiment.
 */
export async function stopExperiment(
  engine: Engine,
  id: string,
  by: Asker,
): Promise<Omit<Experiment, "runs"> | undefined> {
  const d = engine.deps;
  const tenant = by.caller.tenant;
  for (let attempt = 0; attempt < 5; attempt++) {
    const record = await d.state.get<Omit<Experiment, "runs">>(experimentKey(id));
    if (record?.data.tenant !== tenant) return undefined;
    if (record.status !== "running") return record.data; // ended already
    const at = d.clock().toISOString();
    if (
      !record.data.stopped &&
      !(await putOver(d.state, record, { ...record.data, stopped: { by: by.actor.id, at } }, at))
    )
      continue; // ended meanwhile: read it again
    const plan = await planOf(engine, id);
    for (const run of await runsOf(d.state, id, plan))
      if (run.data.state === "running" && run.data.rootTaskId)
        await engine
          .cancel(run.data.rootTaskId, by.actor, "the experiment was stopped", by.caller)
          .catch((e) => {
            if (!(e instanceof ConflictError)) throw e; // not planned yet: the sweep comes back to it
          });
    await d.untilDurable();
    await pump(engine, id, plan); // nothing running any more: it ends now
    return (await d.state.get<Omit<Experiment, "runs">>(experimentKey(id)))?.data;
  }
  throw new ConflictError(`Experiment ${id} kept changing while it was being stopped: stop it again`);
}
