import { type Actor, type EventOf, eventIdFor, type TaskEvent } from "../domain/events.ts";
import type { PriceOverrides } from "../domain/model-catalogue.ts";
import type { Budgets } from "../domain/resources.ts";
import type { TaskView } from "../domain/task-view.ts";
import type { TeamFile } from "../domain/team.ts";
import { ArborError } from "../kernel/errors.ts";
import type { ArborLogger } from "../kernel/logger.ts";
import { currentTraceparent, tracingOn } from "../kernel/tracing.ts";
import type { ArtifactInfo, ArtifactStore } from "../ports/artifact-store.ts";
import type { Embedder } from "../ports/embeddings.ts";
import type { BusEventInput, EventBus } from "../ports/event-bus.ts";
import type { Llm } from "../ports/llm.ts";
import type { ObjectStore } from "../ports/object-store.ts";
import type { PolicyEngine } from "../ports/policy.ts";
import type { StateStore } from "../ports/state-store.ts";
import type { ToolPort } from "../ports/tools.ts";
import type { VectorIndex } from "../ports/vector-index.ts";
import { resourceEvent } from "../store/resource-events.ts";
import type { ResourceStore } from "../store/resource-store.ts";
import type { RecordResult, TaskLog } from "../store/task-log.ts";
import type { ModelHealth } from "./model-health.ts";
import { observeTaskEvent } from "./spans.ts";

/**
 * What every engine step needs. Each step is an idempotent operation on stored state, triggered by
 * a bus command, so the AWS deployment can run each in its own Lambda invocation and the local
 * runtime runs them all in one process.
 */
export interface EngineSettings {
  /** Below this similarity, the fallback assistant (or a person) takes the task. */
  electionThreshold: number;
  /** URN of the assistant used when no assistant is similar enough; absent: ask a person. */
  fallbackAssistant?: string;
  /** Budgets of a root task when the planner sets none. */
  defaultBudgets: Budgets;
  /**
   * The operator's prices by model id (ARBOR_MODEL_PRICES), over the catalogue's
   * (domain/model-catalogue.ts); a model in neither has an unknown cost.
   */
  modelPrices: PriceOverrides;
  /** How many of the most similar resources a leaf gets as context. */
  contextResults: number;
  /**
   * Tokens of a leaf's context window: its model request (system prompt, tools, prompt, turns)
   * and the answer together (ARBOR_CONTEXT_TOKENS; an assistant's limits.contextTokens overrides it).
   * The task prompt (ancestors + similar resources) gets at most a quarter of it (window-context.ts).
   */
  contextTokens: number;
  /** Of contextTokens, how many are kept for the model's answer (at most half of it). */
  answerTokens: number;
  /**
   * How long one step may go on taking turns of a leaf's inner loop before it hands the next turn
   * on as a command (a Lambda function must end within its timeout).
   */
  turnStepMs: number;
  /** Task starts and turns running at once in one process; the rest wait in priority order. */
  maxConcurrentSteps: number;
  /**
   * Leaves of one request running at once (ARBOR_LEAVES_AT_ONCE); the others wait for a slot, in
   * the order they were started (engine/leaf-slots.ts). 0: no bound.
   */
  leavesAtOnce: number;
  /**
   * Leaves of one request running at once while the other requests' leaf steps (EngineDeps.leafSteps)
   * number fewer than the room above `leavesAtOnce` (ARBOR_LEAVES_WHEN_IDLE): a wide request uses
   * the steps nobody else needs, and is held to `leavesAtOnce` again once they are taken
   * (engine/leaf-slots.ts). 0, or not above `leavesAtOnce`, or no leafSteps: `leavesAtOnce` always.
   */
  leavesWhenIdle: number;
  /**
   * How long the model may go on failing (unreachable, throttling) before the task whose step
   * calls it fails with the reason (ARBOR_MODEL_RETRY_MS); until then the step tries again
   * (engine/model-calls.ts).
   */
  modelRetryMs: number;
  /**
   * The team a tenant without assistants gets before its first request is planned (the
   * deployment's ARBOR_TEAM_FILE or `-c team`); absent: DEFAULT_TEAM (engine/default-team.ts).
   */
  defaultTeam?: TeamFile;
  /**
   * Index a tenant's stored assistants again at its first request in this process (locally: the
   * embedder may have changed since they were indexed, and the vector index is per embedder).
   */
  reindexTeams?: boolean;
}

