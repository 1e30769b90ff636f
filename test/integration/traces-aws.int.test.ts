import { context, trace } from "@opentelemetry/api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStepHandler, type StepHandler } from "../../functions/engine-step.ts";
import { createToolHandler, type ToolHandler } from "../../functions/tool.ts";
import type { AssistantDefinition, Engine } from "../../shared/engine/engine.ts";
import { SpanKind } from "../../shared/kernel/tracing.ts";
import { type AwsRuntime, createAwsRuntime } from "../../shared/runtime/aws/aws.ts";
import { type AwsEngineClients, createAwsEngine } from "../../shared/runtime/aws/aws-engine.ts";
import { startTelemetry, type Telemetry } from "../../shared/runtime/telemetry.ts";
import { LambdaInvokePeer } from "../peers/lambda-invoke.ts";
import { planningModel } from "../peers/planning-model.ts";
import { type OtlpReceiver, startOtlpReceiver, taskSpanIdOf } from "../support/otlp-receiver.ts";
import { eventually } from "../support/until.ts";
import { type AwsWorld, EventBridgePlayer, startAwsWorld } from "./aws-world.ts";

/**
 * One trace across the deployed shape: the request submitted in a channel's span, the steps run by
 * the step handlers as EventBridge delivers them (the EventBridge peer, rules played by the test),
 * the tool call run by the tool function through the real Lambda client and the Invoke peer. Each
 * hop is a process boundary on AWS: the trace crosses it only in what is sent (the event's detail,
 * the invoke payload), never in this process's memory (the player and the Invoke peer start each
 * handler from a context of their own).
 */
const TENANT = "acme";
const BUS = "arbor-traces-test";
const ANALYST = { purpose: "Work out costs with arithmetic", instructions: "Use the calculator" };
const WRITER = { purpose: "Write short invitations for colleagues" };
const COORDINATOR = { purpose: "Coordinate a small team event", evaluation: "Cost and invitation are given" };
const ASSISTANTS: AssistantDefinition[] = [
  { name: "Coordinator", id: "coordinator", ...COORDINATOR },
  { name: "Analyst", id: "analyst", ...ANALYST, tools: ["calculator"] },
  { name: "Writer", id: "writer", ...WRITER, tools: ["word_count"] },
];
const model = planningModel({
  plan: {
    name: "Team lunch",
    ...COORDINATOR,
    subtasks: [
      { name: "Cost estimate", ...ANALYST },
      { name: "Invitation", ...WRITER },
    ],
  },
  evaluation: { reason: "both parts are there", answer: "240 EUR; invitation ready" },
  leaf: ({ prompt, toolResult }) => {
    if (prompt.includes("# Task: Cost estimate"))
      return toolResult === undefined
        ? { toolCalls: [{ name: "calculator", arguments: { a: 12, b: 20, op: "multiply" } }] }
        : { content: `Total: ${toolResult} EUR` };
    return { content: "Lunch on Friday." };
  },
});

