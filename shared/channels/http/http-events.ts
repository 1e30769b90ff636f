import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import type { StoredEvent } from "../../domain/events.ts";
import { isWithin } from "../../domain/urn.ts";
import type { Engine } from "../../engine/engine.ts";
import { NotFoundError, ValidationError } from "../../kernel/errors.ts";
import { readFeed, reconcile, rootTaskOf } from "../../notify/feed.ts";
import { type FeedItem, followFeed, taskOfEvent } from "../../notify/feed-follow.ts";
import { type ApiEnv, asker, errorBody } from "./http-kit.ts";
import { type StreamSlots, throttledMessage } from "./rate-limit.ts";

/**
 * `GET /v1/tasks/:urn/events` with `Accept: text/event-stream`: the task's events and those of
 * every task below it, as server-sent events, from the request's feed (notify/feed.ts):
 *
 *   id: <seq>            the position in the root's feed (a subtask's stream skips the others')
 *   event: <type>        TaskCreated, TaskStarted, UserInteractionRequested, TaskCompleted...
 *   data: <json>         the event (seq, id, type, at, actor, payload)
 *
 * A client that reconnects with `Last-Event-ID: <seq>` (or `?lastEventId=<seq>`, for clients that
 * cannot set headers) reads on after it: nothing missed, nothing twice. When the request has
 * ended and everything is sent, the stream says `event: end` and closes; a reconnect after that
 * gets 204, which tells an EventSource to stop.
 *
 * Two modes (EventStreamOptions.mode, set by the app, not the caller):
 * - `live` (`arbor serve`): follows until the request ends, a comment as heartbeat every 15 s;
 * - `bounded` (the API function: API Gateway's HTTP API buffers a whole response and cuts it at
 *   30 s): answers with what is there, or else with what arrives within `maxWaitMs`, and a
 *   `retry:` field; an EventSource reconnects with Last-Event-ID and misses nothing.
 */
export interface EventStreamOptions {
  mode?: "live" | "bounded";
  /** How often to reconcile the feed without a wake-up (default 2 s). */
  recheckMs?: number;
  /** Live: a heartbeat comment after this long without events (default 15 s). */
  heartbeatMs?: number;
  /** Bounded: how long to wait for a first event (default 20 s, under API Gateway's 30 s). */
  maxWaitMs?: number;
  /** The reconnect delay the stream asks for (`retry:`, default 1 s bounded, 3 s live). */
  retryMs?: number;
  /** Feed events read at once (default 500): what one stream holds at most while its client does not read. */
  pageSize?: number;
  /**
   * How many streams a key and a tenant hold open at once (the app's rate limiter, rate-limit.ts):
   * one more is 429 with Retry-After. Absent: no bound.
   */
  slots?: StreamSlots;
}

export const wantsEventStream = (c: Context): boolean =>
  (c.req.header("accept") ?? "").toLowerCase().includes("text/event-stream");

const LAST_ID = /^(0|[1-9][0-9]{0,14})$/;

/** The seq after which the client reads: Last-Event-ID (header) or ?lastEventId=, else 0. */
function lastEventId(c: Context): number {
  const query = c.req.query();
  const unknown = Object.keys(query).filter((k) => k !== "lastEventId");
  if (unknown.length > 0)
    throw new ValidationError(
      `An event stream takes only ?lastEventId=<seq> (not ${unknown.join(", ")}); fromSeq and limit page the JSON answer`,
    );
  const raw = c.req.header("last-event-id") ?? query.lastEventId;
  if (raw === undefined || raw.trim() === "") return 0;
  if (!LAST_ID.test(raw.trim()))
    throw new ValidationError(
      `Last-Event-ID "${raw.slice(0, 40)}" is not an id this stream sends: send the id of the last event you received (a whole number, e.g. 41), or none to read from the start`,
    );
  return Number(raw.trim());
}

