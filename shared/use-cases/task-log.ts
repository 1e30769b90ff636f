import { isTaskEvent, type StoredEvent, type TaskEvent, validateEvent } from "../domain/events.ts";
import { reduceTaskView, type TaskView } from "../domain/task-view.ts";
import { ConflictError, InvalidTransitionError, ValidationError } from "../errors.ts";
import {
  collectPages,
  readAllEvents,
  type StateRecord,
  type StateStore,
  type WriteOp,
} from "../ports/state-store.ts";

/**
 * The task log: each task's events in its own stream (the task URN), with its TaskView kept beside
 * it as a state record. Every event is checked against the state machine before it is written, and
 * the event and the new view commit in one transaction, so the view never disagrees with the log.
 */
export const TASK_RECORD_KIND = "task";

export interface RecordResult {
  view: TaskView;
  /** True when this exact event (by id) was recorded before; nothing was written now. */
  duplicate: boolean;
}

export class TaskLog {
  readonly #state: StateStore;
  readonly #maxAttempts: number;

  constructor(state: StateStore, options: { maxAttempts?: number } = {}) {
    this.#state = state;
    this.#maxAttempts = options.maxAttempts ?? 5;
  }

  async view(taskId: string): Promise<TaskView | undefined> {
    return (await this.#state.get<TaskView>(taskId))?.data;
  }

  /**
   * Records one task event. Throws InvalidTransitionError when the state machine forbids it (nothing
   * is written) and ConflictError only if the task keeps changing under us past the retry budget.
   */
  async record(input: TaskEvent): Promise<RecordResult> {
    const event = validateEvent(input);
    if (!isTaskEvent(event)) throw new ValidationError(`${event.type} is not a task event`);
    const taskId = event.payload.taskId;
    for (let attempt = 1; ; attempt++) {
      const current = await this.#state.get<TaskView>(taskId);
      const version = current?.data.version ?? 0;
      const stored: StoredEvent = { ...event, streamId: taskId, seq: version + 1, recordedAt: event.at };
      let view: TaskView;
      try {
        view = reduceTaskView(current?.data, stored) as TaskView; // throws on a forbidden transition
      } catch (e) {
        // A redelivered event usually no longer fits the state it moved the task to.
        if (e instanceof InvalidTransitionError && (await this.#state.findEvent(event.id)))
          return { view: await this.#mustView(taskId), duplicate: true };
        throw e;
      }
      // A redelivered event that still fits is found by the transaction, which then writes nothing.
      try {
        const result = await this.#state.transact([
          { op: "append", streamId: taskId, events: [event], expectedVersion: version },
          { op: "put", record: toRecord(view), expectedVersion: current?.version ?? 0 },
        ]);
        return result.duplicate
          ? { view: await this.#mustView(taskId), duplicate: true }
          : { view, duplicate: false };
      } catch (e) {
        if (!(e instanceof ConflictError) || attempt >= this.#maxAttempts) throw e;
        // Someone else moved the task: re-read and decide again (the transition may no longer hold).
      }
    }
  }

  /**
   * Records several events of different tasks in ONE transaction (all or nothing), e.g. a batch of
   * TaskCreated: a crash never leaves half a batch. At most 30 events (the 100-item limit: an event,
   * its id guard and its view), one per task. Events already recorded (by id) are skipped.
   */
  async recordMany(inputs: readonly TaskEvent[]): Promise<TaskView[]> {
    if (inputs.length > 30)
      throw new ValidationError(`recordMany takes at most 30 events, not ${inputs.length}`);
    for (let attempt = 1; ; attempt++) {
      const events: TaskEvent[] = [];
      for (const input of inputs) {
        const event = validateEvent(input);
        if (!isTaskEvent(event)) throw new ValidationError(`${event.type} is not a task event`);
        if (!(await this.#state.findEvent(event.id))) events.push(event);
      }
      const ops: WriteOp[] = [];
      const views: TaskView[] = [];
      const pending = new Map<
        string,
        { record: StateRecord<TaskView> | undefined; view: TaskView | undefined }
      >();
      for (const event of events) {
        const taskId = event.payload.taskId;
        // One event per task: DynamoDB lets a transaction touch an item only once.
        if (pending.has(taskId))
          throw new ValidationError(`recordMany takes one event per task; ${taskId} has more`);
        const record = await this.#state.get<TaskView>(taskId);
        const p = { record, view: record?.data };
        pending.set(taskId, p);
        const version = p.view?.version ?? 0;
        const stored: StoredEvent = { ...event, streamId: taskId, seq: version + 1, recordedAt: event.at };
        p.view = reduceTaskView(p.view, stored) as TaskView;
        ops.push({ op: "append", streamId: taskId, events: [event], expectedVersion: version });
      }
      for (const [, p] of pending) {
        ops.push({
          op: "put",
          record: toRecord(p.view as TaskView),
          expectedVersion: p.record?.version ?? 0,
        });
        views.push(p.view as TaskView);
      }
      if (ops.length === 0) return [];
      try {
        await this.#state.transact(ops);
        return views;
      } catch (e) {
        if (!(e instanceof ConflictError) || attempt >= this.#maxAttempts) throw e;
      }
    }
  }

  /** Direct children of a task, in URN order. */
  async children(taskId: string): Promise<TaskView[]> {
    const records = await collectPages((cursor) =>
      this.#state.byParent<TaskView>(taskId, cursor === undefined ? {} : { cursor }),
    );
    return records.filter((r) => r.kind === TASK_RECORD_KIND).map((r) => r.data);
  }

  /** Tasks in a status whose last event is older than `before`, oldest first (the watchdog's query). */
  async stale(status: TaskView["status"], before: string, limit = 100): Promise<TaskView[]> {
    const page = await this.#state.byStatus<TaskView>(TASK_RECORD_KIND, status, {
      updatedBefore: before,
      limit,
    });
    return page.items.map((r) => r.data);
  }

  /**
   * Rebuilds every TaskView from the event log alone, the way an audit or a migration would.
   * The result equals the stored views when nothing is wrong.
   */
  async replay(): Promise<Map<string, TaskView>> {
    const views = new Map<string, TaskView>();
    for await (const event of readAllEvents(this.#state)) {
      if (!isTaskEvent(event)) continue;
      const next = reduceTaskView(views.get(event.streamId), event);
      if (next) views.set(event.streamId, next);
    }
    return views;
  }

  async #mustView(taskId: string): Promise<TaskView> {
    const view = await this.view(taskId);
    if (!view) throw new ConflictError(`Task ${taskId} has events but no view yet: try again`);
    return view;
  }
}

function toRecord(view: TaskView): Omit<StateRecord<TaskView>, "version"> {
  const record: Omit<StateRecord<TaskView>, "version"> = {
    key: view.taskId,
    kind: TASK_RECORD_KIND,
    status: view.status,
    updatedAt: view.updatedAt,
    data: view,
  };
  if (view.parentTaskId) record.parent = view.parentTaskId;
  return record;
}
