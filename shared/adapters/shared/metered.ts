import type { AuditLog, ToolCallRecord } from "../../ports/audit-log.ts";
import type { Llm, LlmRequest, LlmResponse, LlmStreamEvent } from "../../ports/llm.ts";
import type { Metrics } from "../../ports/metrics.ts";

/**
 * Counting at the narrowest points, outside the engine: every model call and the tokens it was
 * billed (whatever the step does next, the tokens were spent), and every tool call that ended,
 * when its audit record is written (the one place every tool call passes, built-in, HTTP, Lambda,
 * MCP or A2A). The wrapped ports behave exactly as before.
 */
export function meteredLlm(llm: Llm, metrics: Metrics): Llm {
  const count = (response: LlmResponse) => {
    metrics.add("ModelCalls", 1);
    metrics.add("InputTokens", response.usage.inputTokens);
    metrics.add("OutputTokens", response.usage.outputTokens);
  };
  return {
    id: llm.id,
    ...(llm.probe ? { probe: (signal: AbortSignal) => llm.probe?.(signal) ?? Promise.resolve() } : {}),
    async complete(request: LlmRequest): Promise<LlmResponse> {
      const response = await llm.complete(request);
      count(response);
      return response;
    },
    async *stream(request: LlmRequest): AsyncIterable<LlmStreamEvent> {
      for await (const event of llm.stream(request)) {
        if (event.type === "done") count(event.response);
        yield event;
      }
    },
  };
}

/** Counts each call's end (its completed or failed record); `requested` records are not ends. */
export function meteredAudit(audit: AuditLog, metrics: Metrics): AuditLog {
  return {
    async record(records: readonly ToolCallRecord[]): Promise<void> {
      await audit.record(records);
      for (const r of records) {
        if (r.stage === "requested") continue;
        metrics.add("ToolCalls", 1);
        if (r.stage === "failed") metrics.add("ToolCallsFailed", 1);
      }
    },
    forTask: (taskId) => audit.forTask(taskId),
  };
}