/** An event as the stream sends it: its feed position, without the feed's bookkeeping. */
function eventData(e: StoredEvent): string {
  const { streamId: _s, recordedAt: _r, seq, ...event } = e;
  return JSON.stringify({ seq, ...event });
}

/** The text of one feed item, as server-sent events. */
function frame(item: FeedItem): string {
  if (item.kind === "heartbeat") return ": heartbeat\n\n";
  if (item.kind === "end") return item.complete ? 'event: end\ndata: {"complete":true}\n\n' : "";
  return item.events.map((e) => `id: ${e.seq}\nevent: ${e.type}\ndata: ${eventData(e)}\n\n`).join("");
}

export async function eventStream(
  c: Context<ApiEnv>,
  engine: Engine,
  urn: string,
  options: EventStreamOptions = {},
): Promise<Response> {
  const after = lastEventId(c);
  // The checks of the JSON route: a task the caller may not read is a 403, one that is not there a 404.
  const { view } = await engine.result(urn, asker(c));
  if (!view) throw new NotFoundError("Task", urn);
  const rootTaskId = rootTaskOf(urn);
  const deps = engine.deps;
  const state = await reconcile(deps, rootTaskId);
  if (after > state.version)
    throw new ValidationError(
      `Last-Event-ID ${after} is past the end of this stream (its last event is ${state.version}): send the id of the last event you received, or none to read from the start`,
    );
  const mode = options.mode ?? "live";
  const retryMs = options.retryMs ?? (mode === "bounded" ? 1_000 : 3_000);
  if (state.closed(urn) && !(await anyAfter(engine, rootTaskId, urn, after))) return c.body(null, 204); // over, and nothing left to send: an EventSource stops reconnecting
  const close = options.slots?.openStream(c.get("who")) ?? (() => {});
  if (typeof close !== "function") {
    c.header("Retry-After", String(close.retryAfterSeconds));
    return c.json(errorBody("THROTTLED", throttledMessage(close), { scope: close.scope }), 429);
  }
  const follow = (signal: AbortSignal) =>
    followFeed(deps, {
      rootTaskId,
      within: urn,
      after,
      signal,
      mode,
      // Without a bus (bounded, the API function) nothing can be missed between the two: one reconcile less.
      ...(mode === "bounded" ? { reconciled: state } : {}),
      ...(options.recheckMs !== undefined ? { recheckMs: options.recheckMs } : {}),
      ...(options.heartbeatMs !== undefined ? { heartbeatMs: options.heartbeatMs } : {}),
      ...(options.pageSize !== undefined ? { pageSize: options.pageSize } : {}),
      maxWaitMs: options.maxWaitMs ?? 20_000,
    });

  if (mode === "bounded") {
    // Buffered whole by API Gateway anyway: one body, written once.
    const controller = new AbortController();
    const parts = [`retry: ${retryMs}\n\n`];
    try {
      for await (const item of follow(controller.signal)) parts.push(frame(item));
    } finally {
      close();
    }
    c.header("Cache-Control", "no-cache");
    return c.body(parts.join(""), 200, { "Content-Type": "text/event-stream; charset=utf-8" });
  }

  return streamSSE(c, async (stream) => {
    const controller = new AbortController();
    const stop = () => controller.abort();
    stream.onAbort(stop);
    c.req.raw.signal.addEventListener("abort", stop, { once: true });
    try {
      await stream.write(`retry: ${retryMs}\n\n`);
      for await (const item of follow(controller.signal)) {
        if (stream.aborted) break;
        await stream.write(frame(item)); // waits while the client does not read
      }
    } finally {
      c.req.raw.signal.removeEventListener("abort", stop);
      controller.abort();
      close();
    }
  });
}

/** Whether the (complete) feed holds an event of `within` after `after`. */
async function anyAfter(engine: Engine, rootTaskId: string, within: string, after: number): Promise<boolean> {
  for await (const page of readFeed(engine.deps, rootTaskId, after + 1))
    if (page.some((e) => isWithin(taskOfEvent(e), within))) return true;
  return false;
}
