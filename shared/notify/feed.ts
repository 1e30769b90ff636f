import { type DomainEvent, eventIdFor, isTaskEvent, type StoredEvent } from "../domain/events.ts";
import { isWithin, parentUrn, rootTaskOf as rootOf } from "../domain/urn.ts";
import type { EngineDeps } from "../engine/context.ts";
import { childrenOf } from "../engine/steps/children.ts";
import { ConflictError } from "../kernel/errors.ts";
import type { StateRecord } from "../ports/state-store.ts";

/**
 * The feed of a request: one append-only, gap-free stream per root task, `feed#<rootTaskUrn>`,
 * holding a copy of every task event of every task of the tree (TaskCreated ... TaskCompleted,
 * the questions and their answers), in a stable order. Its seq is what a server-sent event stream
 * calls the event id: a client that reconnects with `Last-Event-ID: 41` reads on from seq 42 and
 * misses nothing (HTTP: channels/http/http-events.ts; A2A: channels/a2a/a2a-streams.ts).
 *
 * The feed is derived from the state, never from the bus: `reconcile` reads what the task streams
 * hold beyond a cursor and copies it, so a lost bus event loses nothing (whoever reads the feed
 * reconciles first), and a wake-up only makes it sooner. Each copy's id is derived from the
 * original's, so the store's id guard records it once; the copied events and the cursor commit in
 * one transaction, conditional on the feed's and the cursor's versions, so two reconcilers of one
 * root at once give one feed with each event once (the loser re-reads and finds nothing left).
 *
 * The cursor record (`feed-cursor#<root>`) keeps, per task of the tree, the last seq copied, its
 * parent, whether its terminal event is copied (`ended`: its stream is not read again) and whether
 * it is `closed` (ended, with every child it created closed: its whole subtree is skipped). A tree
 * whose every task is closed costs two reads per reconcile.
 */
export const FEED_CURSOR_KIND = "feed-cursor";
export const feedStreamOf = (rootTaskId: string): string => `feed#${rootTaskId}`;
export const feedCursorKey = (rootTaskId: string): string => `feed-cursor#${rootTaskId}`;

/**
 * Events per transaction: each takes two items (the event and its id guard), plus the stream's
 * position check and the cursor: 2 * 45 + 2 = 92, under DynamoDB's 100.
 */
export const FEED_BATCH = 45;

/** Task streams read at once while walking the tree. */
const WALK_CONCURRENCY = 16;

export interface TaskMark {
  /** The last seq of the task's stream copied into the feed (0: none yet). */
  seq: number;
  parent?: string;
  /** Its terminal event is copied: no more events come. */
  ended?: true;
  /** Ended, and every child it created is closed: the subtree is done with. */
  closed?: true;
}
export interface FeedCursor {
  tasks: Record<string, TaskMark>;
}

/**
 * The cursor as stored: one record, so kept small (DynamoDB's item limit; MAX_ITEM_BYTES here):
 * each task by its URN below the root (`""` for the root), its parent implied by the URN, its mark
 * as `[seq, flags]` (1: ended, 2: closed), and nothing below a closed task (its subtree is skipped
 * whole). About 60 bytes a task: some 5,000 tasks not yet closed fit in one record.
 */
export interface StoredCursor {
  t: Record<string, [number, number]>;
}

export function encodeCursor(rootTaskId: string, cursor: FeedCursor): StoredCursor {
  const t: Record<string, [number, number]> = {};
  for (const [task, mark] of Object.entries(cursor.tasks)) {
    if (mark.parent && cursor.tasks[mark.parent]?.closed) continue; // below a closed task
    const key = task === rootTaskId ? "" : task.slice(rootTaskId.length + 1);
    t[key] = [mark.seq, (mark.ended ? 1 : 0) | (mark.closed ? 2 : 0)];
  }
  return { t };
}

export function decodeCursor(rootTaskId: string, stored: StoredCursor | undefined): FeedCursor {
  const tasks: Record<string, TaskMark> = {};
  for (const [key, [seq, flags]] of Object.entries(stored?.t ?? {})) {
    const task = key === "" ? rootTaskId : `${rootTaskId}/${key}`;
    const parent = key === "" ? undefined : parentUrn(task);
    tasks[task] = {
      seq,
      ...(parent ? { parent } : {}),
      ...(flags & 1 ? { ended: true as const } : {}),
      ...(flags & 2 ? { closed: true as const } : {}),
    };
  }
  return { tasks };
}

export type FeedDeps = Pick<EngineDeps, "state" | "tasks" | "resources"> & { clock?: () => Date };

