import type { LambdaClient } from "@aws-sdk/client-lambda";
import { RememberingEmbedder } from "../adapters/embeddings/remembering-embedder.ts";
import { CedarPolicyEngine } from "../adapters/policy/cedar-policy-engine.ts";
import { DEFAULT_CEDAR_POLICY } from "../adapters/policy/default-policy.ts";
import { ObjectArtifactStore } from "../adapters/shared/object-artifact-store.ts";
import { DEFAULT_BUDGETS } from "../domain/budgets.ts";
import type { PriceOverrides } from "../domain/model-catalogue.ts";
import type { EngineSettings, FaultInjector } from "../engine/context.ts";
import { Engine } from "../engine/engine.ts";
import { DEFAULT_LEAVES_AT_ONCE } from "../engine/leaf-slots.ts";
import { ModelHealth } from "../engine/model-health.ts";
import { defaultTeamToolGap, toolGapMessage } from "../engine/tool-gaps.ts";
import { graphStoreOf } from "../graph/graph-of.ts";
import { componentLogger } from "../kernel/logger.ts";
import { createGuardedFetch } from "../outbound/guard.ts";
import { type OutboundSettings, outboundPolicy } from "../outbound/policy.ts";
import type { ArtifactInfo } from "../ports/artifact-store.ts";
import type { Embedder } from "../ports/embeddings.ts";
import type { FunctionInvoker } from "../ports/function-invoker.ts";
import type { Llm } from "../ports/llm.ts";
import type { PolicyEngine } from "../ports/policy.ts";
import type { ToolPort } from "../ports/tools.ts";
import type { VectorIndex } from "../ports/vector-index.ts";
import { readTeamFile } from "../store/team-file.ts";
import { DEFAULT_TOOLS } from "../tools/service/config.ts";
import { ToolService } from "../tools/service/tool-service.ts";
import { newUlid } from "./ids.ts";
import type { Runtime } from "./runtime.ts";

/** What both composition roots (local-engine.ts, aws-engine.ts) wire the same way. */
export const DEFAULT_SETTINGS: EngineSettings = {
  electionThreshold: 0.1,
  defaultBudgets: DEFAULT_BUDGETS,
  modelPrices: {},
  contextResults: 3,
  contextTokens: 32_000,
  answerTokens: 4_096,
  maxConcurrentSteps: 256,
  leavesAtOnce: DEFAULT_LEAVES_AT_ONCE,
  leavesWhenIdle: 0,
  turnStepMs: 60_000,
  modelRetryMs: 30_000,
};

/** What the configuration sets of the engine's settings (both runtimes' config has these fields). */
export interface ConfiguredSettings {
  contextTokens?: number;
  modelRetryMs?: number;
  modelPrices?: PriceOverrides;
  leavesAtOnce?: number;
  leavesWhenIdle?: number;
}

/**
 * ARBOR_CONTEXT_TOKENS, ARBOR_MODEL_RETRY_MS, ARBOR_MODEL_PRICES, ARBOR_LEAVES_AT_ONCE and
 * ARBOR_LEAVES_WHEN_IDLE as engine settings.
 */
export function configuredSettings(config: ConfiguredSettings): Partial<EngineSettings> {
  return {
    ...(config.contextTokens ? { contextTokens: config.contextTokens } : {}),
    ...(config.modelRetryMs !== undefined ? { modelRetryMs: config.modelRetryMs } : {}),
    ...(config.modelPrices ? { modelPrices: config.modelPrices } : {}),
    ...(config.leavesAtOnce !== undefined ? { leavesAtOnce: config.leavesAtOnce } : {}),
    ...(config.leavesWhenIdle !== undefined ? { leavesWhenIdle: config.leavesWhenIdle } : {}),
  };
}

export interface EngineOptions {
  /** The tools (default: the service built from `toolsConfig`). */
  tools?: ToolPort;
  /** The tool registry's configuration (default: DEFAULT_TOOLS, the built-ins that need no settings). */
  toolsConfig?: unknown;
  /**
   * Outbound HTTP for the tools (default: the outbound guard of `outbound`, shared/outbound/guard.ts).
   * A fetch given here replaces the guard: tests inject fakes; production code never does.
   */
  fetch?: typeof fetch;
  /** What the outbound guard lets through (config: ARBOR_OUTBOUND_*); default public addresses, ports 80/443. */
  outbound?: OutboundSettings;
  /** Who may do what (default: the default Cedar policy, policies/arbor.cedar). */
  policy?: PolicyEngine;
  settings?: Partial<EngineSettings>;
  /**
   * The default team's file (ARBOR_TEAM_FILE): read when the engine is built and checked against
   * its tools (a bad file stops the start, naming the field); it becomes settings.defaultTeam.
   */
  teamFile?: string;
  faults?: FaultInjector;
  /**
   * Say at start when the default team lists tools the registry lacks (default true). The API
   * function, which runs no tool (and may list none), leaves it to the functions that run them.
   */
  warnToolGaps?: boolean;
  /**
   * Where callers reach this Arbor (ARBOR_PUBLIC_URL, `arbor serve --public-url`): A2A agents that
   * offer push answer the a2a tool there. Absent: every a2a call waits for its answer.
   */
  publicUrl?: string | (() => string | undefined);
  /**
   * Where a large artifact is downloaded from (EngineDeps.artifactLink); default: the HTTP API's
   * `/v1/artifacts/<urn>` at `publicUrl`, when there is one. The AWS root gives a signed S3 URL.
   */
  artifactLink?: (info: ArtifactInfo) => Promise<string | undefined>;
  clock?: () => Date;
  newId?: () => string;
}

