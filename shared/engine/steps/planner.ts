import * as z from "zod";
import { DEFAULT_BUDGETS, inheritBudgets } from "../../domain/budgets.ts";
import {
  type Budgets,
  formatIssues,
  type Message,
  type TaskResource,
  type TaskSpec,
  TaskSpecSchema,
  toDescription,
  withMeta,
} from "../../domain/resources.ts";
import { expiresAfter, RETENTION_MS } from "../../domain/retention.ts";
import type { TaskView } from "../../domain/task-view.ts";
import { parentUrn, type Urn } from "../../domain/urn.ts";
import { ArborError, ConflictError } from "../../kernel/errors.ts";
import type { LlmMessage, LlmResponse, LlmToolSpec } from "../../ports/llm.ts";
import { ownerOf } from "../../store/resource-access.ts";
import { RECORD_MANY_LIMIT } from "../../store/task-log.ts";
import {
  ENGINE,
  type EngineDeps,
  type PlanCommand,
  planMarkerKey,
  recordTask,
  taskEvent,
} from "../context.ts";
import { requestInteraction } from "../interactions.ts";
import { callModel, LastingModelFailure, modelFailureReason } from "../model-calls.ts";
import { recordUsage } from "../usage.ts";
import { elect } from "./election.ts";
import { failTask } from "./outcome.ts";

/**
 * The planner: one LLM tool call whose argument is the whole task tree. The plan is validated
 * (schema, depth, fan-out, total) and, if invalid, returned to the model once with the errors; a
 * second invalid plan fails the request with those errors. The model's answer is stored before
 * anything else happens, so a planner that stops after the LLM call resumes with the same plan.
 */
export const PLAN_TOOL: LlmToolSpec = {
  name: "create_plan",
  description:
    "Create the task tree for the request: one root task whose subtasks (to any depth) together accomplish it. " +
    "Every task has a short name and the four descriptors: purpose (what), instructions (how), applicability " +
    "(when), evaluation (what done looks like). Leaves are tasks one assistant can do with its tools.",
  parameters: (() => {
    const { $schema: _s, ...schema } = z.toJSONSchema(TaskSpecSchema) as Record<string, unknown>;
    return schema;
  })(),
};

const PLANNER_SYSTEM =
  "You are Arbor's planner. Turn the person's request into a tree of tasks by calling create_plan exactly once. " +
  "Prefer few, meaningful tasks; only split work that benefits from it. Each task's evaluation says how to judge it.";

export const rootTaskUrn = (messageUrn: string): Urn =>
  withMeta({ type: "plan.Task", name: "request", parent: messageUrn }).id;
const planTurnMeta = (messageUrn: string) =>
  withMeta({ type: "common.Message", name: "plan", parent: messageUrn });

/** What planning leaves to its caller (Engine's plan step). */
export interface Planned {
  /** The root task to start now (eager and planned, or delivered again while it has not ended). */
  root?: Urn;
  /** The root task as just stored, when this step planned it (its start need not read it again). */
  rootTask?: TaskResource;
  /**
   * The plan's marker marked done, under way beside the root's start (a start delivered twice is
   * harmless, and a plan delivered again before the mark starts the same root): awaited by the
   * caller before its step ends.
   */
  marked?: Promise<unknown>;
}

/**
 * Plans a request: its task tree stored (or its failure, or, lazy, the approval asked for). A plan
 * command delivered again returns the root while it has not ended.
 */
