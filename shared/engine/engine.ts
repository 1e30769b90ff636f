import type { Usage } from "../domain/budgets.ts";
import type { Actor } from "../domain/events.ts";
import { type Assistant, type Descriptors, type InteractionResource, withMeta } from "../domain/resources.ts";
import { isTerminal } from "../domain/task-state.ts";
import type { TaskView } from "../domain/task-view.ts";
import { parseTeam, type TeamDiff, teamDiff } from "../domain/team.ts";
import { conversationOf, parentUrn, tenantOf, tenantUrn, type Urn } from "../domain/urn.ts";
import { ConflictError, ForbiddenError, ValidationError } from "../kernel/errors.ts";
import { ATTR, inSpan, tracingOn, withinTask, withTraceparent } from "../kernel/tracing.ts";
import { processDocument } from "../knowledge/process-document.ts";
import type { BusEnvelope } from "../ports/event-bus.ts";
import { type Caller, principalOf, ResourceAccess, type ResourceAction } from "../store/resource-access.ts";
import type { EngineDeps, PlanCommand, ResumeCommand, TaskCommand } from "./context.ts";
import { type AnswerPrincipal, type InteractionResponse, respond } from "./interactions.ts";
import type { ModelStatus } from "./model-health.ts";
import { ROUTES, type Route, type StepName } from "./routes.ts";
import { StepQueue } from "./step-queue.ts";
import { indexAssistants } from "./steps/election.ts";
import { cancelTask, resume, startTask, startTasks, watchdog } from "./steps/lifecycle.ts";
import { indexOutput, outputOf } from "./steps/outcome.ts";
import { acceptedView, checkEditedPlan, plan } from "./steps/planner.ts";
import { type SubmitRequest, type Submitted, submit } from "./steps/submit.ts";
import { onResourcePut } from "./steps/supervisor.ts";
import { DEFAULT_TREE_TASKS, type TaskTree, taskTree } from "./task-tree.ts";
import { activeAssistants, applyTeam, storedAssistants, Teams, teamUrn, withTeamApplyLease } from "./team.ts";
import { type TeamToolGap, teamToolGaps } from "./tool-gaps.ts";
import { runActivity } from "./turn/activity-step.ts";
import { runTurn } from "./turn/direct.ts";
import { type PushOutcome, receivePush } from "./turn/remote-calls.ts";
import { usageOf } from "./usage.ts";

export type { SubmitRequest, Submitted } from "./steps/submit.ts";

/**
 * The orchestration engine: the steps wired to the bus. Each subscription is one step, and each
 * step is idempotent, so duplicate deliveries, retries and re-drives are harmless. On AWS the same
 * subscriptions are EventBridge rules targeting one Lambda per step.
 */
export interface AssistantDefinition extends Descriptors {
  name: string;
  /** A readable id for the URN (default: a hash of tenant + name). */
  id?: string;
  tools?: string[];
  model?: string;
}

/**
 * Who asks, at an entry point: the actor, and what the channel vouches for (tenant, roles). Every
 * entry point below checks it against the tenant boundary and the policy before it reads or
 * writes anything (see ResourceAccess; the policy is told who started the conversation the URN
 * lies in, so that people get their own conversations, admins the tenant, agents what they
 * started); a person the channel names no tenant for is taken to be of the tenant they address
 * (the local CLI: one person, one tenant).
 */
export interface Asker {
  actor: Actor;
  caller?: Caller;
}

/** The step queue's place for a step whose task's view is not read (or not there): normal, now. */
const NO_VIEW = { priority: "normal", createdAt: "" } as const;

export class Engine {
  readonly deps: EngineDeps;
  readonly #queue: StepQueue;
  readonly #access: ResourceAccess;
  /**
   * Answers being taken, by interaction: the answers to one question are taken one after the
   * other, so that the second finds the first (already answered: a conflict). Within one process,
   * which a local data folder has (its lock); across processes see respond in interactions.ts.
   */
  readonly #answering = new Map<string, Promise<unknown>>();
  /** Tenants' teams: a tenant without one gets the default team at its first request (engine/team.ts). */
  readonly #teams: Teams;

