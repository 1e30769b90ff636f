import { isTaskEvent, type StoredEvent, type TaskEvent, validateEvent } from "../domain/events.ts";
import { isTerminal } from "../domain/task-state.ts";
import { reduceTaskView, type TaskView } from "../domain/task-view.ts";
import { ConflictError, InvalidTransitionError, ValidationError } from "../kernel/errors.ts";
import {
  type AddOp,
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

/** At most this many events in one recordMany: 4 items each (event, id guard, view, child count) <= 100. */
export const RECORD_MANY_LIMIT = 25;

/**
 * Per parent task, a counter record of its children: `created` (TaskCreated recorded) and `ended`
 * (a terminal event recorded). Each is added in the transaction of the event itself, so a
 * redelivered event, which writes nothing, is never counted twice, and siblings ending at the same
 * moment never conflict (adds do not). A supervisor reads it to skip listing the children while
 * some are still running: without it, a parent with n children listed them all on each of their n
 * completions.
 */
export const CHILD_COUNT_KIND = "task-children";
export const childCountKey = (parentTaskId: string) => `children#${parentTaskId}`;
export interface ChildCounts {
  created: number;
  ended: number;
}

/** What an event changes in its parent's child counts: the view before and after it. */
function childCountChange(before: TaskView | undefined, after: TaskView): Partial<ChildCounts> | undefined {
  if (!after.parentTaskId) return undefined;
  if (!before) return { created: 1 };
  if (!isTerminal(before.status) && isTerminal(after.status)) return { ended: 1 };
  return undefined;
}

function childCountOps(changes: Map<string, Partial<ChildCounts>>, updatedAt: string): AddOp[] {
  return [...changes].map(([parent, amounts]) => ({
    op: "add",
    key: childCountKey(parent),
    kind: CHILD_COUNT_KIND,
    updatedAt,
    amounts,
  }));
}

function addChange(into: Map<string, Partial<ChildCounts>>, view: TaskView, change: Partial<ChildCounts>) {
  const parent = view.parentTaskId as string;
  const sum = into.get(parent) ?? {};
  for (const [k, v] of Object.entries(change) as [keyof ChildCounts, number][]) sum[k] = (sum[k] ?? 0) + v;
  into.set(parent, sum);
}

export interface RecordResult {
  view: TaskView;
  /** True when this exact event (by id) was recorded before; nothing was written now. */
  duplicate: boolean;
}

/** childrenMayAllHaveEnded of counts already read (TaskLog.childCounts). */
export function mayAllHaveEnded(counts: Partial<ChildCounts> | undefined): boolean {
  return !counts || (counts.ended ?? 0) >= (counts.created ?? 0);
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
  async record(input: TaskEvent, options: { known?: TaskView | undefined } = {}): Promise<RecordResult> {
    const event = validateEvent(input);
    if (!isTaskEvent(event)) throw new ValidationError(`${event.type} is not a task event`);
    const taskId = event.payload.taskId;
    for (let attempt = 1; ; attempt++) {
      // The view the caller has just read goes for the first try (its record has one version per
      // event, as the view counts them): a write since then conflicts, and the next try reads.
      const known = attempt === 1 && options.known?.taskId === taskId ? options.known : undefined;
      const current = known
        ? { data: known, version: known.version }
        : await this.#state.get<TaskView>(taskId);
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
      const counted = childCountChange(current?.data, view);
      try {
        const result = await this.#state.transact([
          { op: "append", streamId: taskId, events: [event], expectedVersion: version },
          { op: "put", record: toRecord(view), expectedVersion: current?.version ?? 0 },
          ...(counted
            ? childCountOps(new Map([[view.parentTaskId as string, counted]]), view.updatedAt)
            : []),
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
   * TaskCreated: a crash never leaves half a batch. At most RECORD_MANY_LIMIT events (the 100-item
   * limit: an event, its id guard, its view and at most one child count per event), one per task.
   * Events already recorded (by id) are skipped.
   */
  async recordMany(inputs: readonly TaskEvent[]): Promise<TaskView[]> {
    if (inputs.length > RECORD_MANY_LIMIT)
      throw new ValidationError(`recordMany takes at most ${RECORD_MANY_LIMIT} events, not ${inputs.length}`);
    for (let attempt = 1; ; attempt++) {
      const valid = inputs.map((input) => {
        const event = validateEvent(input);
        if (!isTaskEvent(event)) throw new ValidationError(`${event.type} is not a task event`);
        return event;
      });
      // The reads at once, not one after another: on DynamoDB each is a round trip, and a plan
      // of 111 tasks made 222 of them in a row (bench/README.md, the AWS path). Whether an event is
      // on record already, and its task's view, are read together too.
      const [recorded, allRecords] = await Promise.all([
        Promise.all(valid.map((event) => this.#state.findEvent(event.id))),
        Promise.all(valid.map((event) => this.#state.get<TaskView>(event.payload.taskId))),
      ]);
      const events = valid.filter((_, i) => !recorded[i]);
      const records = allRecords.filter((_, i) => !recorded[i]);
      const ops: WriteOp[] = [];
      const views: TaskView[] = [];
      const pending = new Map<
        string,
        { record: StateRecord<TaskView> | undefined; view: TaskView | undefined }
      >();
      const counts = new Map<string, Partial<ChildCounts>>();
      for (const [i, event] of events.entries()) {
        const taskId = event.payload.taskId;
        // One event per task: DynamoDB lets a transaction touch an item only once.
        if (pending.has(taskId))
          throw new ValidationError(`recordMany takes one event per task; ${taskId} has more`);
        const record = records[i];
        const p = { record, view: record?.data };
        pending.set(taskId, p);
        const version = p.view?.version ?? 0;
        const stored: StoredEvent = { ...event, streamId: taskId, seq: version + 1, recordedAt: event.at };
        const before = p.view;
        p.view = reduceTaskView(p.view, stored) as TaskView;
        const counted = childCountChange(before, p.view);
        if (counted) addChange(counts, p.view, counted);
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
      ops.push(...childCountOps(counts, views.at(-1)?.updatedAt ?? new Date(0).toISOString()));
      try {
        await this.#state.transact(ops);
        return views;
      } catch (e) {
        if (!(e instanceof ConflictError) || attempt >= this.#maxAttempts) throw e;
      }
    }
  }

  /**
   * False when some child of the task is certainly still running (fewer of its children have ended
   * than were created), without listing them. True means: list the children to know. Counts start
   * with this version: a parent whose children were created before it has no count of them (or
   * fewer `created` than `ended`), and gets true.
   */
  async childrenMayAllHaveEnded(taskId: string): Promise<boolean> {
    return mayAllHaveEnded(await this.childCounts(taskId));
  }

  /** The task's child counts (a consistent read), undefined when it has none (no child yet, or an older task). */
  async childCounts(taskId: string): Promise<Partial<ChildCounts> | undefined> {
    return (await this.#state.get<Partial<ChildCounts>>(childCountKey(taskId)))?.data;
  }

  /**
   * Direct children of a task, in URN order, as the byParent index lists them: eventually
   * consistent (a DynamoDB GSI). Fine to show; to decide on them, see engine/steps/children.ts.
   */
  async children(taskId: string): Promise<TaskView[]> {
    const records = await collectPages((cursor) =>
      this.#state.byParent<TaskView>(taskId, cursor === undefined ? {} : { cursor }),
    );
    return records.filter((r) => r.kind === TASK_RECORD_KIND).map((r) => r.data);
  }

  /**
   * Tasks in a status whose last event is older than `before`, oldest first (the watchdog's query).
   * From the byStatus index: eventually consistent, so confirm each with `view` before acting.
   */
  async stale(status: TaskView["status"], before: string, limit = 100): Promise<TaskView[]> {
    const page = await this.#state.byStatus<TaskView>(TASK_RECORD_KIND, status, {
      updatedBefore: before,
      limit,
    });
    return page.items.map((r) => r.data);
  }

  /**
   * Rebuilds every TaskView from the event log alone, the way an audit or a migration would.
   * The result equals the stored views when nothing is wrong. A task's view comes from its own
   * stream (the task URN): other streams that hold copies of task events (a request's feed,
   * `feed#<root>`, shared/notify/feed.ts) are no task and are passed over.
   */
  async replay(): Promise<Map<string, TaskView>> {
    const views = new Map<string, TaskView>();
    for await (const event of readAllEvents(this.#state)) {
      if (!isTaskEvent(event) || event.streamId !== event.payload.taskId) continue;
      const next = reduceTaskView(views.get(event.streamId), event);
      if (next) views.set(event.streamId, next);
    }
    return views;
  }

  /** One task's view rebuilt from its own stream alone, as `replay` rebuilds each. */
  async replayOne(taskId: string): Promise<TaskView | undefined> {
    let view: TaskView | undefined;
    for (const event of await this.#state.readStream(taskId)) {
      if (!isTaskEvent(event) || event.payload.taskId !== taskId) continue;
      view = reduceTaskView(view, event) ?? view;
    }
    return view;
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
