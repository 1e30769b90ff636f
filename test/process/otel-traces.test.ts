import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REQUEST } from "../../examples/offsite/scenario.ts";
import { addKey, arborCli, arborEnv, killAll, type Served, startServe } from "../support/arbor-process.ts";
import {
  type OtlpReceiver,
  type ReceivedSpan,
  startOtlpReceiver,
  taskSpanIdOf,
} from "../support/otlp-receiver.ts";
import { eventually } from "../support/until.ts";

/**
 * One request, one trace: `arbor serve --example offsite` (a 3-level tree with tool calls, an
 * approval and a corrective round) exporting through the real OpenTelemetry SDK over OTLP/HTTP to a
 * receiver here. The caller sends its own `traceparent`: every span Arbor makes for the request is
 * in that trace, linked request -> plan -> task -> subtask -> model call / tool call.
 */
const CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN = "00f067aa0ba902b7";

let dir: string;
let receiver: OtlpReceiver;
let served: Served;
let key: string;
let headers: Record<string, string>;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-otel-"));
  receiver = await startOtlpReceiver();
  const env = arborEnv(join(dir, "data"), {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_SERVICE_NAME: "arbor-under-test",
    OTEL_BSP_SCHEDULE_DELAY: "200",
    OTEL_METRIC_EXPORT_INTERVAL: "300",
  });
  key = await addKey(env, "user_ada");
  headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  served = await startServe(env, ["--example", "offsite"]);
}, 60_000);
afterAll(async () => {
  await killAll();
  await receiver?.close();
  await rm(dir, { recursive: true, force: true });
});

const taskUrl = (urn: string) => `${served.url}/v1/tasks/${encodeURIComponent(urn)}`;
const inTrace = (traceId: string) => receiver.spans.filter((s) => s.traceId === traceId);
const byId = (spans: ReceivedSpan[]) => new Map(spans.map((s) => [s.spanId, s]));