  constructor(deps: EngineDeps) {
    this.deps = deps;
    this.#queue = new StepQueue(deps.settings.maxConcurrentSteps);
    this.#access = new ResourceAccess(deps.resources, deps.policy);
    this.#teams = new Teams(deps);
  }

  /** Steps of this process running or waiting for room to run (settings.maxConcurrentSteps at once). */
  get stepsInQueue(): number {
    return this.#queue.running + this.#queue.waiting;
  }

  /** Subscribes every step (see ROUTES) to its events; returns a function that unsubscribes them all. */
  start(): () => void {
    const d = this.deps;
    // A queued step (ready, turn) is given its task's view when the queue read it just now (#queued).
    const steps: Record<StepName, (e: BusEnvelope, view?: TaskView) => Promise<void>> = {
      plan: (e) => {
        const cmd = e.detail as unknown as PlanCommand;
        const attributes = {
          [ATTR.operation]: "invoke_agent",
          [ATTR.agentName]: "planner",
          [ATTR.tenant]: tenantOf(cmd.messageUrn),
          [ATTR.conversationId]: conversationOf(cmd.messageUrn),
          "arbor.plan.mode": cmd.mode,
        };
        // The plan step starts the request's root itself, a parent here and its parents below it
        // too, down to the first leaves, whose commands it sends (lifecycle.ts startTasks); a root
        // that is itself a leaf (a request of one task) it runs itself, as its ready step would
        // (on AWS, one hop fewer to the answer: the plan step has a leaf's grants).
        return inSpan("invoke_agent planner", { attributes }, async () => {
          const { root, rootTask, marked } = await plan(d, cmd);
          let leaf: string | undefined;
          try {
            if (root) leaf = await startTasks(d, [root], undefined, true);
          } finally {
            await marked;
          }
          if (leaf) {
            const taskId = leaf;
            await this.#queued({ ...e, detail: { taskId } }, (view) =>
              startTask(d, { taskId }, undefined, { view, task: rootTask }),
            );
          }
        });
      },
      ready: (e, view) => startTask(d, e.detail as unknown as TaskCommand, undefined, { view }),
      turn: (e, view) => runTurn(d, e.detail as unknown as TaskCommand, undefined, view),
      resume: (e) => resume(d, e.detail as unknown as ResumeCommand),
      supervise: (e) => onResourcePut(d, e.detail),
      "index-output": (e) => indexOutput(d, e.detail),
      activity: (e) => runActivity(d, e.detail),
      documents: (e) => processDocument(d, String(e.detail.urn)),
    };
    const handle = async (route: Route, event: BusEnvelope): Promise<void> => {
      try {
        const step = steps[route.name];
        await (route.queued ? this.#queued(event, (view) => step(event, view)) : step(event));
      } catch (error) {
        d.log.error(`${route.name} failed`, {
          eventId: event.id,
          detail: event.detail,
          error: error as Error,
        });
        throw error;
      }
    };
    // A task's end judges its parent in the step that ended it (outcome.ts).
    d.judgeParent = (urn) => onResourcePut(d, { urn, name: "output" });
    const offs = ROUTES.map((route) =>
      d.bus.subscribe({
        name: route.name,
        pattern: route.pattern,
        // In the trace its publisher was in (a request's, a task's), wherever the step runs.
        handler: (event) => withTraceparent(event.traceparent, () => handle(route, event)),
      }),
    );
    return () => {
      for (const off of offs) off();
      delete d.judgeParent;
    };
  }

