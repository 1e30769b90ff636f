import { ValidationError } from "../../kernel/errors.ts";
import type { LlmRequest, LlmToolCall, LlmUsage, StopReason } from "../../ports/llm.ts";

/**
 * What the LLM adapters share: request checks made before anything is sent, the retry schedule
 * (exponential backoff with jitter), an abortable sleep, and small helpers to build responses.
 */

/** Attempts per call when the provider throttles or is briefly unavailable (first try included). */
export const DEFAULT_MAX_ATTEMPTS = 4;

/** 250 ms * 2^(attempt-1), capped at 8 s, with "equal jitter" (between half and all of it). */
export function backoffDelayMs(attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(8000, 250 * 2 ** (attempt - 1));
  return ceiling / 2 + random() * (ceiling / 2);
}

/** setTimeout as a promise; rejects with the signal's reason when aborted. */
export function sleepFor(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

export function checkMaxAttempts(owner: string, maxAttempts: number): number {
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) {
    throw new ValidationError(`${owner} maxAttempts must be a positive integer`, [`got ${maxAttempts}`]);
  }
  return maxAttempts;
}

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/**
 * Rejects what no provider would accept, before anything is sent: no messages, a tool name that
 * is not 1-64 of a-z A-Z 0-9 _ -, the same tool twice, a toolChoice without tools or naming a tool
 * that is not offered, a tool result that answers no earlier tool call.
 */
export function checkRequest(request: LlmRequest): void {
  const issues: string[] = [];
  if (request.messages.length === 0) issues.push("messages must not be empty");
  const names = new Set<string>();
  for (const tool of request.tools ?? []) {
    if (!TOOL_NAME.test(tool.name))
      issues.push(`tool name ${JSON.stringify(tool.name)} must match ${TOOL_NAME}`);
    if (names.has(tool.name)) issues.push(`tool ${JSON.stringify(tool.name)} is offered twice`);
    names.add(tool.name);
  }
  const choice = request.toolChoice;
  if (choice !== undefined && choice !== "auto" && names.size === 0) {
    issues.push("toolChoice needs at least one tool in tools");
  }
  if (typeof choice === "object" && names.size > 0 && !names.has(choice.name)) {
    issues.push(`toolChoice names ${JSON.stringify(choice.name)}, which is not among the tools offered`);
  }
  const callIds = new Set<string>();
  request.messages.forEach((m, i) => {
    if (m.role === "assistant") {
      for (const c of m.toolCalls ?? []) callIds.add(c.id);
      if (!m.content && !m.toolCalls?.length) issues.push(`messages[${i}]: assistant message is empty`);
    }
    if (m.role === "tool" && !callIds.has(m.toolCallId)) {
      issues.push(
        `messages[${i}]: tool result for ${JSON.stringify(m.toolCallId)} answers no earlier tool call`,
      );
    }
  });
  if (issues.length > 0) throw new ValidationError("Invalid LLM request", issues);
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A rough token count for backends that report none: about four characters per token. */
export function roughTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

export function zeroUsage(): LlmUsage {
  return { inputTokens: 0, outputTokens: 0 };
}

/** The stop reason when the provider's own one is missing: tool_use when tools were called. */
export function impliedStopReason(toolCalls: readonly LlmToolCall[]): StopReason {
  return toolCalls.length > 0 ? "tool_use" : "end_turn";
}

/** The text of an error and of its causes, for messages and log lines. */
export function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  const own = `${error.name}${typeof code === "string" ? ` ${code}` : ""}: ${error.message}`;
  return error.cause === undefined ? own : `${own} (${describeError(error.cause)})`;
}

/** The network error code (ECONNREFUSED, ENOTFOUND...) of an error or of one of its causes. */
export function networkCode(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e !== undefined && depth < 5; depth++) {
    const code = (e as { code?: unknown } | null)?.code;
    if (typeof code === "string" && /^E[A-Z_]+$/.test(code)) return code;
    e = (e as { cause?: unknown } | null)?.cause;
  }
  return undefined;
}

export function isAbortError(error: unknown): boolean {
  return error instanceof Error && (error.name === "AbortError" || error.name === "TimeoutError");
}