export async function plan(deps: EngineDeps, cmd: PlanCommand): Promise<Planned> {
  const rootId = rootTaskUrn(cmd.messageUrn);
  // The marker, the request and a plan turn stored by an earlier try of this step, read at once.
  const [marker, request, storedTurn] = await Promise.all([
    deps.state.get(planMarkerKey(cmd.messageUrn)),
    deps.resources.getAs("common.Message", cmd.messageUrn),
    deps.resources.getAs("common.Message", planTurnMeta(cmd.messageUrn).id),
  ]);
  if (marker?.status === "done") {
    // Started already, the root is started again: a root that is a leaf was run by the plan step
    // that died (Engine's plan step), and goes on from its transcript; a parent does nothing.
    const status = cmd.mode === "eager" ? (await deps.tasks.view(rootId))?.status : undefined;
    return status === "open" || status === "in_progress" ? { root: rootId } : {};
  }
  if (!request)
    throw new ArborError(
      "NOT_FOUND",
      `No message ${cmd.messageUrn} to plan for: a request's message is stored before its plan is asked for, so it was removed since; nothing is planned`,
      { details: { messageUrn: cmd.messageUrn } },
    );

  // Everything below is idempotent: a re-driven plan reuses the stored plan turn and rewrites the same keys.
  const outcome = await plannedTree(deps, request, storedTurn);
  let rootTask: TaskResource | undefined;
  const budgets = inheritBudgets(deps.settings.defaultBudgets, outcome.ok ? outcome.spec.budgets : undefined);
  if (!outcome.ok) {
    // The request fails visibly, as a root task that says why (nothing of the plan is stored: sent
    // again, it is planned afresh).
    const spec: TaskSpec = { name: firstLine(request.content ?? "request") };
    await materialise(deps, spec, cmd.messageUrn, budgets, {
      rootId,
      withChildren: false,
      round: 0,
      after: outcome.written,
    });
    await failTask(
      deps,
      rootId,
      outcome.model
        ? modelFailureReason("The request could not be planned", outcome.model)
        : `The planner did not produce a valid plan: ${outcome.errors.join("; ")}`,
    );
  } else if (cmd.mode === "lazy") {
    await materialise(deps, outcome.spec, cmd.messageUrn, budgets, {
      rootId,
      withChildren: false,
      round: 0,
      planMode: "lazy",
      after: outcome.written,
    });
    await recordTask(deps, "TaskStarted", { taskId: rootId }, ENGINE);
    await requestInteraction(deps, rootId, "approve-plan", {
      kind: "confirm",
      purpose: "approve_plan",
      display: {
        title: `Approve the plan for "${outcome.spec.name}"?`,
        description:
          "Nothing runs until the plan is approved. Answer with an edited plan (JSON) to change it.",
        content: outcome.spec,
        contentKind: "Json",
      },
      options: [
        { id: "approve", label: "Run it", style: "primary", isDefault: true },
        { id: "reject", label: "Cancel", style: "danger" },
      ],
    });
  } else {
    ({ top: rootTask } = await materialise(deps, outcome.spec, cmd.messageUrn, budgets, {
      rootId,
      withChildren: true,
      round: 0,
      planMode: "eager",
      after: outcome.written,
    }));
  }
  const marked = marker
    ? deps.state
        .transact([
          {
            op: "put",
            record: {
              ...marker,
              status: "done",
              updatedAt: deps.clock().toISOString(),
              expiresAt: expiresAfter(deps.clock(), RETENTION_MS.donePlanMarker),
            },
            expectedVersion: marker.version,
          },
        ])
        .catch((e: unknown) => {
          if (!(e instanceof ConflictError)) throw e;
        })
    : undefined;
  marked?.catch(() => {}); // awaited by the caller
  return {
    ...(outcome.ok && cmd.mode === "eager" ? { root: rootId } : {}),
    ...(rootTask ? { rootTask } : {}),
    ...(marked ? { marked } : {}),
  };
}

type PlanOutcome = (
  | { ok: true; spec: TaskSpec }
  | { ok: false; errors: string[]; model?: LastingModelFailure }
) & {
  /**
   * The plan turn's write (and its usage's) while under way: the tree's assistants are elected
   * meanwhile, and no task is written before it is done (materialise's `after`).
   */
  written?: Promise<unknown>;
};

