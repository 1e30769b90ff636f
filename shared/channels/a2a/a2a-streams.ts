import { createHash } from "node:crypto";
import type {
  Message,
  Part,
  SendMessageRequest,
  StreamResponse,
  SubscribeToTaskRequest,
  Task,
  TaskState,
} from "@a2a-js/sdk";
import { RequestMalformedError, UnsupportedOperationError } from "@a2a-js/sdk/errors";
import type { ServerCallContext } from "@a2a-js/sdk/server";
import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import type { StoredEvent } from "../../domain/events.ts";
import type { InteractionResource } from "../../domain/resources.ts";
import type { Engine } from "../../engine/engine.ts";
import type { ArborLogger } from "../../kernel/logger.ts";
import { isTerminalEvent, readFeed, reconcile } from "../../notify/feed.ts";
import { followFeed } from "../../notify/feed-follow.ts";
import {
  A2A_STATE,
  interactionParts,
  type Outcome,
  outcomeEvents,
  readOutcome,
  type Stamp,
  statusOf,
  textPart,
} from "../../protocols/a2a/a2a-mapping.ts";
import { callerOf, isFinal, linkOf } from "./a2a-store.ts";
import { type A2aVersion, errorOf, shownError } from "./a2a-transport.ts";

/**
 * A2A streams (SendStreamingMessage, SubscribeToTask; 0.3's message/stream and tasks/resubscribe
 * reach the same two methods) as server-sent events of StreamResponses, derived from the
 * request's feed (notify/feed.ts): the Task first, then a status update on every change of the
 * request's A2A state (working, input-required with the question, completed with the artifact,
 * failed, canceled). A stream ends at the final one, and where the task is interrupted
 * (input-required: it waits for the caller's answer, A2A 1.0 §3.1.6/§7.2): the caller answers
 * with a message and subscribes again (SubscribeToTask) to follow the rest.
 *
 * What a stream sends is a function of the feed alone, so it can be replayed and every subscriber
 * gets the same: each event carries the seq of the feed entry that caused it as its SSE id
 * (`<seq>`, or `<seq>.<n>` when one entry gives two events: the artifact and the completed
 * status), its status the time the entry was recorded and a message id derived from the task and
 * the entry; a client that comes back with `Last-Event-ID` (SubscribeToTask) gets exactly what
 * follows it, nothing twice. The Task that opens a fresh stream is the task as GetTask has it
 * (the same status, time and message id for every subscriber), with the id of the feed entry it
 * is as of.
 */
export interface A2aStreamOptions {
  engine: Engine;
  log: ArborLogger;
  stamp: Stamp;
  /** `live` (default): until the task ends; `bounded`: ends after the first events or `maxWaitMs` (API Gateway). */
  mode?: "live" | "bounded";
  maxWaitMs?: number;
  /** How often the feed is reconciled without a wake-up (default 2 s). */
  recheckMs?: number;
}

/** Where a stream's generator leaves the SSE id of each event it yields, for the framing (below). */
const EVENT_IDS = "arbor.a2a.stream.ids";
/** The framing's signal to the generator that the client went away. */
const STREAM_SIGNAL = "arbor.a2a.stream.signal";

/** A position in a stream: a feed seq, and how many of that entry's events were seen (all: Infinity). */
interface StreamPosition {
  seq: number;
  part: number;
}

export function parseStreamEventId(raw: string): StreamPosition {
  const m = /^(0|[1-9][0-9]{0,14})(?:\.([1-9][0-9]?))?$/.exec(raw.trim());
  if (!m)
    throw new RequestMalformedError(
      `Last-Event-ID "${raw.slice(0, 40)}" is not an id this stream sends: send the id of the last event you received (e.g. 41 or 41.1), or none to subscribe afresh`,
    );
  return { seq: Number(m[1]), part: m[2] === undefined ? Number.POSITIVE_INFINITY : Number(m[2]) };
}

function lastEventIdOf(context: ServerCallContext): string | undefined {
  const headers = context.state.get("headers") as Record<string, string | string[] | undefined> | undefined;
  const value = headers?.["last-event-id"];
  const raw = Array.isArray(value) ? value[0] : value;
  return raw === undefined || raw.trim() === "" ? undefined : raw;
}

/** The request's A2A state as the feed tells it, entry by entry (deterministic: replays give the same). */
class FeedState {
  readonly #open = new Map<string, { taskId: string; title: string }>();
  #end: StoredEvent | undefined;
  key = "working";
  readonly rootTaskId: string;

  constructor(rootTaskId: string) {
    this.rootTaskId = rootTaskId;
  }

