import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStepHandler, type StepHandler } from "../../functions/engine-step.ts";
import { createToolHandler, type ToolHandler } from "../../functions/tool.ts";
import { createWatchdogHandler } from "../../functions/watchdog.ts";
import { EVENT_ID_DETAIL_KEY } from "../../shared/adapters/aws/eventbridge-event-bus.ts";
import { isTerminal } from "../../shared/domain/task-state.ts";
import type { TaskView } from "../../shared/domain/task-view.ts";
import type { AssistantDefinition, Engine, Submitted } from "../../shared/engine/engine.ts";
import { ROUTES } from "../../shared/engine/routes.ts";
import { ConfigError } from "../../shared/kernel/errors.ts";
import type { BusEnvelope } from "../../shared/ports/event-bus.ts";
import type { InvocationMetrics, MetricName } from "../../shared/ports/metrics.ts";
import { type AwsClients, type AwsRuntime, createAwsRuntime } from "../../shared/runtime/aws/aws.ts";
import { type AwsEngineClients, createAwsEngine, policyFor } from "../../shared/runtime/aws/aws-engine.ts";
import { type AwsConfig, loadConfig, MODEL_HELP } from "../../shared/runtime/config.ts";
import type { FakeBedrock } from "../peers/fake-bedrock.ts";
import type { FakeS3Vectors } from "../peers/fake-s3vectors.ts";
import { LambdaInvokePeer } from "../peers/lambda-invoke.ts";
import { planningModel } from "../peers/planning-model.ts";
import {
  type AwsWorld,
  EventBridgePlayer,
  guarded,
  MODEL,
  startAwsWorld,
  watchdogGuard,
} from "./aws-world.ts";

/**
 * The deployed shape of the engine, end to end, on the AWS adapters and the local peers: the
 * request is submitted through the engine, and this test plays EventBridge. It takes what the
 * EventBridge peer accepted, matches every event against every route's pattern, renders the
 * rule's input template and invokes the real step handler (functions/engine-step.ts) with it,
 * until nothing new is published. Two handler instances stand for two warm Lambda instances.
 *
 * Resources live in s3rver, state in DynamoDB Local, the model is the fake Bedrock (Converse),
 * embeddings the fake Titan endpoint, the index the fake S3 Vectors, all through the real SDK
 * clients. Tools run in the tool function (functions/tool.ts, on the same peers), which the step
 * handlers invoke through the real Lambda client and the local Invoke peer, as ARBOR_TOOL_FUNCTION
 * makes them do on a deployed stack. Election is honest: each planned task carries the descriptors of the assistant it is
 * meant for, so Titan-shaped vectors of the same text make that assistant the best match.
 */
const TENANT = "acme";
const BUS = "arbor-engine-test";

const COORDINATOR = {
  purpose: "Coordinate a small team event and combine its parts into one answer",
  evaluation: "The answer gives the total cost and the invitation text",
};
const ANALYST = {
  purpose: "Work out costs with arithmetic",
  instructions: "Use the calculator for every multiplication",
};
const WRITER = { purpose: "Write short invitations for colleagues" };
const ASSISTANTS: AssistantDefinition[] = [
  { name: "Coordinator", id: "coordinator", ...COORDINATOR },
  { name: "Analyst", id: "analyst", ...ANALYST, tools: ["calculator"] },
  { name: "Writer", id: "writer", ...WRITER, tools: ["word_count"] },
];
const PLAN = {
  name: "Team lunch",
  ...COORDINATOR,
  subtasks: [
    { name: "Cost estimate", ...ANALYST },
    { name: "Invitation", ...WRITER },
  ],
};
const INVITATION = "Lunch on Friday at noon, on the team. Reply by Wednesday.";
const ANSWER = "Lunch for 12 costs 240 EUR; the invitation is ready.";

/** The model's side of the run: one plan, two leaves (one calls the calculator), one evaluation. */
const answer = planningModel({
  plan: PLAN,
  evaluation: { reason: "both parts are there", answer: ANSWER },
  leaf: ({ prompt, toolResult }) => {
    if (prompt.includes("# Task: Cost estimate")) {
      if (toolResult === undefined)
        return { toolCalls: [{ name: "calculator", arguments: { a: 12, b: 20, op: "multiply" } }] };
      return { content: `Total: ${toolResult} EUR` };
    }
    if (prompt.includes("# Task: Invitation")) return { content: INVITATION };
    throw new Error(`unexpected model request: ${prompt.slice(0, 200)}`);
  },
});

