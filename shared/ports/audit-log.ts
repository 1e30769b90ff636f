import { z } from "zod";
import { ToolFailureReasonSchema } from "../domain/events.ts";

/**
 * The audit log of tool calls, apart from the task log: a call is recorded as completed or failed
 * (and, when it can change something outside, as requested first), with who asked, a hash of the
 * exact arguments and how long it took. Records are only ever added; a record is one task, call and
 * stage, and writing it again (a step retried after a crash) records it once.
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
  durationMs: z.number().min(0).optional(),
  reason: ToolFailureReasonSchema.optional(),
  error: z.string().max(8000).optional(),
  /** A result too large to pass inline, stored as a resource. */
  resultUrn: z.string().max(1000).optional(),
});
export type ToolCallRecord = z.infer<typeof ToolCallRecordSchema>;

export interface AuditLog {
  /** Adds records, in order (idempotent by id). */
  record(records: readonly ToolCallRecord[]): Promise<void>;
  /** A task's records in the order they were added. */
  forTask(taskId: string): Promise<ToolCallRecord[]>;
}