  /**
   * Runs a task's step when a slot is free, foreground work first (seeds/002's scheduler policy).
   * With a slot free and no tracing, nothing needs the task's view before the step, which reads it
   * beside its other reads (on AWS, where each step has its function instance, a round trip
   * fewer). Else the step is given the view read for the queue when it did not wait; one that
   * waited reads its own.
   */
  async #queued(event: BusEnvelope, step: (view?: TaskView) => Promise<void>): Promise<void> {
    if (this.#queue.hasRoom && !tracingOn()) return this.#queue.run(NO_VIEW, () => step());
    const view = await this.deps.tasks.view(String(event.detail.taskId));
    // The step's spans are children of its task's span (kernel/tracing.ts).
    await this.#queue.run(view ?? NO_VIEW, (waited) =>
      withinTask(view, () => step(waited ? undefined : view)),
    );
  }

  /** Writes assistants under their tenant and indexes them for election. Repeating it refreshes them. */
  async registerAssistants(tenant: string, definitions: readonly AssistantDefinition[]): Promise<Urn[]> {
    const written: Assistant[] = [];
    for (const { name, id, tools, model, ...descriptors } of definitions) {
      const meta = withMeta({
        type: "common.Assistant",
        name,
        parent: tenantUrn(tenant),
        ...(id ? { id } : {}),
        ...descriptors,
      });
      await this.deps.resources.put({ meta, tools: tools ?? [], ...(model ? { model } : {}) });
      written.push((await this.deps.resources.getAs("common.Assistant", meta.id)) as Assistant);
    }
    await indexAssistants(this.deps, written);
    if (written.length > 0) this.#teams.remember(tenant);
    return written.map((a) => a.meta.id);
  }

  /**
   * The tenant's team: its active assistants. `asker`: whoever a channel reads it for (the team is
   * the tenant's, so the policy gives it to the tenant's admins); without one, the engine's own
   * process reads it (the local CLI, which holds the data folder).
   */
  async team(tenant: string, asker?: Asker): Promise<Assistant[]> {
    if (asker) await this.#check(asker, "resource.read", teamUrn(tenant));
    return activeAssistants(this.deps, tenant);
  }

  /**
   * Teams whose assistants list tools this engine's registry does not have (tool-gaps.ts): the
   * default team, and the stored teams of `tenants`. Read by the engine's own process at start.
   */
  async toolGaps(tenants: readonly string[] = []): Promise<TeamToolGap[]> {
    await this.deps.tools.ready?.();
    return teamToolGaps(this.deps, tenants);
  }

  /**
   * Makes the tenant's team what `raw` (a team file, shared/domain/team.ts) says, checked against
   * the tool registry this engine has, and returns the change; with `dryRun`, only the change. An
   * `asker` must be allowed to write the team and every assistant it adds, changes or retires (the
   * tenant's admins, by the default policy). Idempotent. Removed assistants are retired
   * (engine/team.ts says why): never elected again, while tasks that elected them finish.
   */
  async applyTeam(
    tenant: string,
    raw: unknown,
    options: { dryRun?: boolean; asker?: Asker } = {},
  ): Promise<TeamDiff> {
    const { asker } = options;
    if (asker) await this.#check(asker, "resource.write", teamUrn(tenant));
    await this.deps.tools.ready?.(); // the list the team is checked against
    const team = parseTeam(
      raw,
      this.deps.tools.list().map((t) => t.name),
    );
    const planned = teamDiff(tenant, await storedAssistants(this.deps, tenant), team);
    if (asker)
      for (const e of [...planned.added, ...planned.changed, ...planned.removed])
        await this.#check(asker, "resource.write", e.urn);
    if (options.dryRun) return planned;
    const applied = await withTeamApplyLease(this.deps, tenant, () => applyTeam(this.deps, tenant, team));
    this.#teams.remember(tenant);
    await this.deps.untilDurable(); // a team acknowledged is a team on disk
    return applied;
  }

  /**
   * A person's (or agent's) message: stored, then planned. Returns at once; progress arrives on the
   * bus. A new conversation records its actor as the one who started it (`startedBy`). With an
   * `idempotencyKey` a repeated submit returns the same ids and writes nothing new; a
   * `conversationName` names the conversation (created if absent, continued if there): submit.ts.
   */
  async submit(req: SubmitRequest): Promise<Submitted> {
    return submit(this.deps, this.#access, this.#teams, req);
  }

  /** An answer to an interaction, from any channel. An edited plan is checked before it is accepted. */
  /** `principal`: the tenant and roles the channel authenticated the answerer for (see AnswerPrincipal). */
  async respond(
    interactionUrn: string,
    response: InteractionResponse,
    actor: Actor,
    principal: AnswerPrincipal = {},
  ): Promise<void> {
    const editedPlan = (interaction: InteractionResource) => {
      if (interaction.purpose !== "approve_plan" || !response.inputValue) return;
      const check = checkEditedPlan(response.inputValue, this.deps.settings.defaultBudgets);
      if (!check.ok) throw new ValidationError(check.message, check.errors);
    };
    const before = this.#answering.get(interactionUrn) ?? Promise.resolve();
    const taken = before.then(() =>
      respond(this.deps, interactionUrn, response, actor, principal, editedPlan),
    );
    const settled = taken.catch(() => undefined);
    this.#answering.set(interactionUrn, settled);
    try {
      await taken;
    } finally {
      if (this.#answering.get(interactionUrn) === settled) this.#answering.delete(interactionUrn);
    }
    await this.deps.untilDurable(); // an answer acknowledged is an answer on disk
  }

  /** Cancels a task and its subtree; `caller` as for respond. */
  async cancel(
    taskId: string,
    actor: Actor,
    reason = "canceled by request",
    caller: Caller = {},
  ): Promise<void> {
    await this.#check({ actor, caller }, "resource.write", taskId);
    if (!(await this.deps.tasks.view(taskId)) && (await acceptedView(this.deps, taskId)))
      throw new ConflictError(`Task ${taskId} is accepted and not planned yet: cancel it again in a moment`);
    await cancelTask(this.deps, taskId, actor, reason);
    await this.deps.untilDurable(); // a cancel acknowledged is a cancel on disk
  }

  /** What this process knows of its model (engine/model-health.ts): /healthz says it. Quick: bounded and cached. */
  modelStatus(): Promise<ModelStatus> {
    return this.deps.modelHealth.status();
  }

  /** Lets go of what the engine holds open (MCP connections, the vector index). The runtime closes apart. */
  async close(): Promise<void> {
    await this.deps.tools.close?.();
    await this.deps.index.close?.();
  }

  watchdog(staleMs: number): Promise<{ redriven: number }> {
    return watchdog(this.deps, staleMs);
  }

  /** A remote agent's push for a tool call it was handed (remote-calls.ts; POST /v1/a2a-callbacks/:id). */
  receivePush(callbackId: string, token: string | undefined, body: unknown): Promise<PushOutcome> {
    return receivePush(this.deps, callbackId, token, body);
  }

  /**
   * A task's state and output. `asker`: whoever an entry point reads it for (checked like any
   * read); without one, the engine's own process reads it (the CLI, tests).
   */
  async result(
    rootTaskId: string,
    asker?: Asker,
  ): Promise<{ view: TaskView | undefined; output: string | undefined }> {
    if (asker) await this.#check(asker, "resource.read", rootTaskId);
    const view = (await this.deps.tasks.view(rootTaskId)) ?? (await acceptedView(this.deps, rootTaskId));
    return { view, output: await outputOf(this.deps, rootTaskId) };
  }

  /**
   * A task's state and its subtree's usage (tokens, cost), checked like `result`: one line of a
   * list of requests, without the output or the tree. Undefined when there is no such task.
   */
  async summary(taskId: string, asker: Asker): Promise<{ view: TaskView; usage: Usage } | undefined> {
    await this.#check(asker, "resource.read", taskId);
    const view = (await this.deps.tasks.view(taskId)) ?? (await acceptedView(this.deps, taskId));
    return view && { view, usage: await usageOf(this.deps, taskId) };
  }

  /**
   * The interactions still waiting for an answer anywhere below a task (its own and its
   * subtasks'), checked like `result`; undefined when there is no such task.
   */
  async pendingInteractions(taskId: string, asker: Asker): Promise<InteractionResource[] | undefined> {
    await this.#check(asker, "resource.read", taskId);
    if (!(await this.deps.tasks.view(taskId)))
      return (await acceptedView(this.deps, taskId)) ? [] : undefined; // accepted, not yet planned
    return this.#pendingBelow(taskId);
  }

  /** The questions waiting anywhere below an existing task (its own and its subtasks'). */
  async #pendingBelow(taskId: string): Promise<InteractionResource[]> {
    const urns = await this.deps.resources.descendantUrns(taskId, "uip.Interaction");
    const pending = (await this.deps.resources.getMany(urns)).filter(
      (r): r is InteractionResource =>
        r?.meta.type === "uip.Interaction" && (r as InteractionResource).status === "pending",
    );
    // A question of a task that has ended (canceled, failed) waits for nothing: no answer is taken.
    const ended = new Set<string>();
    for (const asking of new Set(pending.map((i) => parentUrn(i.meta.id) as string))) {
      const status = (await this.deps.tasks.view(asking))?.status;
      if (status !== undefined && isTerminal(status)) ended.add(asking);
    }
    return pending.filter((i) => !ended.has(parentUrn(i.meta.id) as string));
  }

  /**
   * The whole tree of a request (task-tree.ts), checked like `result`; at most `maxTasks` tasks,
   * breadth first (`truncated` says when there were more). Undefined when there is no such task.
   */
  async tree(taskId: string, asker: Asker, maxTasks = DEFAULT_TREE_TASKS): Promise<TaskTree | undefined> {
    await this.#check(asker, "resource.read", taskId);
    const planned = await this.deps.tasks.view(taskId);
    const root = planned ?? (await acceptedView(this.deps, taskId));
    if (!root) return undefined;
    return taskTree(this.deps, root, planned ? await this.#pendingBelow(taskId) : [], maxTasks);
  }

  /** Whether `asker` may read `urn`, as `result` checks it, without reading anything else. */
  async mayRead(urn: string, asker: Asker): Promise<boolean> {
    try {
      await this.#check(asker, "resource.read", urn);
      return true;
    } catch (e) {
      if (e instanceof ForbiddenError) return false;
      throw e;
    }
  }

  /**
   * Throws ForbiddenError unless `asker` may do `action` to `urn`, as every entry point checks it
   * (tenant boundary, then the policy). For channel routes that act on the tenant itself rather
   * than through an engine entry point: an admin route writing `cld:common.Tenant.t/common.Assistant.x`
   * or `.../common.ApiKey.<fingerprint>` is allowed to the tenant's admins only (no owner).
   * `owner`: whose the resource is, for one that lies in no conversation and that the route knows
   * the owner of (a key's callback secret is that key's): the policy is told, as for a conversation's.
   */
  authorize(
    asker: Asker,
    action: ResourceAction,
    urn: string,
    options: { owner?: string } = {},
  ): Promise<void> {
    if (options.owner === undefined) return this.#check(asker, action, urn);
    const principal = principalOf(asker.actor, asker.caller ?? {}, tenantOf(urn));
    return this.#access.authorize(principal, action, urn, undefined, options.owner);
  }

  /** Whether whoever an entry point acts for may read or write `urn` (ForbiddenError if not). */
  #check(asker: Asker, action: ResourceAction, urn: string): Promise<void> {
    return this.#access.authorize(principalOf(asker.actor, asker.caller ?? {}, tenantOf(urn)), action, urn);
  }
}
