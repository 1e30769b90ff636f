import { expiresAfter, RETENTION_MS } from "../../domain/retention.ts";
import { ConflictError } from "../../kernel/errors.ts";
import type { RecordInput, StateRecord, StateStore } from "../../ports/state-store.ts";

/**
 * What the thread sync (sync.ts) knows of one chat thread: the messages Arbor posted in it, and
 * the last snapshot applied. A state record (kind `chat-thread`, key `chat-thread#<subscription key>`,
 * parent `chat-threads#<root task URN>`, status `open`, `done` once the answer is posted, then
 * expiring as a delivered notification does), every write conditional on the version read. How to drive it:
 *
 *   const held = await takeThread(state, key, { rootTaskUrn, channel }, holder, now, leaseMs);
 *   // { thread } | { busy: untilIso }: another worker syncs the thread now (retry soon)
 *   held.thread.data.progress = id; await held.save();   // right after each platform call
 *   await held.release();                                // lets go of the lease
 *
 * The lease (holder, until) keeps two workers from syncing one thread at once; a worker that died
 * holding it is taken over once `until` passes. A save after the lease was taken over fails
 * (ConflictError: the version moved): the sync stops, the other worker goes on.
 */
export const THREAD_KIND = "chat-thread";
export const threadKey = (subscriptionKey: string) => `chat-thread#${subscriptionKey}`;
export const threadsParent = (rootTaskUrn: string) => `chat-threads#${rootTaskUrn}`;

export interface ThreadQuestionState {
  /** The platform's id of the question's message. */
  messageId: string;
  /** Whether the message was updated to show who answered what (or that no answer is needed). */
  answered: boolean;
}

export interface ThreadData {
  subscriptionKey: string;
  rootTaskUrn: string;
  channel: "slack" | "teams";
  /** The progress message's id, once posted. */
  progress?: string;
  /** A hash of what the progress message shows now: it is updated only when that changes. */
  progressShown?: string;
  /** The thread's head (SurfaceContext.threadHead): the first message Arbor posted, when the ref has no thread of its own. */
  threadHead?: string;
  /** The questions posted, by interaction URN. */
  questions: Record<string, ThreadQuestionState>;
  /** The answer's message id, once posted. */
  answer?: string;
  /** The platform asked to wait (a rate limit's Retry-After): nothing is sent to the thread before then. */
  waitUntil?: string;
  /** The seq of the last delivery applied (0: none). */
  appliedSeq: number;
  lease?: { holder: string; until: string };
}

export type ThreadRecord = StateRecord<ThreadData>;

export interface HeldThread {
  thread: ThreadRecord;
  /** Writes `thread.data` as it is now (keeping the lease); ConflictError when the lease was lost. */
  save(): Promise<void>;
  /** Writes `thread.data` without the lease. Quiet when the lease was lost already. */
  release(): Promise<void>;
}

export async function getThread(
  state: StateStore,
  subscriptionKey: string,
): Promise<ThreadRecord | undefined> {
  return state.get<ThreadData>(threadKey(subscriptionKey));
}

/**
 * Takes the thread's lease for `holder` until now + leaseMs (creating the record on first use).
 * `{ busy }`: another holder's lease runs until then.
 */
export async function takeThread(
  state: StateStore,
  subscriptionKey: string,
  about: { rootTaskUrn: string; channel: "slack" | "teams" },
  holder: string,
  clock: () => Date,
  leaseMs: number,
): Promise<{ held: HeldThread } | { busy: string }> {
  const key = threadKey(subscriptionKey);
  const now = clock();
  const current = await state.get<ThreadData>(key);
  const lease = current?.data.lease;
  if (lease && lease.holder !== holder && Date.parse(lease.until) > now.getTime())
    return { busy: lease.until };
  const data: ThreadData = {
    // A copy: the store's records are frozen, and the sync changes this one as it goes.
    ...(current
      ? structuredClone(current.data)
      : { subscriptionKey, ...about, questions: {}, appliedSeq: 0 }),
    lease: { holder, until: new Date(now.getTime() + leaseMs).toISOString() },
  };
  const thread: ThreadRecord = {
    ...input(key, data, current?.status ?? "open", now),
    version: current?.version ?? 0,
  };
  try {
    await write(state, thread);
  } catch (e) {
    if (e instanceof ConflictError) return { busy: new Date(now.getTime() + 1_000).toISOString() };
    throw e;
  }
  const save = async (status?: "done") => {
    thread.status = status ?? thread.status ?? "open";
    thread.updatedAt = clock().toISOString();
    // Once the answer is posted the record only guards against posting again: kept as long as a delivery is.
    if (thread.status === "done")
      thread.expiresAt = expiresAfter(clock(), RETENTION_MS.deliveredNotification);
    await write(state, thread);
  };
  return {
    held: {
      thread,
      save: () => save(thread.data.answer !== undefined ? "done" : undefined),
      release: async () => {
        const { lease: _, ...rest } = thread.data;
        thread.data = rest;
        try {
          await save(thread.data.answer !== undefined ? "done" : undefined);
        } catch (e) {
          if (!(e instanceof ConflictError)) throw e;
        }
      },
    },
  };
}

function input(key: string, data: ThreadData, status: string, now: Date): RecordInput<ThreadData> {
  return {
    key,
    kind: THREAD_KIND,
    parent: threadsParent(data.rootTaskUrn),
    status,
    updatedAt: now.toISOString(),
    data,
  };
}

/** A conditional put of the record at its version; moves the version on. */
async function write(state: StateStore, thread: ThreadRecord): Promise<void> {
  const { version, ...record } = thread;
  await state.transact([{ op: "put", record, expectedVersion: version }]);
  thread.version = version + 1;
}
