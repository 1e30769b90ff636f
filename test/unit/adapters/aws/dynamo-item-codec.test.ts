import { describe, expect, it } from "vitest";
import {
  counterUpdate,
  eventItem,
  recordItem,
  toRecord,
  toStoredEvent,
  versionCondition,
} from "../../../../shared/adapters/aws/dynamo-item-codec.ts";
import type { StoredEvent } from "../../../../shared/domain/events.ts";

/** The state table's items, to and from what the state store port speaks (dynamo-item-codec.ts). */
describe("the DynamoDB item codec", () => {
  it("writes a record as an item and reads it back the same, with its indexes' keys", () => {
    const record = {
      key: "task#cld:common.Tenant.acme/plan.Task.t1",
      kind: "task",
      parent: "cld:common.Tenant.acme",
      status: "in_progress",
      updatedAt: "2026-11-28T10:00:00.000Z",
      expiresAt: "2026-12-28T10:00:00.000Z",
      data: { title: "Plan", n: 3, nested: { ok: true } },
    };
    const item = recordItem(record, 7);
    expect(item).toMatchObject({
      gsi1pk: { S: record.parent },
      gsi1sk: { S: record.key },
      version: { N: "7" },
    });
    expect(item.gsi2pk?.S).toMatch(/^task#in_progress/);
    expect(toRecord(item)).toEqual({ ...record, version: 7 });
  });

  it("rounds an expiry up to the second, so nothing goes before its time", () => {
    const item = recordItem(
      { key: "k", kind: "x", updatedAt: "t", expiresAt: "2026-01-01T00:00:00.001Z", data: {} },
      1,
    );
    expect(toRecord(item).expiresAt).toBe("2026-01-01T00:00:01.000Z");
  });

  it("adds to a counter record in place, each amount as a plain decimal, never over a put record", () => {
    const update = counterUpdate({
      op: "add",
      key: "usage#t1",
      kind: "usage",
      updatedAt: "t",
      amounts: { inputTokens: 120, costUsd: 1e-7 },
    });
    expect(update.UpdateExpression).toBe(
      "SET #key = :key, #kind = :kind, #updatedAt = :u ADD #version :one, #n0 :n0, #n1 :n1",
    );
    expect(update.ConditionExpression).toBe("attribute_not_exists(#data)");
    expect(update.ExpressionAttributeValues[":n1"]).toEqual({ N: "0.00000010000000000000" });
    const stored = {
      pk: { S: "R#usage#t1" },
      sk: { S: "R" },
      key: { S: "usage#t1" },
      kind: { S: "usage" },
      version: { N: "2" },
      updatedAt: { S: "t" },
      n_inputTokens: { N: "240" },
    };
    expect(toRecord(stored).data).toEqual({ inputTokens: 240 });
  });

  it("guards a version: a new record must not exist, a later one must be at the version expected", () => {
    expect(versionCondition(0)).toEqual({ ConditionExpression: "attribute_not_exists(pk)" });
    expect(versionCondition(3)).toMatchObject({ ExpressionAttributeValues: { ":v": { N: "3" } } });
  });

  it("writes an event and reads it back the same; a stream's first event is findable by the stream index", () => {
    const event = {
      id: "evt_1",
      type: "TaskCreated",
      schemaVersion: 1,
      at: "2026-11-28T10:00:00.000Z",
      actor: { kind: "system", id: "engine" },
      payload: { taskId: "cld:common.Tenant.acme/plan.Task.t1" },
      streamId: "cld:common.Tenant.acme/plan.Task.t1",
      seq: 1,
      recordedAt: "2026-11-28T10:00:00.001Z",
    } as unknown as StoredEvent;
    const item = eventItem(event);
    expect(item.gsi3sk).toEqual({ S: event.streamId });
    expect(toStoredEvent(item)).toEqual(event);
    expect(eventItem({ ...event, seq: 2 }).gsi3sk).toBeUndefined();
  });
});