export interface ReconcileResult {
  /** Events this call copied into the feed. */
  appended: number;
  /** The feed's last seq after the call. */
  version: number;
  /** The root ended and every task of its tree is closed: the feed is complete. */
  complete: boolean;
  /** Whether a task of the tree (or one above it) is closed: its part of the feed is complete. */
  closed: (taskId: string) => boolean;
  /** Transactions lost to another writer (each was re-read and retried). */
  conflicts: number;
}

const TERMINAL_TYPES = new Set<DomainEvent["type"]>(["TaskCompleted", "TaskFailed", "TaskCanceled"]);
export const isTerminalEvent = (e: Pick<DomainEvent, "type">): boolean => TERMINAL_TYPES.has(e.type);

/** The request's root task of any task URN: the URN up to its first task element. */
export const rootTaskOf = (taskUrn: string): string => rootOf(taskUrn) ?? taskUrn;

/**
 * The stable order of a feed: by time, then task URN, then the task stream's seq. Clocks tick in
 * milliseconds, and a fast run records a child's ending and its parent's in the same one: within
 * one instant, endings come after everything else and deepest first (a parent ends after its
 * children, and is created before them: URN order puts a parent first).
 */
export function feedOrder(a: StoredEvent, b: StoredEvent): number {
  if (a.at !== b.at) return a.at < b.at ? -1 : 1;
  const [ea, eb] = [isTerminalEvent(a), isTerminalEvent(b)];
  if (ea !== eb) return ea ? 1 : -1;
  if (a.streamId !== b.streamId) return (a.streamId < b.streamId ? -1 : 1) * (ea ? -1 : 1);
  return a.seq - b.seq;
}

/** The copy of a task event in the feed of `rootTaskId`: the same event under a derived id. */
export function feedCopy(rootTaskId: string, event: StoredEvent): DomainEvent {
  const { streamId: _s, seq: _q, recordedAt: _r, ...domain } = event;
  return { ...domain, id: eventIdFor("feed", rootTaskId, event.id) } as DomainEvent;
}

/**
 * Copies into the feed of `rootTaskId` whatever its tree's task streams hold beyond the cursor.
 * Safe to run any number of times, at once from several processes, and after a crash at any
 * point: every event ends up in the feed exactly once.
 */
export async function reconcile(
  deps: FeedDeps,
  rootTaskId: string,
  options: { maxAttempts?: number; batch?: number } = {},
): Promise<ReconcileResult> {
  const maxAttempts = options.maxAttempts ?? 20;
  const batch = Math.max(1, Math.min(options.batch ?? FEED_BATCH, FEED_BATCH));
  const feedId = feedStreamOf(rootTaskId);
  let appended = 0;
  let conflicts = 0;
  for (let attempt = 1; ; attempt++) {
    const [record, feedVersion] = await Promise.all([
      deps.state.get<StoredCursor>(feedCursorKey(rootTaskId)),
      deps.state.streamVersion(feedId),
    ]);
    const before = decodeCursor(rootTaskId, record?.data);
    const { pending, after } = await walk(deps, rootTaskId, before);
    const complete = after.tasks[rootTaskId]?.closed === true;
    const closed = (taskId: string) => {
      for (let t: string | undefined = taskId; t && isWithin(t, rootTaskId); t = parentUrn(t))
        if (after.tasks[t]?.closed) return true;
      return false;
    };
    if (pending.length === 0 && sameCursor(encodeCursor(rootTaskId, before), encodeCursor(rootTaskId, after)))
      return { appended, version: feedVersion, complete, closed, conflicts };
    try {
      appended += await copy(deps, rootTaskId, { record, feedVersion, pending, after, batch });
      return {
        appended,
        version: await deps.state.streamVersion(feedId),
        complete,
        closed,
        conflicts,
      };
    } catch (e) {
      if (!(e instanceof ConflictError) || attempt >= maxAttempts) throw e;
      conflicts++; // another reconciler copied first: read again, copy what is left
    }
  }
}

/** Thrown inside `copy` when the store says the batch was recorded before: re-read. */
const copiedBefore = () => new ConflictError("These feed events were copied by another reconciler");

