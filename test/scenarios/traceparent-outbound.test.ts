import type { IncomingHttpHeaders, Server } from "node:http";
import type { AddressInfo } from "node:net";
import { trace } from "@opentelemetry/api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tenantUrn } from "../../shared/domain/urn.ts";
import type { ToolPort } from "../../shared/ports/tools.ts";
import { startTelemetry, type Telemetry } from "../../shared/runtime/telemetry.ts";
import { ToolService } from "../../shared/tools/service/tool-service.ts";
import { type A2aAgentPeer, startA2aAgent } from "../peers/a2a-agent.ts";
import { statelessMcp } from "../peers/mcp-http.ts";
import { venuesServer } from "../peers/mcp-venues.ts";
import { type OtlpReceiver, startOtlpReceiver } from "../support/otlp-receiver.ts";
import { eventually } from "../support/until.ts";
import { openToolWorld, type ToolWorld } from "./tool-world.ts";

/**
 * A tool call is in the request's trace on the other side too: an MCP server over streamable HTTP
 * (the MCP SDK's server) and a remote A2A agent (the A2A SDK's server) get a `traceparent` naming
 * the call's own span (execute_tool), which the outbound guard adds to every request it lets out.
 */
const TASK = `${tenantUrn("acme")}/common.Conversation.c1/common.Message.m1/plan.Task.t1`;
const ASSISTANT = `${tenantUrn("acme")}/common.Assistant.a1`;

let receiver: OtlpReceiver;
let telemetry: Telemetry | undefined;
let mcp: Server;
let mcpUrl: string;
const mcpHeaders: IncomingHttpHeaders[] = [];
let agent: A2aAgentPeer;
let world: ToolWorld;
let tools: ToolPort;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  telemetry = await startTelemetry("arbor", {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_BSP_SCHEDULE_DELAY: "100",
    OTEL_METRICS_EXPORTER: "none",
  });
  mcp = statelessMcp(venuesServer, (req) => mcpHeaders.push({ ...req.headers }));
  await new Promise<void>((r) => mcp.listen(0, "127.0.0.1", r));
  mcpUrl = `http://127.0.0.1:${(mcp.address() as AddressInfo).port}/mcp`;
  agent = await startA2aAgent();
  world = await openToolWorld("arbor-traceparent-");
  tools = await ToolService.open(
    {
      tools: {
        lookup_venue: { kind: "mcp", transport: "http", url: mcpUrl },
        venue_desk: { kind: "a2a", url: agent.url },
      },
    },
    world.options({ defaultTimeoutMs: 10_000 }),
  );
}, 60_000);
afterAll(async () => {
  await tools?.close?.();
  await world?.close();
  await agent?.close();
  mcp?.closeAllConnections();
  await new Promise((r) => mcp?.close(r));
  await telemetry?.shutdown();
  await receiver?.close();
});

/** Runs `fn` in a span of its own (a turn step's, say), and returns that span's trace id. */
async function inTurn(fn: () => Promise<unknown>): Promise<string> {
  return trace.getTracer("test").startActiveSpan("turn", async (span) => {
    try {
      await fn();
      return span.spanContext().traceId;
    } finally {
      span.end();
    }
  });
}

const traceOf = (header: string | string[] | undefined) =>
  /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(String(header));

describe("traceparent on outbound calls", () => {
  it("reaches an MCP server over HTTP, naming the execute_tool span", async () => {
    mcpHeaders.length = 0;
    const traceId = await inTurn(() =>
      tools.execute(
        "lookup_venue",
        { city: "Lisbon", people: 12 },
        { taskId: TASK, actor: ASSISTANT, callId: "m1" },
      ),
    );
    const sent = mcpHeaders.map((h) => traceOf(h.traceparent)).filter((m) => m?.[1] === traceId);
    expect(sent.length).toBeGreaterThan(0);
    const spans = await eventually(
      async () => receiver.spans.filter((s) => s.traceId === traceId),
      (s) => s.some((x) => x.name === "execute_tool lookup_venue"),
    );
    const call = spans.find((s) => s.name === "execute_tool lookup_venue");
    expect(sent.map((m) => m?.[2])).toContain(call?.spanId);
  });

  it("reaches a remote A2A agent, naming the execute_tool span", async () => {
    agent.requests.length = 0;
    const traceId = await inTurn(() =>
      tools.execute(
        "venue_desk",
        { message: "A venue in Lisbon for 12?" },
        { taskId: TASK, actor: ASSISTANT, callId: "a1" },
      ),
    );
    const sent = agent.requests.map((r) => traceOf(r.headers.traceparent)).filter((m) => m?.[1] === traceId);
    expect(sent.length).toBeGreaterThan(0);
    const spans = await eventually(
      async () => receiver.spans.filter((s) => s.traceId === traceId),
      (s) => s.some((x) => x.name === "execute_tool venue_desk"),
    );
    expect(sent.map((m) => m?.[2])).toContain(
      spans.find((s) => s.name === "execute_tool venue_desk")?.spanId,
    );
  });
});