export interface EngineDeps {
  resources: ResourceStore;
  /** The object store under the resources: a document's bytes (knowledge/documents.ts). */
  objects: ObjectStore;
  /** Outbound HTTP through the outbound guard: a document added by its URL (knowledge/fetch-document.ts). */
  outboundFetch?: typeof fetch;
  /** The files tasks make (the create_artifact built-in's), read by the HTTP API and A2A answers. */
  artifacts?: ArtifactStore;
  /**
   * Where a caller downloads an artifact too large to send inline: an API link locally, a
   * short-lived signed S3 URL on AWS. Absent: large artifacts are listed, not linked.
   */
  artifactLink?: (info: ArtifactInfo) => Promise<string | undefined>;
  tasks: TaskLog;
  state: StateStore;
  bus: EventBus;
  llm: Llm;
  /** What this process knows of the model from its calls (and a probe): /healthz reads it. */
  modelHealth: ModelHealth;
  embedder: Embedder;
  index: VectorIndex;
  tools: ToolPort;
  /** Who may do what (answering an interaction, here; tool calls are decided by the tool service). */
  policy: PolicyEngine;
  clock: () => Date;
  /** New unique ids (ULIDs in production; a counter in tests). */
  newId: () => string;
  /**
   * Resolves once everything written so far is on disk (Runtime.untilDurable): awaited before a
   * tool with effects runs, so no effect happens that a crash could make Arbor forget.
   */
  untilDurable: () => Promise<void>;
  log: ArborLogger;
  settings: EngineSettings;
  /** Test hook: throws at named points to prove that every step resumes after a crash. */
  faults?: FaultInjector;
  /** Runtime.soleWorker: claims held by anyone else were left by a process that is gone (claims.ts). */
  soleWorker?: string;
  /** Runtime.leafSteps: about how many leaf steps (ready, turn) wait or run now (leaf-slots.ts). */
  leafSteps?: () => Promise<number>;
  /**
   * Set while the engine runs its steps (Engine.start): a task's end, once announced, has its
   * parent counted, and judged when it was the last child, in the step that ended it
   * (outcome.ts), instead of a step of its own started by the RESOURCE_PUT's delivery. That
   * delivery still comes and finds the work done; it is what judges the parent when this step
   * died first. Unset (a process that runs no steps, such as the API function): the delivery does.
   */
  judgeParent?: (outputUrn: string) => Promise<void>;
}

export type FaultPoint = "after-llm" | "after-write" | "before-publish" | "after-record";
export interface FaultInjector {
  hit(point: FaultPoint, step: string): void;
}

/**
 * Thrown by a FaultInjector: a simulated crash (the process "dies" at that point). Deliberately
 * not an ArborError: a crash has no code, and no edge or step may map it, tell it or record it as
 * an outcome (isFinalModelError, the HTTP/A2A/chat edges); it must run out like an unexpected
 * failure. The one Error class besides ArborError (test/unit/house/errors.test.ts allows it).
 */
export class SimulatedCrash extends Error {
  constructor(point: FaultPoint, step: string) {
    super(`simulated crash ${point} in ${step}`);
    this.name = "SimulatedCrash";
  }
}

// ---- bus commands --------------------------------------------------------------------------------

export const SOURCE = "arbor.engine";
export const COMMANDS = {
  plan: "PLAN_REQUESTED",
  ready: "TASK_READY",
  turn: "TURN_REQUESTED",
  resume: "INTERACTION_ANSWERED",
  resourcePut: "RESOURCE_PUT",
  /** A fire-and-forget activity call, recorded by its turn, to run once (engine/turn/activity-step.ts). */
  activity: "ACTIVITY_REQUESTED",
} as const;

/** The durable mark of a request that still has to be planned (the plan command's outbox). */
export const planMarkerKey = (messageUrn: string) => `plan#${messageUrn}`;