describe("one trace across the AWS functions", () => {
  let receiver: OtlpReceiver;
  let telemetry: Telemetry | undefined;
  let world: AwsWorld;
  let rt: AwsRuntime;
  let engine: Engine;
  let handlers: StepHandler[];
  let toolHandler: ToolHandler;
  let toolPeer: LambdaInvokePeer;
  const { drain, events } = new EventBridgePlayer(
    () => world,
    BUS,
    () => handlers,
  );

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    telemetry = await startTelemetry("arbor", {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_BSP_SCHEDULE_DELAY: "100",
    });
    toolPeer = await LambdaInvokePeer.start({ "arbor-tools": (event) => toolHandler(event) });
    world = await startAwsWorld({ name: "arbor-traces", bus: BUS, model, env: { ARBOR_STAGE: "test" } });
    const engineClients: Required<AwsEngineClients> = {
      ...world.engineClients,
      bedrock: world.engineClients.bedrock as NonNullable<AwsEngineClients["bedrock"]>,
      lambda: toolPeer.client(),
    };
    toolHandler = createToolHandler({
      config: () => world.config,
      clients: world.clients,
      tools: {
        clients: {
          embeddings: engineClients.embeddings,
          s3vectors: engineClients.s3vectors,
          s3: engineClients.s3,
        },
      },
    });
    rt = createAwsRuntime(world.config, world.clients);
    engine = await createAwsEngine(rt, world.config, { clients: engineClients });
    const deps = {
      config: () => ({ ...world.config, toolFunction: "arbor-tools" }),
      clients: world.clients,
      engine: { clients: engineClients, settings: { turnStepMs: 0 } },
    };
    handlers = [createStepHandler(deps), createStepHandler(deps)];
  }, 120_000);

  afterAll(async () => {
    for (const h of handlers ?? []) await h.close();
    await toolHandler?.close();
    await toolPeer?.close();
    await rt?.close();
    await world?.close();
    await telemetry?.shutdown();
    await receiver?.close();
  });

  it("links the channel's span, every step's and the tool function's into the request's trace", async () => {
    expect(telemetry).toBeDefined();
    await engine.registerAssistants(TENANT, ASSISTANTS);
    // The channel function's span (the API function makes one per request: http-server.ts).
    const channel = trace.getTracer("test").startSpan("POST /v1/messages", { kind: SpanKind.SERVER });
    const { traceId, spanId } = channel.spanContext();
    const submitted = await context.with(trace.setSpan(context.active(), channel), () =>
      trace.getTracer("test").startActiveSpan("submit", async (span) => {
        try {
          return await engine.submit({
            tenant: TENANT,
            text: "Plan a team lunch for 12 people at 20 EUR each",
            actor: { id: "user_alice", kind: "human" },
          });
        } finally {
          span.end();
        }
      }),
    );
    channel.end();
    await drain();
    expect((await rt.tasks.view(submitted.rootTaskId))?.status).toBe("done");

    // What crossed the wire carried the trace: every event on the bus, every tool invocation.
    // (The team's events came before the request, outside its trace.)
    const ofRequest = events().filter((e) => JSON.stringify(e.detail).includes(submitted.conversationUrn));
    expect(ofRequest.length).toBeGreaterThan(5);
    for (const e of ofRequest)
      expect(
        String(e.detail["arbor-traceparent"]),
        `${e["detail-type"]} ${JSON.stringify(e.detail)}`,
      ).toContain(traceId);
    const execute = toolPeer.invocations.find((i) => (i.payload as { op: string }).op === "ExecuteTool");
    const sent = execute?.payload as { context?: { traceparent?: string } } | undefined;
    expect(sent?.context?.traceparent).toContain(traceId);

    const spans = await eventually(
      async () => receiver.spans.filter((s) => s.traceId === traceId),
      (s) => s.some((x) => x.spanId === taskSpanIdOf(submitted.rootTaskId)),
      30_000,
    );
    const ids = new Map(spans.map((s) => [s.spanId, s]));
    const planner = spans.find((s) => s.name === "invoke_agent planner");
    expect(ids.get(planner?.parentSpanId ?? "")?.name).toBe("submit");
    expect(ids.get(taskSpanIdOf(submitted.rootTaskId))?.parentSpanId).toBe(planner?.spanId);
    // The tool function's span is a child of the Cost estimate task's, in the step that called it.
    const tool = spans.find((s) => s.name === "execute_tool calculator");
    expect(ids.get(tool?.parentSpanId ?? "")?.name).toBe("invoke_agent analyst");
    expect(tool?.attributes).toMatchObject({ "arbor.policy.decision": "allow", "arbor.tool.outcome": "ok" });
    const chats = spans.filter((s) => s.name.startsWith("chat "));
    expect(chats.length).toBe(5);
    for (const c of chats)
      expect(c.attributes).toMatchObject({
        "gen_ai.provider.name": "aws.bedrock",
        "gen_ai.request.model": "us.anthropic.claude-haiku-4-5-20251001-v1:0",
        "arbor.cost.usd": expect.any(Number),
      });
    // Nothing of this request is in another trace, and nothing in it dangles.
    for (const s of spans) if (s.spanId !== spanId) expect(ids.has(s.parentSpanId), s.name).toBe(true);
  }, 180_000);
});