describe("traces of a request (arbor serve, OTLP http/json)", () => {
  let root: string;
  let spans: ReceivedSpan[];

  beforeAll(async () => {
    expect(served.output()).toMatch(/Traces: OTLP http\/json to http:\/\/127\.0\.0\.1/);
    const res = await fetch(`${served.url}/v1/messages`, {
      method: "POST",
      headers: { ...headers, traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` },
      body: JSON.stringify({ text: REQUEST }),
    });
    expect(res.status).toBe(202);
    root = ((await res.json()) as { rootTaskId: string }).rootTaskId;
    const asked = await eventually(
      async () =>
        (await (await fetch(`${taskUrl(root)}/interactions`, { headers })).json()) as {
          interactions: { links: { answer: string } }[];
        },
      (b) => b.interactions.length > 0,
      60_000,
    );
    // Approved from a request of its own, in a trace of its own: the wait links to it.
    const answered = await fetch(`${served.url}${asked.interactions[0]?.links.answer}`, {
      method: "POST",
      headers,
      body: JSON.stringify({ selectedOptionId: "approve" }),
    });
    expect(answered.status).toBe(204);
    await eventually(
      async () => (await (await fetch(taskUrl(root), { headers })).json()) as { task: { status: string } },
      (b) => b.task.status === "done",
      90_000,
    );
    // The root task's span is written when it ends: the last of the trace to arrive.
    await eventually(
      async () => inTrace(CALLER_TRACE),
      (s) => s.some((x) => x.spanId === taskSpanIdOf(root)),
      30_000,
    );
    spans = inTrace(CALLER_TRACE);
  }, 240_000);

  it("puts everything the request caused in the caller's trace, from the HTTP call down", () => {
    const server = spans.find((s) => s.name === "POST /v1/messages");
    expect(server).toMatchObject({ kind: 2, parentSpanId: CALLER_SPAN, service: "arbor-under-test" });
    expect(server?.attributes).toMatchObject({
      "http.route": "/v1/messages",
      "http.response.status_code": 202,
    });
    const planner = spans.find((s) => s.name === "invoke_agent planner");
    expect(planner?.parentSpanId).toBe(server?.spanId);
    expect(planner?.attributes).toMatchObject({
      "gen_ai.operation.name": "invoke_agent",
      "arbor.tenant": "acme",
    });
    // Every span's parent is in the trace too (the caller's own span aside): nothing dangles.
    const ids = byId(spans);
    for (const s of spans)
      if (s !== server) expect(ids.has(s.parentSpanId), `${s.name} -> ${s.parentSpanId}`).toBe(true);
  });

  it("gives each task an invoke_agent span with the id of its URN, a child of its parent task's", () => {
    const ids = byId(spans);
    const tasks = spans.filter((s) => s.attributes["arbor.task.urn"] && s.name.startsWith("invoke_agent "));
    const rootSpan = ids.get(taskSpanIdOf(root));
    expect(rootSpan?.parentSpanId).toBe(spans.find((s) => s.name === "invoke_agent planner")?.spanId);
    expect(rootSpan?.attributes).toMatchObject({
      "gen_ai.operation.name": "invoke_agent",
      "arbor.task.urn": root,
      "arbor.task.depth": 1,
      "arbor.task.status": "done",
      "arbor.cost.usd": 0,
    });
    expect(Number(rootSpan?.attributes["gen_ai.usage.input_tokens"])).toBeGreaterThan(0);
    const depths = new Set(tasks.map((t) => t.attributes["arbor.task.depth"]));
    expect([...depths].sort()).toEqual([1, 2, 3]);
    for (const t of tasks) {
      const urn = String(t.attributes["arbor.task.urn"]);
      expect(t.spanId).toBe(taskSpanIdOf(urn));
      if (urn !== root) expect(t.parentSpanId).toBe(taskSpanIdOf(urn.slice(0, urn.lastIndexOf("/"))));
      expect(typeof t.attributes["gen_ai.agent.name"]).toBe("string");
      expect(t.attributes["arbor.election.score"]).toEqual(expect.any(Number));
      // A task's span covers its children's.
      const parent = ids.get(t.parentSpanId);
      if (parent?.attributes["arbor.task.urn"]) {
        expect(t.startNs).toBeGreaterThanOrEqual(parent.startNs);
        expect(t.endNs).toBeLessThanOrEqual(parent.endNs);
      }
    }
  });

  it("records model calls as chat spans and tool calls as execute_tool spans, under their task", () => {
    const ids = byId(spans);
    const chats = spans.filter((s) => s.name.startsWith("chat "));
    expect(chats.length).toBeGreaterThan(5);
    for (const c of chats) {
      expect(c.kind).toBe(3); // CLIENT
      expect(c.attributes).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "arbor.scripted",
        "gen_ai.request.model": "scripted",
        "gen_ai.response.model": "scripted",
      });
      expect(c.attributes["gen_ai.usage.input_tokens"]).toEqual(expect.any(Number));
      expect(c.attributes["gen_ai.usage.output_tokens"]).toEqual(expect.any(Number));
      expect(c.attributes["gen_ai.response.finish_reasons"]).toEqual([expect.any(String)]);
      const parent = ids.get(c.parentSpanId);
      expect(parent?.name, c.name).toMatch(/^(invoke_agent |evaluate$)/);
    }
    const tools = spans.filter((s) => s.name.startsWith("execute_tool "));
    expect(tools.map((t) => t.attributes["gen_ai.tool.name"]).sort()).toEqual(
      expect.arrayContaining(["calculator", "send_email", "word_count"]),
    );
    for (const t of tools) {
      expect(t.attributes).toMatchObject({
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.call.id": expect.any(String),
        "arbor.policy.decision": "allow",
        "arbor.tool.outcome": "ok",
      });
      const task = ids.get(t.parentSpanId);
      expect(task?.attributes["arbor.task.urn"]).toBe(t.attributes["arbor.task.urn"]);
    }
    const evaluations = spans.filter((s) => s.name === "evaluate");
    expect(evaluations.length).toBeGreaterThanOrEqual(2);
    // The agenda misses a team dinner once: a corrective round, judged again.
    expect(new Set(evaluations.map((e) => e.attributes["arbor.evaluation.round"])).size).toBeGreaterThan(1);
    expect(spans.some((s) => s.name === "elect")).toBe(true);
  });

  it("shows the wait for a person as a span of its task, linked to the answer's own trace", () => {
    const wait = spans.find((s) => s.name === "await_person confirm_risky_action");
    expect(wait?.attributes).toMatchObject({
      "arbor.interaction.purpose": "confirm_risky_action",
      "arbor.interaction.answered_by": "user_ada",
      "arbor.interaction.option": "approve",
    });
    expect(wait?.parentSpanId).toBe(taskSpanIdOf(String(wait?.attributes["arbor.task.urn"])));
    expect(wait?.links).toHaveLength(1);
    expect(wait?.links[0]?.traceId).not.toBe(CALLER_TRACE);
    const answer = receiver.spans.find((s) => s.spanId === wait?.links[0]?.spanId);
    expect(answer?.name).toMatch(/^POST \/v1\/interactions/);
  });

  it("exports the GenAI client metrics and Arbor's counts beside the spans", async () => {
    // Cumulative sums: the last export holds the totals.
    const last = (metric: string, match: (a: Record<string, unknown>) => boolean) =>
      receiver.points.filter((p) => p.metric === metric && match(p.attributes)).at(-1);
    const got = await eventually(
      async () => last("arbor.tasks", (a) => a["arbor.task.status"] === "done"),
      (p) => (p?.value ?? 0) >= 7,
      30_000,
    );
    expect(got?.value).toBeGreaterThanOrEqual(7);
    const input = last("gen_ai.client.token.usage", (a) => a["gen_ai.token.type"] === "input");
    expect(input?.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "arbor.scripted",
    });
    expect(input?.count).toBeGreaterThan(5);
    expect(
      last("gen_ai.client.token.usage", (a) => a["gen_ai.token.type"] === "output")?.sum,
    ).toBeGreaterThan(0);
    expect(last("gen_ai.client.operation.duration", () => true)?.count).toBeGreaterThan(5);
    // The one question was asked and answered: none waits.
    expect(last("arbor.approvals.waiting", () => true)?.value).toBe(0);
  });

  it("carries no key, and no prompt or completion text unless the operator turns it on", () => {
    const text = JSON.stringify(receiver.spans.map((s) => s.attributes));
    expect(text).not.toContain(key);
    expect(text).not.toMatch(/arbor_[A-Za-z0-9]{8,}/);
    expect(text).not.toContain(REQUEST.slice(0, 40));
    // Not even the plan's words: a task's title is the planner's, often the person's own.
    expect(text).not.toContain("Plan the offsite");
    for (const s of receiver.spans) {
      expect(Object.keys(s.attributes)).not.toContain("gen_ai.input.messages");
      expect(Object.keys(s.attributes)).not.toContain("gen_ai.tool.call.arguments");
    }
  });
});

describe("traces of arbor run", () => {
  it("exports the run's trace, from its plan to the root task's end, before the command exits", async () => {
    const before = receiver.spans.length;
    const env = arborEnv(join(dir, "run-data"), {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_METRICS_EXPORTER: "none",
    });
    // No answer in the terminal: the request ends canceled at its question, and the command exits.
    const run = await arborCli(["run", "--example", "offsite"], env);
    expect(run.code).toBe(1);
    // The run's own: the server above (another service) may still be exporting late spans of its own.
    const spans = receiver.spans.slice(before).filter((s) => s.service !== "arbor-under-test");
    const planner = spans.find((s) => s.name === "invoke_agent planner");
    expect(planner).toBeDefined();
    const root = spans.find((s) => s.attributes["arbor.task.depth"] === 1);
    expect(root).toMatchObject({ traceId: planner?.traceId, parentSpanId: planner?.spanId });
    expect(root?.attributes["arbor.task.status"]).toBe("canceled");
    expect(spans.every((s) => s.traceId === planner?.traceId)).toBe(true);
  }, 120_000);
});