let cedarDefault: PolicyEngine | undefined;
/** The default policy, parsed once per process. */
export function defaultPolicy(): PolicyEngine {
  cedarDefault ??= new CedarPolicyEngine(DEFAULT_CEDAR_POLICY, "policies/arbor.cedar");
  return cedarDefault;
}

/** The tools of `options` (given, or opened from their configuration: MCP servers get connected). */
export async function openTools(
  rt: Runtime,
  models: { embedder: Embedder; index: VectorIndex },
  options: EngineOptions,
): Promise<ToolPort> {
  if (options.tools) return options.tools;
  return ToolService.open(options.toolsConfig ?? DEFAULT_TOOLS, {
    resources: rt.resources,
    state: rt.state, // each tenant's tool registration record (tools/service/tool-registry.ts)
    audit: rt.audit,
    untilDurable: () => rt.untilDurable(),
    policy: options.policy ?? defaultPolicy(),
    clock: options.clock ?? (() => new Date()),
    embedder: models.embedder,
    index: models.index,
    graph: graphStoreOf(rt.state),
    artifacts: new ObjectArtifactStore(rt.objects, { clock: options.clock ?? (() => new Date()) }),
    fetch: options.fetch ?? createGuardedFetch(outboundPolicy(options.outbound)),
    functions: lambdaFunctions(),
    ...(options.publicUrl ? { publicUrl: options.publicUrl } : {}),
  });
}

/** The engine on a runtime, given the model, the embeddings and the tools each mode chose. */
export function engineOn(
  rt: Runtime,
  models: { llm: Llm; embedder: Embedder; index: VectorIndex; tools: ToolPort },
  options: EngineOptions,
): Engine {
  const clock = options.clock ?? (() => new Date());
  const defaultTeam = options.teamFile
    ? readTeamFile(
        options.teamFile,
        models.tools.list().map((t) => t.name),
        `ARBOR_TEAM_FILE ${options.teamFile}`,
      )
    : undefined;
  // A task's description is embedded to elect its assistant, and again for its leaf's context.
  const embedder = new RememberingEmbedder(models.embedder);
  // In one process the engine's own step queue runs every step; elsewhere the runtime says (its queues).
  const leafSteps =
    rt.leafSteps?.bind(rt) ?? (rt.mode === "local" ? () => Promise.resolve(engine.stepsInQueue) : undefined);
  const engine: Engine = new Engine({
    resources: rt.resources,
    objects: rt.objects,
    outboundFetch: options.fetch ?? createGuardedFetch(outboundPolicy(options.outbound)),
    artifacts: new ObjectArtifactStore(rt.objects, { clock }),
    artifactLink: options.artifactLink ?? apiArtifactLink(options.publicUrl),
    tasks: rt.tasks,
    state: rt.state,
    bus: rt.bus,
    ...models,
    embedder,
    modelHealth: new ModelHealth(models.llm),
    tools: models.tools,
    policy: options.policy ?? defaultPolicy(),
    clock,
    newId: options.newId ?? newUlid,
    untilDurable: () => rt.untilDurable(),
    log: componentLogger("engine"),
    settings: { ...DEFAULT_SETTINGS, ...options.settings, ...(defaultTeam ? { defaultTeam } : {}) },
    ...(options.faults ? { faults: options.faults } : {}),
    ...(rt.soleWorker ? { soleWorker: rt.soleWorker } : {}),
    ...(leafSteps ? { leafSteps } : {}),
  });
  // A tools file replaces the built-ins: a default team that lists tools it lacks is said at start.
  const gap = options.warnToolGaps === false ? undefined : defaultTeamToolGap(engine.deps);
  if (gap) engine.deps.log.warn(toolGapMessage(gap), { team: gap.team, missing: gap.missing });
  return engine;
}

/** An artifact's link on the HTTP API (`GET /v1/artifacts/<urn>`, with the caller's key) at the public URL. */
const apiArtifactLink =
  (publicUrl: EngineOptions["publicUrl"]) =>
  async (info: ArtifactInfo): Promise<string | undefined> => {
    const base = typeof publicUrl === "function" ? publicUrl() : publicUrl;
    return base ? `${base.replace(/\/+$/, "")}/v1/artifacts/${encodeURIComponent(info.urn)}` : undefined;
  };

/**
 * The lambda tools' invoker: Lambda's Invoke, one client per region (`make`: a caller's clients,
 * pointed at a local peer, say). The Lambda SDK is loaded only when a lambda tool exists.
 */
export const lambdaFunctions =
  (make?: (region: string | undefined) => LambdaClient) => async (): Promise<FunctionInvoker> =>
    new (await import("../adapters/aws/lambda-invoker.ts")).LambdaInvoker(make);