/** The stored plan turn, or a new one from the model (asked again once when invalid). */
async function plannedTree(
  deps: EngineDeps,
  request: Message,
  stored: Message | undefined,
): Promise<PlanOutcome> {
  const meta = planTurnMeta(request.meta.id);
  if (stored) {
    const args = stored.toolCalls?.[0]?.arguments;
    return args
      ? checkPlan(args, deps.settings.defaultBudgets)
      : { ok: false, errors: [stored.content ?? "no plan"] };
  }
  const messages: LlmMessage[] = [{ role: "user", content: request.content ?? "" }];
  let errors: string[] = [];
  for (let attempt = 1; attempt <= 2; attempt++) {
    let response: LlmResponse;
    try {
      response = await callModel(deps, {
        system: PLANNER_SYSTEM,
        messages,
        tools: [PLAN_TOOL],
        toolChoice: { name: PLAN_TOOL.name },
      });
    } catch (error) {
      if (!(error instanceof LastingModelFailure)) throw error;
      return { ok: false, errors: [error.message], model: error };
    }
    deps.faults?.hit("after-llm", "plan");
    // The plan's tokens are the request's: they count on its root task (before it exists: a counter).
    const usage = recordUsage(deps, rootTaskUrn(request.meta.id), response, false);
    usage.catch(() => {}); // awaited below
    const call = response.toolCalls.find((c) => c.name === PLAN_TOOL.name);
    const outcome: PlanOutcome = call
      ? checkPlan(call.arguments, deps.settings.defaultBudgets)
      : { ok: false, errors: ["the model did not call create_plan"] };
    if (outcome.ok || attempt === 2) {
      const written = Promise.all([usage, storePlanTurn(deps, meta, response, outcome)]);
      written.catch(() => {}); // awaited by materialise, which every outcome goes on to
      return { ...outcome, written };
    }
    await usage;
    errors = outcome.errors;
    messages.push({
      role: "assistant",
      ...(response.content ? { content: response.content } : {}),
      toolCalls: response.toolCalls,
    });
    const feedback = `The plan is invalid: ${errors.join("; ")}. Call create_plan again with a corrected plan.`;
    if (call) messages.push({ role: "tool", toolCallId: call.id, content: feedback, isError: true });
    else messages.push({ role: "user", content: feedback });
  }
  return { ok: false, errors };
}

async function storePlanTurn(
  deps: EngineDeps,
  meta: ReturnType<typeof planTurnMeta>,
  response: LlmResponse,
  outcome: PlanOutcome,
): Promise<void> {
  const calls = outcome.ok ? response.toolCalls.filter((c) => c.name === PLAN_TOOL.name).slice(0, 1) : [];
  await deps.resources.put({
    meta,
    role: "assistant",
    ...(calls.length
      ? { toolCalls: calls.map((c) => ({ id: c.id, name: c.name, arguments: c.arguments })) }
      : {}),
    ...(outcome.ok ? {} : { content: `invalid plan: ${outcome.errors.join("; ")}` }),
  });
  deps.faults?.hit("after-write", "plan");
}

/** What an edited plan's check says: the plan, or why it is refused (a message, and each problem). */
export type EditedPlanCheck = { ok: true; spec: TaskSpec } | { ok: false; message: string; errors: string[] };

/**
 * A plan a person edited (JSON text, the answer's `inputValue` to an `approve_plan` question),
 * checked as the engine checks every channel's answer before it accepts one: JSON, then
 * `checkPlan` against the budgets in force. The terminal checks an edit with it before it sends one.
 */
export function checkEditedPlan(text: string, budgets: Budgets): EditedPlanCheck {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { ok: false, message: "The edited plan is not valid JSON", errors: [] };
  }
  const check = checkPlan(parsed, budgets);
  return check.ok ? check : { ok: false, message: "The edited plan is not valid", errors: check.errors };
}

/** Schema and limits: depth, fan-out and total count against the budgets in force. */
export function checkPlan(args: unknown, budgets: Budgets, baseDepth = 1): PlanOutcome {
  const parsed = TaskSpecSchema.safeParse(args);
  if (!parsed.success) return { ok: false, errors: formatIssues(parsed.error) };
  const limits = {
    maxDepth: budgets.maxDepth ?? DEFAULT_BUDGETS.maxDepth,
    maxFanOut: budgets.maxFanOut ?? DEFAULT_BUDGETS.maxFanOut,
    maxTasks: budgets.maxTasks ?? DEFAULT_BUDGETS.maxTasks,
  };
  const errors: string[] = [];
  let total = 0;
  const walk = (t: TaskSpec, d: number, path: string) => {
    total++;
    if (d > limits.maxDepth) errors.push(`${path} is at depth ${d}, deeper than maxDepth ${limits.maxDepth}`);
    const n = t.subtasks?.length ?? 0;
    if (n > limits.maxFanOut)
      errors.push(`${path} has ${n} subtasks, more than maxFanOut ${limits.maxFanOut}`);
    for (const [i, s] of (t.subtasks ?? []).entries()) walk(s, d + 1, `${path}.subtasks[${i}]`);
  };
  walk(parsed.data, baseDepth, "plan");
  if (total > limits.maxTasks)
    errors.push(`the plan has ${total} tasks, more than maxTasks ${limits.maxTasks}`);
  return errors.length ? { ok: false, errors } : { ok: true, spec: parsed.data };
}

