import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { argumentsHash } from "../../shared/domain/events.ts";
import type { AuditLog, ToolCallRecord } from "../../shared/ports/audit-log.ts";

/** The one contract every AuditLog adapter passes. */
export function auditLogContract(
  name: string,
  setup: () => Promise<{ audit: AuditLog; cleanup: () => Promise<void> }>,
): void {
  describe(`AuditLog contract: ${name}`, () => {
    let audit: AuditLog;
    let cleanup: () => Promise<void>;
    beforeEach(async () => {
      ({ audit, cleanup } = await setup());
    });
    afterEach(() => cleanup());

    const task = "cld:common.Tenant.acme/common.Conversation.c/common.Message.m/plan.Task.t1";
    const record = (callId: string, stage: ToolCallRecord["stage"], extra: Partial<ToolCallRecord> = {}) =>
      ({
        at: "2026-06-01T09:00:00.000Z",
        taskId: task,
        callId,
        tool: "sha256",
        actor: "cld:common.Tenant.acme/common.Assistant.a1",
        argumentsHash: argumentsHash({ text: callId }),
        stage,
        ...extra,
      }) satisfies ToolCallRecord;

    it("keeps a task's records in the order they were added, with every field", async () => {
      await audit.record([record("c1", "requested")]);
      await audit.record([
        record("c1", "completed", { durationMs: 3.5, resultUrn: `${task}/common.Message.r` }),
      ]);
      await audit.record([
        record("c2", "requested"),
        record("c2", "failed", { durationMs: 1, reason: "invalid_arguments", error: "text: is required" }),
      ]);
      const got = await audit.forTask(task);
      expect(got.map((r) => `${r.callId}:${r.stage}`)).toEqual([
        "c1:requested",
        "c1:completed",
        "c2:requested",
        "c2:failed",
      ]);
      expect(got[1]).toEqual(
        record("c1", "completed", { durationMs: 3.5, resultUrn: `${task}/common.Message.r` }),
      );
      expect(got[3]).toMatchObject({ reason: "invalid_arguments", error: "text: is required" });
    });

    it("records a record written again once (a step retried after a crash)", async () => {
      await audit.record([record("c1", "requested")]);
      await audit.record([record("c1", "requested"), record("c1", "completed", { durationMs: 2 })]);
      expect((await audit.forTask(task)).map((r) => r.stage)).toEqual(["requested", "completed"]);
    });

    it("records every attempt of a call, each with its number; a rewrite of one attempt stays one record", async () => {
      // Attempt 1 started and never ended (a crash); attempt 2 ran it again, and its records were
      // written twice (the same write retried).
      await audit.record([record("c1", "requested")]);
      await audit.record([record("c1", "requested", { attempt: 2 })]);
      await audit.record([
        record("c1", "requested", { attempt: 2 }),
        record("c1", "completed", { attempt: 2, durationMs: 5 }),
      ]);
      await audit.record([record("c1", "completed", { attempt: 2, durationMs: 5 })]);
      // A third attempt that failed: a record of its own, not hidden by attempt 2's.
      await audit.record([
        record("c1", "requested", { attempt: 3 }),
        record("c1", "failed", { attempt: 3, durationMs: 1, reason: "error", error: "boom" }),
      ]);
      const got = await audit.forTask(task);
      expect(got.map((r) => `${r.stage}:${r.attempt ?? 1}`)).toEqual([
        "requested:1",
        "requested:2",
        "completed:2",
        "requested:3",
        "failed:3",
      ]);
      expect(got[2]).toEqual(record("c1", "completed", { attempt: 2, durationMs: 5 }));
      // Attempt 1 written again with its number spelled out is still attempt 1's one record.
      await audit.record([record("c1", "requested", { attempt: 1 })]);
      expect(await audit.forTask(task)).toHaveLength(5);
    });

    it("keeps a stored result's URN and length", async () => {
      const resultUrn = `${task}/common.Message.r`;
      await audit.record([record("c1", "completed", { durationMs: 2, resultUrn, resultChars: 5_000_000 })]);
      expect(await audit.forTask(task)).toEqual([
        record("c1", "completed", { durationMs: 2, resultUrn, resultChars: 5_000_000 }),
      ]);
    });

    it("keeps tasks apart, and knows nothing of a task without calls", async () => {
      const other = `${task}x`;
      await audit.record([
        record("c1", "requested"),
        { ...record("c1", "requested"), taskId: other }, // the same call id in another task
      ]);
      expect((await audit.forTask(task)).map((r) => r.callId)).toEqual(["c1"]);
      expect((await audit.forTask(other)).map((r) => r.callId)).toEqual(["c1"]);
      expect(await audit.forTask(`${task}/plan.Task.none`)).toEqual([]);
    });

    it("refuses a malformed record, writing nothing", async () => {
      await expect(
        audit.record([record("c1", "requested"), { ...record("c2", "requested"), argumentsHash: "nope" }]),
      ).rejects.toThrow();
      expect(await audit.forTask(task)).toEqual([]);
    });
  });
}