async function copy(
  deps: FeedDeps,
  rootTaskId: string,
  plan: {
    record: StateRecord<StoredCursor> | undefined;
    feedVersion: number;
    pending: StoredEvent[];
    after: FeedCursor;
    batch: number;
  },
): Promise<number> {
  const feedId = feedStreamOf(rootTaskId);
  let feedVersion = plan.feedVersion;
  let cursorVersion = plan.record?.version ?? 0;
  // What the cursor says after each batch: the seqs copied so far; the rest (ended, closed) last.
  const progress = decodeCursor(rootTaskId, plan.record?.data);
  let copied = 0;
  for (let i = 0; i === 0 || i < plan.pending.length; i += plan.batch) {
    const chunk = plan.pending.slice(i, i + plan.batch);
    const last = i + plan.batch >= plan.pending.length;
    for (const e of chunk) {
      const mark = plan.after.tasks[e.streamId] as TaskMark;
      const was = progress.tasks[e.streamId];
      progress.tasks[e.streamId] = {
        ...(was ?? {}),
        ...(mark.parent ? { parent: mark.parent } : {}),
        seq: e.seq,
        ...(isTerminalEvent(e) ? { ended: true as const } : {}),
      };
    }
    const cursor = last ? plan.after : progress;
    const ops = [
      ...(chunk.length > 0
        ? [
            {
              op: "append" as const,
              streamId: feedId,
              events: chunk.map((e) => feedCopy(rootTaskId, e)),
              expectedVersion: feedVersion,
            },
          ]
        : []),
      {
        op: "put" as const,
        record: {
          key: feedCursorKey(rootTaskId),
          kind: FEED_CURSOR_KIND,
          updatedAt: (deps.clock?.() ?? new Date()).toISOString(),
          data: encodeCursor(rootTaskId, cursor),
        },
        expectedVersion: cursorVersion,
      },
    ];
    const result = await deps.state.transact(ops);
    if (result.duplicate) throw copiedBefore();
    feedVersion += chunk.length;
    cursorVersion += 1;
    copied += chunk.length;
    if (last) break;
  }
  return copied;
}

/** Walks the tree from the root, level by level: the events beyond the cursor, and the cursor after them. */
async function walk(
  deps: FeedDeps,
  rootTaskId: string,
  before: FeedCursor,
): Promise<{ pending: StoredEvent[]; after: FeedCursor }> {
  const after: FeedCursor = { tasks: {} };
  for (const [task, mark] of Object.entries(before.tasks)) after.tasks[task] = { ...mark };
  const kids = new Map<string, string[]>();
  for (const [task, mark] of Object.entries(after.tasks))
    if (mark.parent) kids.set(mark.parent, [...(kids.get(mark.parent) ?? []), task]);
  const created = new Map<string, number>();
  const pending: StoredEvent[] = [];
  const levels: string[][] = [];
  let level = after.tasks[rootTaskId]?.closed ? [] : [rootTaskId];
  while (level.length > 0) {
    levels.push(level);
    const next: string[] = [];
    await eachLimited(level, WALK_CONCURRENCY, async (task) => {
      const mark = after.tasks[task] ?? { seq: 0 };
      after.tasks[task] = mark;
      const [events, counts] = await Promise.all([
        mark.ended ? [] : deps.state.readStream(task, { fromSeq: mark.seq + 1 }),
        deps.tasks.childCounts(task),
      ]);
      for (const e of events) {
        if (!isTaskEvent(e)) continue;
        pending.push(e);
        mark.seq = e.seq;
        if (isTerminalEvent(e)) mark.ended = true;
      }
      // Tasks created before child counts existed have none: their children are not looked for.
      const made = counts?.created ?? 0;
      created.set(task, made);
      const known = kids.get(task) ?? [];
      if (made > known.length) {
        for (const child of await childrenOf(deps, task)) {
          if (after.tasks[child.taskId]) continue;
          after.tasks[child.taskId] = { seq: 0, parent: task };
          known.push(child.taskId);
        }
        kids.set(task, known);
      }
      for (const child of known) if (!after.tasks[child]?.closed) next.push(child);
    });
    level = next;
  }
  // Bottom up: a task is closed once it ended and every child it made is closed.
  for (const lv of levels.reverse())
    for (const task of lv) {
      const mark = after.tasks[task] as TaskMark;
      const known = kids.get(task) ?? [];
      if (
        mark.ended &&
        known.length >= (created.get(task) ?? 0) &&
        known.every((c) => after.tasks[c]?.closed)
      )
        mark.closed = true;
    }
  pending.sort(feedOrder);
  return { pending, after };
}

function sameCursor(a: StoredCursor, b: StoredCursor): boolean {
  const ka = Object.keys(a.t);
  if (ka.length !== Object.keys(b.t).length) return false;
  return ka.every((k) => {
    const [x, y] = [a.t[k], b.t[k]];
    return x !== undefined && y !== undefined && x[0] === y[0] && x[1] === y[1];
  });
}

async function eachLimited<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++] as T);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** Reads the feed from `fromSeq` on, in pages. */
export async function* readFeed(
  deps: Pick<EngineDeps, "state">,
  rootTaskId: string,
  fromSeq: number,
  pageSize = 500,
): AsyncGenerator<StoredEvent[]> {
  for (let from = fromSeq; ; ) {
    const page = await deps.state.readStream(feedStreamOf(rootTaskId), { fromSeq: from, limit: pageSize });
    if (page.length > 0) yield page;
    if (page.length < pageSize) return;
    from = (page.at(-1) as StoredEvent).seq + 1;
  }
}
