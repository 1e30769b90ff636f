import type { StoredEvent } from "../domain/events.ts";
import { isWithin } from "../domain/urn.ts";
import { COMMANDS, type EngineDeps, SOURCE } from "../engine/context.ts";
import { ConflictError } from "../kernel/errors.ts";
import { type FeedDeps, feedStreamOf, type ReconcileResult, readFeed, reconcile } from "./feed.ts";

/**
 * Follows the feed of a request for one reader (an SSE stream): reconciles, hands over what is new
 * beyond `after`, then waits for a wake-up (a bus event of the tree), a recheck (in case a wake-up
 * was lost, or there is no bus here: the API function), or a heartbeat; ends when the feed is
 * complete, when the reader goes away (`signal`), or, bounded, after the first batch or `maxWaitMs`.
 *
 * The reader pulls: nothing is read from the feed before it asked for the next item, so a reader
 * that does not read (a stalled client) holds the follower still instead of filling memory.
 */
export interface FollowOptions {
  rootTaskId: string;
  /** Only events of this task and the tasks below it (the root's whole feed: the root). */
  within: string;
  /** The last seq the reader has (0: from the start). */
  after: number;
  signal: AbortSignal;
  /** `live`: until the feed is complete; `bounded`: ends after the first events, or after `maxWaitMs`. */
  mode: "live" | "bounded";
  /** How often to reconcile without a wake-up (default 2 s). */
  recheckMs?: number;
  /** A heartbeat after this long without events (default 15 s). */
  heartbeatMs?: number;
  /** Bounded: the longest wait for a first event (default 25 s). */
  maxWaitMs?: number;
  /**
   * A reconcile the caller has just made: the first round starts from it instead of making another
   * (where no wake-up can come in between: live, a change made before the subscription is seen at the next recheck).
   */
  reconciled?: ReconcileResult;
  /** Feed events read at once (default 500). */
  pageSize?: number;
}

export type FeedItem =
  | { kind: "events"; events: StoredEvent[] }
  | { kind: "heartbeat" }
  /** The last item: the feed is complete for `within` (it and everything below it ended and is copied), or the bounded wait is over. */
  | { kind: "end"; complete: boolean };

/** The task an event of the feed is about. */
export const taskOfEvent = (e: StoredEvent): string =>
  "taskId" in e.payload ? e.payload.taskId : (e.payload as { urn: string }).urn;

/**
 * A reconcile; when it keeps losing to other reconcilers of the root (many readers at once), they
 * are copying: what the feed holds is read as it is, and the next round reconciles again.
 */
async function reconcileOrRead(deps: FeedDeps, rootTaskId: string): Promise<ReconcileResult> {
  try {
    return await reconcile(deps, rootTaskId);
  } catch (error) {
    if (!(error instanceof ConflictError)) throw error;
    const version = await deps.state.streamVersion(feedStreamOf(rootTaskId));
    return { appended: 0, version, complete: false, closed: () => false, conflicts: 0 };
  }
}

let open = 0;
/** Followers running now, each holding its bus subscriptions and at most one timer. Tests read it. */
export const openFollows = (): number => open;
let names = 0;

export async function* followFeed(
  deps: FeedDeps & Pick<EngineDeps, "bus">,
  options: FollowOptions,
): AsyncGenerator<FeedItem, void, undefined> {
  const { rootTaskId, within, signal } = options;
  const recheckMs = options.recheckMs ?? 2_000;
  const heartbeatMs = options.heartbeatMs ?? 15_000;
  const deadline = performance.now() + (options.maxWaitMs ?? 25_000);
  let woken = false;
  let wake: (() => void) | undefined;
  const poke = async () => {
    woken = true;
    wake?.();
  };
  const name = `feed-follow ${++names}`;
  open++;
  const offs = [
    deps.bus.subscribe({
      name: `${name} engine`,
      pattern: { source: [SOURCE], detail: { taskId: [{ prefix: rootTaskId }] } },
      handler: poke,
    }),
    deps.bus.subscribe({
      name: `${name} resources`,
      pattern: {
        source: ["arbor"],
        "detail-type": [COMMANDS.resourcePut],
        // Outputs only: a task's end is what moves the feed, not the other writes announced below it.
        detail: { urn: [{ prefix: rootTaskId }], name: ["output"] },
      },
      handler: poke,
    }),
  ];
  let last = options.after;
  let fresh = options.reconciled;
  let lastSent = performance.now();
  try {
    for (;;) {
      woken = false;
      const state = fresh ?? (await reconcileOrRead(deps, rootTaskId));
      fresh = undefined;
      let sent = false;
      const pages = state.version > last ? readFeed(deps, rootTaskId, last + 1, options.pageSize) : [];
      for await (const page of pages) {
        last = (page.at(-1) as StoredEvent).seq;
        const mine = page.filter((e) => isWithin(taskOfEvent(e), within));
        if (mine.length > 0) {
          if (signal.aborted) return;
          yield { kind: "events", events: mine };
          sent = true;
          lastSent = performance.now();
        }
      }
      if (signal.aborted) return;
      // Its part of the feed is complete: the task (a subtask, or the root) and all below it ended.
      if (state.closed(within) && last >= state.version) {
        yield { kind: "end", complete: true };
        return;
      }
      if (options.mode === "bounded" && (sent || performance.now() >= deadline)) {
        yield { kind: "end", complete: false };
        return;
      }
      if (woken) continue;
      const beatIn = lastSent + heartbeatMs - performance.now();
      const waitMs = Math.max(
        0,
        Math.min(
          recheckMs,
          beatIn,
          options.mode === "bounded" ? deadline - performance.now() : Number.POSITIVE_INFINITY,
        ),
      );
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal.removeEventListener("abort", done);
          wake = undefined;
          resolve();
        };
        const timer = setTimeout(done, waitMs);
        signal.addEventListener("abort", done, { once: true });
        wake = done;
      });
      if (signal.aborted) return;
      if (performance.now() - lastSent >= heartbeatMs) {
        yield { kind: "heartbeat" };
        lastSent = performance.now();
      }
    }
  } finally {
    for (const off of offs) off();
    open--;
  }
}