export interface MaterialiseOptions {
  /** Fixed URN for the top task (the root of a request); children get deterministic URNs. */
  rootId?: Urn;
  withChildren: boolean;
  round: number;
  planMode?: "eager" | "lazy";
  /** What must be on record before any task is written (the plan turn): awaited once they are elected. */
  after?: Promise<unknown> | undefined;
}

/** What materialise made: the top task's URN, and the top task as stored. */
export interface Materialised {
  id: Urn;
  top: TaskResource;
}

/**
 * Writes a (sub)tree of Task resources with deterministic URNs, elects an assistant for each, and
 * records TaskCreated parent first. Safe to repeat: the same plan writes the same keys and events.
 */
export async function materialise(
  deps: EngineDeps,
  spec: TaskSpec,
  parent: string,
  budgets: Budgets,
  options: MaterialiseOptions,
): Promise<Materialised> {
  type Node = { id: Urn; parent: string; spec: TaskSpec; budgets: Budgets };
  const nodes: Node[] = [];
  const visit = (s: TaskSpec, p: string, b: Budgets, id: Urn | undefined, isTopTask: boolean) => {
    const name = options.round > 0 && isTopTask ? `r${options.round}:${s.name}` : s.name;
    const meta = withMeta({ type: "plan.Task", name, parent: p });
    const node: Node = { id: id ?? meta.id, parent: p, spec: s, budgets: inheritBudgets(b, s.budgets) };
    nodes.push(node);
    if (!options.withChildren) return;
    for (const sub of namedApart(s.subtasks ?? [])) visit(sub, node.id, node.budgets, undefined, false);
  };
  visit(spec, parent, budgets, options.rootId, true);

  let elections: Awaited<ReturnType<typeof elect>>;
  try {
    elections = await elect(
      deps,
      nodes.map((n) => ({ id: n.id, name: n.spec.name, ...descriptors(n.spec) })),
    );
  } finally {
    // Never a task before what it comes from; and no step ends with that write under way.
    await options.after;
  }
  // The top task's parent is a task for subtrees and corrective rounds, a Message for a request's
  // root: read beside the writes.
  const parentView = deps.tasks.view(parent);
  parentView.catch(() => {}); // awaited below
  // All at once: they join one group commit instead of waiting for one each.
  const written = await Promise.all(
    nodes.map((n, i) => {
      const election = elections[i];
      const top = i === 0;
      return deps.resources.put({
        meta: {
          ...withMeta({ type: "plan.Task", name: n.spec.name, parent: n.parent, ...descriptors(n.spec) }),
          id: n.id,
          hash: n.id.split(".").pop() as string,
        },
        priority: n.spec.priority ?? "normal",
        budgets: n.budgets,
        round: options.round,
        ...(election ? { election } : {}),
        ...(top && options.planMode ? { planMode: options.planMode } : {}),
        ...(!options.withChildren && n.spec.subtasks?.length ? { subtasks: n.spec.subtasks } : {}),
      });
    }),
  );
  deps.faults?.hit("after-write", "materialise");
  const parentIsTask = (await parentView) !== undefined;
  // Each task's parent task: the top one's is the parent given, when that is a task.
  const parentTasks = nodes.map((n, i) => (i > 0 ? n.parent : parentIsTask ? parent : undefined));
  const events = nodes.map((n, i) => {
    const parentTask = parentTasks[i];
    const election = elections[i];
    return taskEvent(
      deps,
      "TaskCreated",
      {
        taskId: n.id,
        title: n.spec.name,
        intent: toDescription(descriptors(n.spec)) || n.spec.name,
        priority: n.spec.priority ?? "normal",
        ...(parentTask ? { parentTaskId: parentTask as Urn } : {}),
        ...(election ? { assistant: election.assistant as Urn } : {}),
      },
      ENGINE,
    );
  });
  // Each batch of TaskCreated commits atomically: a crash never leaves half a batch. Batches that
  // share no parent (whose child count each would change) are written at once.
  const batches = batchesBySiblings(events, parentTasks);
  if (batches) await Promise.all(batches.map((batch) => deps.tasks.recordMany(batch)));
  else
    for (let i = 0; i < events.length; i += RECORD_MANY_LIMIT)
      await deps.tasks.recordMany(events.slice(i, i + RECORD_MANY_LIMIT));
  deps.faults?.hit("after-record", "TaskCreated");
  return { id: nodes[0]?.id as Urn, top: written[0]?.resource as TaskResource };
}

