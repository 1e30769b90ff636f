import { afterEach, describe, expect, it, vi } from "vitest";
import { createStepHandler } from "../../../functions/engine-step.ts";
import { EmfMetrics, METRICS_NAMESPACE } from "../../../shared/adapters/aws/emf-metrics.ts";
import { meteredAudit, meteredLlm } from "../../../shared/adapters/shared/metered.ts";
import type { AuditLog, ToolCallRecord } from "../../../shared/ports/audit-log.ts";
import type { Llm, LlmResponse } from "../../../shared/ports/llm.ts";
import type { InvocationMetrics, MetricName } from "../../../shared/ports/metrics.ts";
import { loadConfig } from "../../../shared/runtime/config.ts";

/** A metrics port that keeps what it was given. */
function recorder() {
  const added: [MetricName, number][] = [];
  const flushed: Record<string, string>[] = [];
  const metrics: InvocationMetrics = {
    add: (name, value) => added.push([name, value]),
    flush: (dimensions) => flushed.push({ ...dimensions }),
  };
  return { metrics, added, flushed };
}

const response: LlmResponse = {
  content: "hi",
  toolCalls: [],
  stopReason: "end_turn",
  usage: { inputTokens: 120, outputTokens: 30 },
  model: "m",
};
const llm: Llm = {
  id: "fake",
  complete: async () => response,
  async *stream() {
    yield { type: "text", delta: "hi" };
    yield { type: "done", response };
  },
};

afterEach(() => {
  vi.restoreAllMocks();
});

describe("metrics", () => {
  it("are written as CloudWatch EMF in the Arbor namespace, with the stage and route dimensions", () => {
    const lines: string[] = [];
    vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    });
    const emf = new EmfMetrics();
    emf.add("StepSucceeded", 1);
    emf.add("StepDuration", 42, "Milliseconds");
    emf.flush({ stage: "prod", route: "plan" });
    const out = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => "_aws" in l);
    expect(out).toMatchObject({
      _aws: {
        CloudWatchMetrics: [
          {
            Namespace: METRICS_NAMESPACE,
            Dimensions: [["service", "stage", "route"]],
            Metrics: [
              { Name: "StepSucceeded", Unit: "Count" },
              { Name: "StepDuration", Unit: "Milliseconds" },
            ],
          },
        ],
      },
      service: "arbor",
      stage: "prod",
      route: "plan",
      StepSucceeded: 1,
      StepDuration: 42,
    });
    expect(METRICS_NAMESPACE).toBe("Arbor");
  });

  it("count each model call and its tokens, streamed or not, without changing the answer", async () => {
    const { metrics, added } = recorder();
    const metered = meteredLlm(llm, metrics);
    expect(await metered.complete({ messages: [] } as never)).toBe(response);
    const events = [];
    for await (const e of metered.stream({ messages: [] } as never)) events.push(e);
    expect(events.map((e) => e.type)).toEqual(["text", "done"]);
    expect(added).toEqual([
      ["ModelCalls", 1],
      ["InputTokens", 120],
      ["OutputTokens", 30],
      ["ModelCalls", 1],
      ["InputTokens", 120],
      ["OutputTokens", 30],
    ]);
  });

  it("count a tool call when it ends (its completed or failed audit record), not when it is requested", async () => {
    const { metrics, added } = recorder();
    const kept: ToolCallRecord[] = [];
    const audit: AuditLog = {
      record: async (r) => {
        kept.push(...r);
      },
      forTask: async () => kept,
    };
    const base = {
      at: "2026-11-25T20:00:00.000Z",
      taskId: "cld:common.Tenant.acme/common.Conversation.c/plan.Task.t",
      tool: "search",
      actor: "cld:common.Tenant.acme/common.Assistant.a",
      argumentsHash: "a".repeat(64),
    };
    const metered = meteredAudit(audit, metrics);
    await metered.record([
      { ...base, callId: "c1", stage: "requested" },
      { ...base, callId: "c1", stage: "completed" },
      { ...base, callId: "c2", stage: "failed", reason: "error" } as ToolCallRecord,
    ]);
    expect(kept).toHaveLength(3);
    expect(await metered.forTask(base.taskId)).toHaveLength(3);
    expect(added).toEqual([
      ["ToolCalls", 1],
      ["ToolCalls", 1],
      ["ToolCallsFailed", 1],
    ]);
  });

  it("count a step that fails, even before the engine is up, under its route", async () => {
    const { metrics, added, flushed } = recorder();
    const handler = createStepHandler({ config: () => loadConfig({}), metrics });
    const event = { id: "e1", source: "arbor.engine", "detail-type": "PlanRequested", detail: {} };
    await expect(handler({ subscription: "plan", event })).rejects.toThrow(/run in aws mode/);
    expect(added.map(([n]) => n)).toEqual(["StepFailed", "StepDuration"]);
    expect(flushed).toEqual([{ stage: "unknown", route: "plan" }]);
    await handler.close();
  });
});