  /** The new key after `e`, or undefined when the A2A state did not change. */
  apply(e: StoredEvent): string | undefined {
    if (this.#end) return undefined;
    const p = e.payload as { taskId?: string; interactionId?: string; display?: { title: string } };
    if (e.type === "UserInteractionRequested" && p.interactionId && p.taskId)
      this.#open.set(p.interactionId, { taskId: p.taskId, title: p.display?.title ?? "" });
    else if (e.type === "UserInteractionResponded" && p.interactionId) this.#open.delete(p.interactionId);
    else if (isTerminalEvent(e)) {
      if (p.taskId === this.rootTaskId) this.#end = e;
      // A question of a task that has ended waits for nothing.
      for (const [id, q] of this.#open) if (q.taskId === p.taskId) this.#open.delete(id);
    }
    const [first] = this.#open.keys();
    const key = this.#end ? `final:${this.#end.type}` : first ? `input:${first}` : "working";
    if (key === this.key) return undefined;
    this.key = key;
    return key;
  }

  /**
   * How many A2A events the key gives, at most: one, but for the end of a completed request, which
   * gives its answer, each of its files and its status (as many as the answer has files).
   */
  static count(key: string): number {
    return key === "final:TaskCompleted" ? Number.MAX_SAFE_INTEGER : 1;
  }
}

const response = (kind: "task" | "statusUpdate" | "artifactUpdate", value: unknown): StreamResponse =>
  ({ payload: { $case: kind, value } }) as StreamResponse;

export class ArborA2aStreams {
  readonly #o: A2aStreamOptions;
  constructor(options: A2aStreamOptions) {
    this.#o = options;
  }

  /** SendStreamingMessage: the send, acknowledged at once (its Task), then the task as it goes. */
  async *sendMessageStream(
    params: SendMessageRequest,
    context: ServerCallContext,
    send: (params: SendMessageRequest, context: ServerCallContext) => Promise<Message | Task>,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const configuration = {
      acceptedOutputModes: [],
      taskPushNotificationConfig: undefined,
      ...(params.configuration ?? {}),
      returnImmediately: true,
    };
    const answer = await send({ ...params, configuration }, context);
    if (!("id" in answer)) {
      ids(context).push(undefined);
      yield { payload: { $case: "message", value: answer } };
      return;
    }
    yield* this.#follow(answer, context, undefined);
  }

  /** SubscribeToTask: the Task, then what follows; with Last-Event-ID, what follows that event. */
  async *resubscribe(
    params: SubscribeToTaskRequest,
    context: ServerCallContext,
    load: (id: string) => Promise<Task>,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const raw = lastEventIdOf(context);
    const after = raw === undefined ? undefined : parseStreamEventId(raw);
    const task = await load(params.id);
    if (!after && isFinal(task))
      throw new UnsupportedOperationError(
        `Task ${task.id} has ended: read it with GetTask (or subscribe with the Last-Event-ID you have)`,
      );
    yield* this.#follow(task, context, after, () => load(params.id));
  }

  async *#follow(
    task: Task,
    context: ServerCallContext,
    resume: StreamPosition | undefined,
    reload?: () => Promise<Task>,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const { engine } = this.#o;
    const queue = ids(context);
    const link = linkOf(task);
    if (!link) {
      queue.push(undefined);
      yield response("task", task);
      return;
    }
    const root = link.rootTaskId;
    const who = callerOf(context);
    const state = await reconcile(engine.deps, root);
    if (resume && resume.seq > state.version)
      throw new RequestMalformedError(
        `Last-Event-ID ${resume.seq} is past the end of this task's stream (its last entry is ${state.version}): send the id of the last event you received`,
      );
    const after = resume ?? { seq: state.version, part: Number.POSITIVE_INFINITY };
    // The state the feed tells up to where the client is, without sending it again.
    const derived = new FeedState(root);
    let partial: { entry: StoredEvent; key: string } | undefined;
    for await (const page of readFeed(engine.deps, root, 1)) {
      for (const e of page) {
        if (e.seq > after.seq) break;
        const key = derived.apply(e);
        // The client saw part of this entry's events (the artifact, not the status): the rest follows.
        if (key && e.seq === after.seq && after.part < FeedState.count(key)) partial = { entry: e, key };
      }
      if ((page.at(-1)?.seq ?? 0) >= after.seq) break;
    }
    const final = derived.key.startsWith("final");
    const interrupted = derived.key.startsWith("input:");
    if (!resume) {
      // A fresh stream opens with the Task as of the feed's last entry (its id): the task as GetTask
      // has it when it is in the state the feed tells (read again once if not: it was brought up to
      // Arbor's state in between), else as the feed tells it, so that nothing the stream
      // suppresses up to that entry is missing from it.
      let snapshot = task;
      if (!inState(snapshot, derived.key) && reload) snapshot = await reload();
      if (!inState(snapshot, derived.key))
        snapshot = fold(task, await this.#events(derived.key, task, who, this.#o.stamp));
      queue.push(String(state.version));
      yield response("task", snapshot);
      if (final || interrupted || isFinal(snapshot)) return;
    } else if (partial) {
      yield* this.#emit(partial.entry, partial.key, { task, who, queue }, after.part);
      if (final) return;
    } else if (final) return; // it saw the end
    // Interrupted where the client is, and nothing after it yet: nothing to follow until it is answered.
    if (interrupted && after.seq >= state.version) return;
    const controller = new AbortController();
    const outer = context.state.get(STREAM_SIGNAL) as AbortSignal | undefined;
    const stop = () => controller.abort();
    outer?.addEventListener("abort", stop, { once: true });
    const timer = this.#o.mode === "bounded" ? setTimeout(stop, this.#o.maxWaitMs ?? 20_000) : undefined;
    try {
      for await (const item of followFeed(engine.deps, {
        rootTaskId: root,
        within: root,
        after: after.seq,
        ...(this.#o.mode === "bounded" ? { reconciled: state } : {}),
        signal: controller.signal,
        mode: "live",
        ...(this.#o.recheckMs !== undefined ? { recheckMs: this.#o.recheckMs } : {}),
      })) {
        if (item.kind !== "events") continue;
        let sent = false;
        for (const e of item.events) {
          const key = derived.apply(e);
          if (!key) continue;
          yield* this.#emit(e, key, { task, who, queue }, 0);
          sent = true;
          if (key.startsWith("final")) return;
        }
        // Interrupted as of the feed's last entry (not one a replay passes, answered since): the
        // task waits for the client's answer, after which it subscribes again.
        if (derived.key.startsWith("input:") && (item.events.at(-1)?.seq ?? 0) >= state.version) return;
        if (sent && this.#o.mode === "bounded") return; // the client comes back with Last-Event-ID
      }
    } finally {
      clearTimeout(timer);
      outer?.removeEventListener("abort", stop);
      controller.abort();
    }
  }

  /** The events of one change of state, after the first `skip` of them, each with its id. */
  async *#emit(
    e: StoredEvent,
    key: string,
    at: { task: Task; who: ReturnType<typeof callerOf>; queue: (string | undefined)[] },
    skip: number,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const events = await this.#events(key, at.task, at.who, entryStamp(at.task.id, e));
    const count = FeedState.count(key);
    for (const [i, event] of events.entries()) {
      if (i < skip) continue;
      at.queue.push(count === 1 ? String(e.seq) : `${e.seq}.${i + 1}`);
      yield event;
    }
  }

  /** The A2A events of a state (`key`), built from what the engine holds now, stamped with `stamp`. */
  async #events(
    key: string,
    task: Task,
    who: ReturnType<typeof callerOf>,
    stamp: Stamp,
  ): Promise<StreamResponse[]> {
    const { engine } = this.#o;
    const ids = { taskId: task.id, contextId: task.contextId };
    const status = (state: TaskState, parts: Part[]) =>
      response("statusUpdate", { ...ids, status: statusOf(stamp, state, ids, parts), metadata: undefined });
    if (key === "working") return [status(A2A_STATE.working, [textPart("Arbor is working on the request.")])];
    if (key.startsWith("input:")) {
      const urn = key.slice("input:".length);
      const interaction = await engine.deps.resources.get(urn);
      return [
        status(
          A2A_STATE["input-required"],
          interaction?.meta.type === "uip.Interaction"
            ? interactionParts(interaction as InteractionResource)
            : [textPart("Arbor waits for an answer.")],
        ),
      ];
    }
    // The end: the output is written around the terminal event; wait for it briefly.
    const root = (linkOf(task) as { rootTaskId: string }).rootTaskId;
    let outcome: Outcome = await readOutcome(engine, root, who);
    for (let i = 0; i < 100 && (outcome.state === "working" || outcome.state === "input-required"); i++) {
      await new Promise((r) => setTimeout(r, 100));
      outcome = await readOutcome(engine, root, who);
    }
    if (outcome.state === "working" || outcome.state === "input-required")
      outcome =
        key === "final:TaskCompleted"
          ? { state: "completed", title: "", output: "" }
          : { state: key === "final:TaskFailed" ? "failed" : "canceled", reason: "The task ended" };
    return outcomeEvents(ids, outcome, stamp).map((ev) => response(ev.kind as "statusUpdate", ev.data));
  }
}

/** Whether a task is in the A2A state a feed key tells (working: submitted counts, nothing ran yet). */
function inState(task: Task, key: string): boolean {
  const state = task.status?.state;
  if (key === "working") return state === A2A_STATE.working || state === A2A_STATE.submitted;
  if (key.startsWith("input:")) return state === A2A_STATE["input-required"];
  if (key === "final:TaskCompleted") return state === A2A_STATE.completed;
  if (key === "final:TaskFailed") return state === A2A_STATE.failed;
  return state === A2A_STATE.canceled;
}

/**
 * The stamp of the events one feed entry gives: the time it was recorded, and message ids derived
 * from the task and the entry (a UUID of RFC 9562's version 8 over a hash), so that every
 * subscriber, and a replay, sees the same events.
 */
function entryStamp(taskId: string, e: StoredEvent): Stamp {
  let n = 0;
  return {
    now: () => new Date(e.recordedAt),
    newId: () => {
      const hex = createHash("sha256").update(`${taskId}\n${e.seq}\n${n++}`).digest("hex");
      const variant = ((Number.parseInt(hex.slice(16, 17), 16) & 0x3) | 0x8).toString(16);
      return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
    },
  };
}

/** The Task with the status (and artifacts) the events bring it to. */
function fold(task: Task, events: readonly StreamResponse[]): Task {
  let out: Task = { ...task };
  for (const r of events) {
    if (r.payload?.$case === "statusUpdate") out = { ...out, status: r.payload.value.status };
    if (r.payload?.$case === "artifactUpdate" && r.payload.value.artifact) {
      const artifact = r.payload.value.artifact;
      out = {
        ...out,
        artifacts: [...out.artifacts.filter((x) => x.artifactId !== artifact.artifactId), artifact],
      };
    }
  }
  return out;
}

function ids(context: ServerCallContext): (string | undefined)[] {
  let queue = context.state.get(EVENT_IDS) as (string | undefined)[] | undefined;
  if (!queue) {
    queue = [];
    context.state.set(EVENT_IDS, queue);
  }
  return queue;
}

/** A JSON-RPC response as the SDK's transport yields it. */
interface RpcEnvelope {
  jsonrpc: string;
  id: string | number | null;
  result?: unknown;
  error?: unknown;
}

/**
 * The SSE answer to a streaming JSON-RPC call: each `data:` one JSON-RPC response with the
 * request's id, each with the id the stream gave its event. The first envelope is read before the
 * answer starts, so a call refused at once (no such task, a bad Last-Event-ID) throws here and is
 * answered as a plain JSON-RPC error. A failure later is the stream's last event. A comment every
 * `heartbeatMs` while nothing comes keeps proxies from closing it; a client that goes away stops it.
 */
export async function rpcEventStream(
  c: Context,
  out: AsyncGenerator<RpcEnvelope, void, undefined>,
  context: ServerCallContext,
  options: {
    heartbeatMs?: number;
    log?: ArborLogger;
    bounded?: boolean;
    version?: A2aVersion;
    /** Called once when the stream is over (or refused at once): its place among the key's streams. */
    onClose?: () => void;
  } = {},
): Promise<Response> {
  const controller = new AbortController();
  context.state.set(STREAM_SIGNAL, controller.signal);
  const queue = ids(context);
  let first: IteratorResult<RpcEnvelope, void>;
  try {
    first = await out.next();
  } catch (error) {
    controller.abort();
    await out.return?.(undefined);
    options.onClose?.();
    throw error;
  }
  const heartbeatMs = options.heartbeatMs ?? 15_000;
  const frame = (envelope: RpcEnvelope) => {
    const id = queue.shift();
    return `${id !== undefined ? `id: ${id}\n` : ""}data: ${JSON.stringify(envelope)}\n\n`;
  };
  const res = streamSSE(c, async (stream) => {
    const stop = () => controller.abort();
    stream.onAbort(stop);
    c.req.raw.signal.addEventListener("abort", stop, { once: true });
    try {
      let next = first;
      while (!next.done && !controller.signal.aborted) {
        await stream.write(frame(next.value));
        const pending = out.next();
        for (;;) {
          let timer: ReturnType<typeof setTimeout> | undefined;
          const beat = new Promise<"beat">((resolve) => {
            timer = setTimeout(() => resolve("beat"), heartbeatMs);
          });
          const won = await Promise.race([pending, beat]).finally(() => clearTimeout(timer));
          if (won !== "beat") {
            next = won;
            break;
          }
          if (controller.signal.aborted) return;
          await stream.write(": heartbeat\n\n");
        }
      }
    } catch (error) {
      const mapped = shownError(errorOf(error, options.version ?? "1.0"));
      options.log?.warn("A2A stream failed", { error: error as Error });
      const id = first.done ? null : first.value.id;
      await stream.write(`data: ${JSON.stringify({ jsonrpc: "2.0", id, error: mapped })}\n\n`);
    } finally {
      c.req.raw.signal.removeEventListener("abort", stop);
      controller.abort();
      options.onClose?.();
      await out.return?.(undefined);
    }
  });
  // Bounded (behind API Gateway, which buffers the whole answer): a plain body, not chunked.
  if (options.bounded) res.headers.delete("Transfer-Encoding");
  return res;
}