export interface PlanCommand {
  messageUrn: string;
  mode: "eager" | "lazy";
}
export interface TaskCommand {
  taskId: string;
}
export interface TurnCommand {
  taskId: string;
  turn: number;
}
export interface ResumeCommand {
  interactionUrn: string;
}

/** Publishes one command; its id is derived from what makes it unique, so a retried step sends the same id. */
export async function send(
  deps: EngineDeps,
  detailType: string,
  detail: object,
  ...idParts: string[]
): Promise<void> {
  deps.faults?.hit("before-publish", detailType);
  const event: BusEventInput = {
    id: eventIdFor(detailType, ...idParts),
    source: SOURCE,
    detailType,
    detail: detail as Record<string, unknown>,
  };
  await deps.bus.publish([event]);
}

/**
 * Starts tasks: a ready command each, published together, in the order given. On AWS that is one
 * PutEvents per ten tasks instead of one per task (a parent of ten children made ten round trips in
 * a row). The same ids as `send` gives them, so a retried step sends the same commands.
 */
export async function sendReady(deps: EngineDeps, taskIds: readonly string[]): Promise<void> {
  if (taskIds.length === 0) return;
  deps.faults?.hit("before-publish", COMMANDS.ready);
  await deps.bus.publish(
    taskIds.map((taskId) => ({
      id: eventIdFor(COMMANDS.ready, taskId),
      source: SOURCE,
      detailType: COMMANDS.ready,
      detail: { taskId },
    })),
  );
}

/**
 * Announces a task's output (its parent's supervisor is woken by this), once the task's end is
 * recorded: the one RESOURCE_PUT the resource store leaves to the engine (resource-events.ts).
 */
export async function announcePut(
  deps: EngineDeps,
  urn: string,
  resourceType: string,
  name: string,
  contentHash: string,
): Promise<void> {
  deps.faults?.hit("before-publish", "RESOURCE_PUT");
  await deps.bus.publish([resourceEvent(COMMANDS.resourcePut, { urn, resourceType, name, contentHash })]);
}

// ---- task events with deterministic ids -----------------------------------------------------------

export const ENGINE: Actor = { id: "system_engine", kind: "system" };

type Lifecycle = TaskEvent["type"];

/** A task event whose id is derived from (task, type, key), so the same step yields the same event. */
export function taskEvent<T extends Lifecycle>(
  deps: EngineDeps,
  type: T,
  payload: EventOf<T>["payload"],
  actor: Actor,
  key = "",
): TaskEvent {
  const traceparent = currentTraceparent();
  return {
    id: eventIdFor(payload.taskId, type, key),
    v: 1,
    at: deps.clock().toISOString(),
    actor,
    type,
    payload,
    ...(traceparent ? { traceparent } : {}),
  } as TaskEvent;
}

/**
 * Records a task event whose id is derived from (task, type, key): the same step taken twice
 * records once. Forbidden transitions throw InvalidTransitionError.
 */
export async function recordTask<T extends Lifecycle>(
  deps: EngineDeps,
  type: T,
  payload: EventOf<T>["payload"],
  actor: Actor,
  key = "",
  /** The task's view as the caller has just read it: recorded on it without reading it again. */
  known?: TaskView,
): Promise<RecordResult> {
  const event = taskEvent(deps, type, payload, actor, key);
  const result = await deps.tasks.record(event, { known });
  deps.faults?.hit("after-record", type);
  if (tracingOn() && !result.duplicate) await observeTaskEvent(deps, event, result.view);
  return result;
}

export const agentActor = (assistant: string | undefined): Actor =>
  assistant ? { id: assistant, kind: "agent" } : { id: "agent_unassigned", kind: "agent" };

/**
 * Model errors no retry can fix (bad configuration, a request the model rejects, an unusable
 * answer) end the step's task with the message; others (throttling, an unreachable endpoint)
 * are thrown so the bus and the watchdog try again.
 */
export function isFinalModelError(e: unknown): e is ArborError {
  return e instanceof ArborError && (e.code === "CONFIG" || e.code === "VALIDATION" || e.code === "MODEL");
}