/**
 * Siblings as they are made (their URNs derive from their names): the nth of a repeated name is
 * "name (n)", or, when a sibling is named that already ("a", "a", "a (2)"), the next such name
 * nobody has. Two siblings of one URN would be one task written twice: their TaskCreated events, in
 * one batch, are refused (the plan step failing at every delivery), or the second is taken for the first.
 */
function namedApart(specs: readonly TaskSpec[]): TaskSpec[] {
  const given = new Set(specs.map((s) => s.name));
  const taken = new Set<string>();
  const seen = new Map<string, number>();
  return specs.map((spec) => {
    let n = (seen.get(spec.name) ?? 0) + 1;
    let unique = n > 1 ? `${spec.name} (${n})` : spec.name;
    while (n > 1 && (given.has(unique) || taken.has(unique))) unique = `${spec.name} (${++n})`;
    seen.set(spec.name, n);
    taken.add(unique);
    return unique === spec.name ? spec : { ...spec, name: unique };
  });
}

/**
 * Subtasks added under a task that exists (an approved plan's, a corrective round's), each the top
 * of its tree, named apart as a plan's siblings are; one after another, in order. Their URNs.
 */
export async function materialiseUnder(
  deps: EngineDeps,
  specs: readonly TaskSpec[],
  parent: TaskResource,
  round: number,
): Promise<string[]> {
  const ids: string[] = [];
  for (const spec of namedApart(specs))
    ids.push(
      (await materialise(deps, spec, parent.meta.id, parent.budgets, { withChildren: true, round })).id,
    );
  return ids;
}

/**
 * The events in batches of at most RECORD_MANY_LIMIT, each sibling group (the tasks of one parent)
 * whole in one batch, so that no two batches change the same child count; undefined when a group
 * is larger than a batch (its batches are then written one after another).
 */
function batchesBySiblings<E>(
  events: readonly E[],
  /** Each event's task's parent (undefined: none). */
  parents: readonly (string | undefined)[],
): E[][] | undefined {
  const groups = new Map<string | undefined, E[]>();
  for (const [i, e] of events.entries()) {
    const siblings = groups.get(parents[i]) ?? [];
    siblings.push(e);
    groups.set(parents[i], siblings);
  }
  const batches: E[][] = [];
  for (const siblings of groups.values()) {
    if (siblings.length > RECORD_MANY_LIMIT) return undefined;
    const fits = batches.find((b) => b.length + siblings.length <= RECORD_MANY_LIMIT);
    if (fits) fits.push(...siblings);
    else batches.push([...siblings]);
  }
  return batches;
}

const descriptors = (s: TaskSpec) => ({
  ...(s.purpose ? { purpose: s.purpose } : {}),
  ...(s.instructions ? { instructions: s.instructions } : {}),
  ...(s.applicability ? { applicability: s.applicability } : {}),
  ...(s.evaluation ? { evaluation: s.evaluation } : {}),
});

const firstLine = (text: string) => (text.split("\n")[0] ?? "request").slice(0, 120) || "request";

/**
 * The view of a request's root task between its 202 and its plan: the message and its "to plan"
 * mark are on disk, the root task is not yet in the log (the planner writes it, after the model's
 * plan call, which takes seconds with a real model). Without it the link a 202 hands out would be
 * a 404 until then. Undefined for anything else: a task that exists, or no accepted request.
 */
export async function acceptedView(deps: EngineDeps, taskId: string): Promise<TaskView | undefined> {
  const messageUrn = parentUrn(taskId);
  if (!messageUrn || rootTaskUrn(messageUrn) !== taskId) return undefined;
  const marker = await deps.state.get(planMarkerKey(messageUrn));
  if (!marker) return undefined;
  const message = await deps.resources.getAs("common.Message", messageUrn);
  if (!message) return undefined;
  const owner = await ownerOf(deps.resources, messageUrn);
  const text = message.content ?? "request";
  return {
    taskId,
    title: firstLine(text),
    intent: text.slice(0, 1000),
    createdBy: owner ?? "unknown",
    priority: "normal",
    status: "open",
    summary: "Accepted: waiting to be planned",
    createdAt: message.meta.createdAt ?? marker.updatedAt,
    updatedAt: marker.updatedAt,
    version: 0,
  };
}
