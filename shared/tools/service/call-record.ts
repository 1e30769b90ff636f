import { hash } from "node:crypto";
import { argumentsHash, type ToolFailureReason } from "../../domain/events.ts";
import { type AuditLog, attemptOf, type ToolCallRecord } from "../../ports/audit-log.ts";
import type { CallHistory, ToolContext, ToolResult } from "../../ports/tools.ts";

/**
 * One attempt of a tool call as the audit log sees it, and what the tool service makes of the
 * records of earlier attempts.
 *
 * The idempotency key is the call's, not the attempt's: derived from the task and the model's call
 * id alone, it is the same for every attempt, so a tool that honours it recognises a run after a
 * crash as the repeat it is (a key per attempt would make every attempt look new, which is what the
 * key is there to prevent). The attempt number travels beside it (in the audit, and to the tools
 * that can carry it).
 */
export function idempotencyKeyOf(taskId: string, callId: string): string {
  return `arbor-${hash("sha256", `${taskId}\u0000${callId}`, "base64url").slice(0, 32)}`;
}

/** What the records of one call say of its attempts so far. */
export function historyOf(records: readonly ToolCallRecord[], taskId: string, callId: string): CallHistory {
  const history: CallHistory = { attempts: 0, idempotencyKey: idempotencyKeyOf(taskId, callId) };
  let lastAttempt = 0;
  for (const r of records) {
    if (r.callId !== callId) continue;
    const n = attemptOf(r);
    if (n < lastAttempt) continue;
    if (n > lastAttempt || r.stage !== "requested") {
      history.last = r.stage === "requested" ? "unknown" : r.stage;
      history.lastAt = r.at;
    }
    lastAttempt = n;
  }
  history.attempts = lastAttempt;
  return history;
}

/** Longest error text the model and the audit get (the start of it). */
export const MAX_ERROR_CHARS = 8000;

/** One attempt's audit records: "requested" (maybe), then its outcome, each with the attempt number. */
export class CallRecord {
  readonly #base: Omit<ToolCallRecord, "at" | "stage">;
  readonly #audit: AuditLog;
  readonly #clock: () => Date;
  readonly #started = performance.now();

  constructor(
    tool: string,
    args: Record<string, unknown>,
    context: ToolContext,
    attempt: number,
    options: { audit: AuditLog; clock: () => Date; argumentsHash?: string },
  ) {
    this.#audit = options.audit;
    this.#clock = options.clock;
    this.#base = {
      taskId: context.taskId,
      callId: context.callId,
      tool,
      actor: context.actor,
      // Given when the arguments are no longer at hand (a call settled after a remote agent's push).
      argumentsHash: options.argumentsHash ?? argumentsHash(args),
      ...(attempt > 1 ? { attempt } : {}),
    };
  }

  requested(): Promise<void> {
    return this.#write("requested", {});
  }

  async completed(content: string, stored?: { resultUrn: string; resultChars: number }): Promise<ToolResult> {
    await this.#write("completed", { durationMs: performance.now() - this.#started, ...stored });
    return { content };
  }

  async failed(reason: ToolFailureReason, error: string): Promise<ToolResult> {
    const shown =
      error.length > MAX_ERROR_CHARS ? `${error.slice(0, MAX_ERROR_CHARS - 20)} [... error cut]` : error;
    await this.#write("failed", { durationMs: performance.now() - this.#started, reason, error: shown });
    return { content: shown, isError: true };
  }

  #write(stage: ToolCallRecord["stage"], extra: Partial<ToolCallRecord>): Promise<void> {
    return this.#audit.record([{ at: this.#clock().toISOString(), ...this.#base, stage, ...extra }]);
  }
}

/**
 * A tool's result as text: a string as it is; anything else a binding gave back (it should not) as
 * JSON; undefined when it cannot be made text (nothing, a function, a cycle, a BigInt...).
 */
export function resultText(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  try {
    const text = JSON.stringify(value);
    return typeof text === "string" ? text : undefined;
  } catch {
    return undefined;
  }
}

/** What a tool threw, as a message, whatever it threw (an Error, a string, null, an odd object). */
export function thrownMessage(e: unknown): string {
  if (e instanceof Error) return e.message || e.name || "an error with no message";
  if (typeof e === "string") return e;
  try {
    return `it threw ${JSON.stringify(e) ?? String(e)}`;
  } catch {
    return "it threw a value that cannot be shown";
  }
}

/** What a binding returned instead of text, for the error the model reads. */
export function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (typeof value !== "object") return typeof value;
  return `an object that is not JSON${Array.isArray(value) ? " (an array)" : ""}`;
}

/** A tool that ignores its signal still ends the call when the signal fires. */
export function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}
