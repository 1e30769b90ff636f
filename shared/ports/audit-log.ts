import * as z from "zod";
import { ToolFailureReasonSchema } from "../domain/events.ts";

/**
 * The audit log of tool calls, apart from the task log: a call is recorded as completed or failed
 * (and, when it can change something outside, as requested first), with who asked, a hash of the
 * exact arguments and how long it took. Records are only ever added. A call may run more than once
 * (a step re-driven after a crash runs it again): each run is an attempt, numbered from 1, and has
 * its own records. A record is one task, call, attempt and stage: writing it again (the same write
 * retried) records it once, but a new attempt is always a new record.
 */
export const ToolCallRecordSchema = z.object({
  at: z.iso.datetime(),
  taskId: z.string().min(1).max(1000),
  /** The model's id for the call: it pairs the records of one call. */
  callId: z.string().min(1).max(128),
  tool: z.string().min(1).max(64),
  /** Who asked: the assistant's URN. */
  actor: z.string().min(1).max(1000),
  /** sha256 of the arguments as the model sent them (the arguments may hold what should not be logged). */
  argumentsHash: z.string().regex(/^[0-9a-f]{64}$/),
  stage: z.enum(["requested", "completed", "failed"]),
  /** Which run of the call this is (1 when absent: records written before attempts were counted). */
  attempt: z.number().int().min(1).max(1000).optional(),
  durationMs: z.number().min(0).optional(),
  reason: ToolFailureReasonSchema.optional(),
  error: z.string().max(8000).optional(),
  /** A result too large to pass inline, stored as a resource. */
  resultUrn: z.string().max(2000).optional(),
  /** How long the result was, in characters, as the tool gave it (when it was stored as a resource). */
  resultChars: z.number().int().min(0).optional(),
});
export type ToolCallRecord = z.infer<typeof ToolCallRecordSchema>;

/** The attempt a record belongs to (records from before attempts were counted are attempt 1). */
export const attemptOf = (r: Pick<ToolCallRecord, "attempt">): number => r.attempt ?? 1;

/**
 * A record's identity within its task: call, attempt and stage. Attempt 1 keeps the form records
 * had before attempts were counted, so that rewriting one of those is still recognised.
 */
export const recordIdOf = (r: Pick<ToolCallRecord, "callId" | "stage" | "attempt">): string =>
  attemptOf(r) === 1 ? `${r.callId}:${r.stage}` : `${r.callId}:${r.stage}:${attemptOf(r)}`;

export interface AuditLog {
  /** Adds records, in order (idempotent by task and record id: see recordIdOf). */
  record(records: readonly ToolCallRecord[]): Promise<void>;
  /** A task's records in the order they were added. */
  forTask(taskId: string): Promise<ToolCallRecord[]>;
}
