import { auditStreamOf, type DomainEvent, EVENT_SCHEMA_VERSION, eventIdFor } from "../../domain/events.ts";
import { ConflictError } from "../../kernel/errors.ts";
import { type AuditLog, attemptOf, type ToolCallRecord } from "../../ports/audit-log.ts";
import type { StateStore } from "../../ports/state-store.ts";

/**
 * The audit log as domain events in a state store's event log, one stream per task
 * (`audit#<task URN>`): what the AWS runtime uses (DynamoDB), and any store that has no audit
 * table of its own. The event id is the record's id (task, call, attempt, stage), so a record
 * written twice is recorded once, and another attempt of a call is another event.
 */
const TYPES = {
  requested: "ToolCallRequested",
  completed: "ToolCallCompleted",
  failed: "ToolCallFailed",
} as const;

export class EventLogAudit implements AuditLog {
  readonly #state: StateStore;

  constructor(state: StateStore) {
    this.#state = state;
  }

  async record(records: readonly ToolCallRecord[]): Promise<void> {
    const byTask = new Map<string, DomainEvent[]>();
    for (const r of records) {
      const events = byTask.get(r.taskId) ?? [];
      events.push(toEvent(r));
      byTask.set(r.taskId, events);
    }
    for (const [taskId, events] of byTask) {
      try {
        await this.#state.append(auditStreamOf(taskId), events, "any"); // all recorded before: a no-op
      } catch (e) {
        if (!(e instanceof ConflictError)) throw e;
        // Some were recorded before (a retried step): append the others. Only then is it worth a read.
        const fresh: DomainEvent[] = [];
        for (const event of events) if (!(await this.#state.findEvent(event.id))) fresh.push(event);
        if (fresh.length > 0) await this.#state.append(auditStreamOf(taskId), fresh, "any");
      }
    }
  }

  async forTask(taskId: string): Promise<ToolCallRecord[]> {
    return (await this.#state.readStream(auditStreamOf(taskId))).flatMap((e) => {
      if (e.type !== "ToolCallRequested" && e.type !== "ToolCallCompleted" && e.type !== "ToolCallFailed")
        return [];
      const { taskId: task, ...payload } = e.payload;
      const stage =
        e.type === "ToolCallRequested"
          ? "requested"
          : e.type === "ToolCallCompleted"
            ? "completed"
            : "failed";
      return [{ at: e.at, taskId: task, actor: e.actor.id, stage, ...payload } as ToolCallRecord];
    });
  }
}

function toEvent(r: ToolCallRecord): DomainEvent {
  const { at, actor, stage, taskId, ...payload } = r;
  return {
    // A record is one task, call, attempt and stage (attempt 1 keeps the id it had before attempts were counted).
    id:
      attemptOf(r) === 1
        ? eventIdFor(taskId, r.callId, stage)
        : eventIdFor(taskId, r.callId, stage, String(r.attempt)),
    v: EVENT_SCHEMA_VERSION,
    at,
    actor: { id: actor, kind: "agent" },
    type: TYPES[stage],
    payload: { taskId, ...payload },
  } as DomainEvent;
}