describe("the engine step handler on AWS adapters, driven as EventBridge drives it", () => {
  let world: AwsWorld;
  let bedrock: FakeBedrock;
  let s3vectors: FakeS3Vectors;
  let config: AwsConfig;
  let clients: Required<AwsClients>;
  let engineClients: Required<AwsEngineClients>;
  let rt: AwsRuntime;
  let engine: Engine;
  let handlers: StepHandler[];
  let toolHandler: ToolHandler;
  let toolPeer: LambdaInvokePeer;
  let submitted: Submitted;
  /** What the step handlers counted, one entry per invocation (what EMF would write). */
  const stepMetrics = recordingMetrics();
  const flushed = stepMetrics.flushed;
  const metrics = stepMetrics.metrics;
  /** What the tool function counted: the tool calls end there, where their audit is written. */
  const toolMetrics = recordingMetrics();
  /** Plays EventBridge: each wave of events delivered at once, spread over the two handler instances. */
  const { stepInput, deliver, drain, delivered, events, routesOf } = new EventBridgePlayer(
    () => world,
    BUS,
    () => handlers,
  );
  /** The events some engine rule routes (the rest are resource notices for operators' rules). */
  const routed = (published: readonly BusEnvelope[]) => published.filter((e) => routesOf(e).length > 0);
  const isResourceNotice = (e: BusEnvelope) =>
    e.source === "arbor" && (e["detail-type"] === "RESOURCE_PUT" || e["detail-type"] === "RESOURCE_DELETE");

  beforeAll(async () => {
    toolPeer = await LambdaInvokePeer.start({ "arbor-tools": (event) => toolHandler(event) });
    // OPA, the AWS default, on a policies bucket without a bundle, as after a fresh deploy: the
    // built-in default policy decides (policy-published-s3.int.test.ts).
    world = await startAwsWorld({
      name: "arbor-engine",
      bus: BUS,
      model: answer,
      policies: "empty-bucket",
      env: { ARBOR_STAGE: "test" },
    });
    ({ config, clients } = world);
    bedrock = world.bedrock as FakeBedrock;
    s3vectors = world.s3vectors;
    engineClients = {
      ...world.engineClients,
      bedrock: world.engineClients.bedrock as NonNullable<AwsEngineClients["bedrock"]>,
      // The tool function's peer; its handler is built below.
      lambda: toolPeer.client(),
    };

    // The tool function, built from the same configuration (its own runtime, its cold start).
    toolHandler = createToolHandler({
      metrics: toolMetrics.metrics,
      config: () => config,
      clients,
      tools: {
        clients: {
          embeddings: engineClients.embeddings,
          s3vectors: engineClients.s3vectors,
          s3: engineClients.s3,
        },
      },
    });

    // The submitting side (a channel function, on AWS): same configuration, its own runtime.
    rt = createAwsRuntime(config, clients);
    engine = await createAwsEngine(rt, config, { clients: engineClients });
    // No time for a second turn in one invocation, as when a step's time runs out: a leaf's next
    // turn goes out as a command, so the turn route runs through the handler too.
    const deps = {
      config: () => ({ ...config, toolFunction: "arbor-tools" }),
      clients,
      engine: { clients: engineClients, settings: { turnStepMs: 0 } },
      metrics,
    };
    handlers = [createStepHandler(deps), createStepHandler(deps)];
  });

  afterAll(async () => {
    for (const h of handlers ?? []) await h.close();
    await toolHandler?.close();
    await toolPeer?.close();
    await rt?.close();
    engineClients?.lambda.destroy();
    await world?.close();
  });

  const taskViews = async (): Promise<TaskView[]> => {
    const views: TaskView[] = [];
    const walk = async (id: string) => {
      const view = await rt.tasks.view(id);
      if (!view) return;
      views.push(view);
      for (const child of await rt.tasks.children(id)) await walk(child.taskId);
    };
    await walk(submitted.rootTaskId);
    return views;
  };

  const snapshot = async () => ({
    views: await taskViews(),
    resources: await rt.resources.descendants(submitted.conversationUrn),
  });

  const arborId = (e: BusEnvelope) => String(e.detail[EVENT_ID_DETAIL_KEY]);

  it("runs a request to the end: plan, two leaves (one with a tool call), evaluation", async () => {
    await engine.registerAssistants(TENANT, ASSISTANTS);
    submitted = await engine.submit({
      tenant: TENANT,
      text: "Plan a team lunch for 12 people at 20 EUR each and invite everyone",
      actor: { id: "user_alice", kind: "human" },
    });

    const invocations = await drain();

    const views = await taskViews();
    expect(views.every((v) => isTerminal(v.status))).toBe(true);
    // Title, status, the assistant elected (the one whose description the task shares), output.
    const outcome = await Promise.all(
      views.map(async (v) => [
        v.title,
        v.status,
        v.assistant?.split(".").pop(),
        (await engine.result(v.taskId)).output,
      ]),
    );
    expect(outcome.sort()).toEqual([
      ["Cost estimate", "done", "analyst", "Total: 240 EUR"],
      ["Invitation", "done", "writer", INVITATION],
      ["Team lunch", "done", "coordinator", ANSWER],
    ]);
    expect(views[0]?.taskId).toBe(submitted.rootTaskId);
    // All of it decided by the built-in default policy: the policies bucket has no bundle yet.
    expect(await policyFor(config, engineClients.s3)).toMatchObject({ bundled: false, engine: "cedar" });

    // The model saw: the plan, Cost estimate twice (tool call, then its result), Invitation, the evaluation.
    expect(bedrock.calls.map((c) => [c.operation, c.modelId, c.status])).toEqual(
      Array.from({ length: 5 }, () => ["converse", MODEL, 200]),
    );
    // The one tool call went to the tool function; the steps asked it for its tools at cold start.
    const toolOps = toolPeer.invocations.map((i) => i.payload as { op: string; tool?: string });
    expect(toolOps.filter((o) => o.op === "ExecuteTool").map((o) => o.tool)).toEqual(["calculator"]);
    expect(toolOps.filter((o) => o.op === "ListTools").length).toBeLessThanOrEqual(handlers.length);
    expect(toolPeer.invocations.every((i) => i.invocationType === "RequestResponse")).toBe(true);
    // Every route ran through the handler at least once.
    const routesRun = new Set(events().flatMap(routesOf));
    // (No answer to resume, no fire-and-forget activity: activities-aws.int.test.ts runs that route.)
    expect([...routesRun].sort()).toEqual(
      ROUTES.map((r) => r.name)
        .filter((n) => n !== "resume" && n !== "activity" && n !== "documents")
        .sort(),
    );
    // Each invocation counted its step, under its stage and route, with the model's calls and
    // tokens; the tool function counted the tool call it ran, under route "tool".
    expect(new Set(flushed.map((f) => f.dimensions.route))).toEqual(routesRun);
    expect(flushed.every((f) => f.dimensions.stage === "test" && f.values.StepSucceeded === 1)).toBe(true);
    const total = (name: MetricName) => flushed.reduce((n, f) => n + (f.values[name] ?? 0), 0);
    expect([total("StepFailed"), total("ModelCalls"), total("ToolCalls"), total("ToolCallsFailed")]).toEqual([
      0, 5, 0, 0,
    ]);
    // (Its other invocations listed the tools, one per step instance's cold start: nothing counted.)
    expect(toolMetrics.flushed.filter((f) => Object.keys(f.values).length > 0)).toEqual([
      { dimensions: { stage: "test", route: "tool" }, values: { ToolCalls: 1 } },
    ]);
    expect(toolMetrics.flushed.every((f) => f.dimensions.route === "tool")).toBe(true);
    expect(total("InputTokens")).toBeGreaterThan(0);
    // Every published event is one some rule routes, and each was delivered; the others are the
    // resource notices that only operators' rules subscribe to (resource-events.ts).
    const unrouted = events().filter((e) => routesOf(e).length === 0);
    expect(unrouted.filter((e) => !isResourceNotice(e))).toEqual([]);
    expect(new Set(unrouted.map((e) => e.detail.resourceType))).toEqual(
      new Set([
        "common.Tenant",
        "common.Assistant",
        "common.Tool",
        "common.Conversation",
        "common.Message",
        "plan.Task",
      ]),
    );
    expect(invocations).toBeGreaterThanOrEqual(routed(events()).length);
    // S3 Vectors holds the three assistants and the three outputs (index-output).
    const put = s3vectors.calls.filter((c) => c.operation === "PutVectors" && c.status === 200);
    expect(put.reduce((n, c) => n + (c.vectors ?? 0), 0)).toBe(3 + 3);
  });

  it("changes nothing when every event is delivered again", async () => {
    expect(submitted).toBeDefined();
    const before = await snapshot();
    const modelCalls = bedrock.calls.length;
    const published = new Set(events().map(arborId));
    const firstRound = events().length;

    // Redeliver everything, then whatever the redelivery publishes, until quiet again.
    expect(await deliver(events())).toBeGreaterThanOrEqual(routed(events()).length);
    await drain();

    expect(await snapshot()).toEqual(before);
    expect(bedrock.calls.length).toBe(modelCalls);
    // Whatever a duplicate re-sent carries an id already published: consumers drop it as a duplicate.
    const republished = events().slice(firstRound).map(arborId);
    expect(republished.filter((id) => !published.has(id))).toEqual([]);
  });

  it("recovers a lost command with the watchdog function", async () => {
    const second = await engine.submit({
      tenant: TENANT,
      text: "Same again for next month",
      actor: { id: "user_alice", kind: "human" },
    });
    // The plan command never reaches its rule: EventBridge accepted it, nobody runs it.
    for (const e of events()) delivered.add(e.id);
    expect(await drain()).toBe(0);
    // Accepted, not planned: the root task is not in the log, and its view says it waits to be planned.
    expect(await engine.deps.tasks.view(second.rootTaskId)).toBeUndefined();
    expect((await engine.result(second.rootTaskId)).view).toMatchObject({ status: "open", version: 0 });

    // Ten minutes on, the scheduled watchdog finds the request still waiting to be planned.
    const later = () => new Date(Date.now() + config.watchdogStaleMs + 60_000);
    const watchdog = guarded(
      watchdogGuard(world),
      createWatchdogHandler({
        config: () => config,
        clients,
        engine: { clients: engineClients, clock: later },
      }),
    );
    try {
      expect(await watchdog({ "detail-type": "Scheduled Event" })).toEqual({ redriven: 1 });
    } finally {
      await watchdog.close();
    }
    await drain();
    const result = await engine.result(second.rootTaskId);
    expect([result.view?.status, result.output]).toEqual(["done", ANSWER]);
  });

  it("refuses input that is not what the rules send, naming what is wrong", async () => {
    const handler = handlers[0] as StepHandler;
    await expect(handler({ subscription: "plan" })).rejects.toThrow(/Invalid engine step input.*event/);
    await expect(handler({ subscription: "deploy", event: events()[0] })).rejects.toThrow(/subscription/);
    // A delivered event without the envelope fields EventBridge always sets.
    const [first] = events();
    const { account: _drop, ...partial } = first as BusEnvelope;
    await expect(handler({ subscription: "plan", event: partial })).rejects.toThrow(
      /Invalid EventBridge event.*account/,
    );
    // From a command queue: a body that is no step input is dropped (sending it again would not
    // help); one whose step throws is reported, so only it comes back; the others are done.
    const record = (messageId: string, body: string) => ({ messageId, body, receiptHandle: messageId });
    const queued = events().find((e) => routesOf(e)[0] === "plan") as BusEnvelope;
    expect(
      await handler({
        Records: [
          record("m1", "not json"),
          record("m2", JSON.stringify({ subscription: "deploy", event: queued })),
          record("m3", JSON.stringify({ subscription: "plan", event: partial })),
          record("m4", JSON.stringify({ subscription: "plan", event: queued })),
        ],
      }),
    ).toEqual({ batchItemFailures: [{ itemIdentifier: "m3" }] });
    await expect(handler({ Records: [] })).rejects.toThrow(/Invalid engine step input/);
  });

  it("refuses to start without its vector index or a model, saying what to set", async () => {
    const { vectors: _v, ...withoutVectors } = config;
    await expect(createAwsEngine(rt, withoutVectors, { clients: engineClients })).rejects.toThrow(
      /ARBOR_VECTOR_BUCKET and ARBOR_VECTOR_INDEX/,
    );
    const { model: _m, ...withoutModel } = config;
    await expect(createAwsEngine(rt, withoutModel, { clients: engineClients })).rejects.toThrow(MODEL_HELP);
    // A function configured for local mode stops before it touches anything.
    const local = createStepHandler({ config: () => loadConfig({}) });
    await expect(local(stepInput("plan", events()[0] as BusEnvelope))).rejects.toThrow(ConfigError);
    await expect(local(stepInput("plan", events()[0] as BusEnvelope))).rejects.toThrow(/ARBOR_MODE=aws/);
    await local.close();
  });
});

/** A metrics port that keeps what each invocation flushed, as EMF would write it. */
function recordingMetrics() {
  const flushed: { dimensions: Record<string, string>; values: Partial<Record<MetricName, number>> }[] = [];
  let counting: Partial<Record<MetricName, number>> = {};
  const metrics: InvocationMetrics = {
    add: (name, value) => {
      counting[name] = (counting[name] ?? 0) + value;
    },
    flush: (dimensions) => {
      flushed.push({ dimensions: { ...dimensions }, values: counting });
      counting = {};
    },
  };
  return { metrics, flushed };
}
