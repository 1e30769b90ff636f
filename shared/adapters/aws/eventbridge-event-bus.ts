import {
  type EventBridgeClient,
  PutEventsCommand,
  type PutEventsRequestEntry,
  type PutEventsResponse,
} from "@aws-sdk/client-eventbridge";
import * as z from "zod";
import { formatIssues } from "../../domain/resources.ts";
import { type ArborError, UnavailableError, ValidationError } from "../../kernel/errors.ts";
import { componentLogger } from "../../kernel/logger.ts";
import { parseTraceparent } from "../../kernel/tracing.ts";
import type { BusEnvelope, BusEventInput, EventBus, Subscription } from "../../ports/event-bus.ts";
import {
  assertPublishable,
  EVENT_ID_DETAIL_KEY,
  entrySize,
  TRACE_DETAIL_KEY,
  traced,
  wireDetailJson,
} from "../shared/bus-envelope.ts";
import { type CompiledSubscription, SubscriptionRegistry } from "../shared/subscriptions.ts";
import type { SqsCommandQueues } from "./sqs-command-queues.ts";

/**
 * The EventBus port on Amazon EventBridge.
 *
 * - `publish` sends the engine's single-consumer commands to their steps' SQS queues when
 *   `commands` is given (sqs-command-queues.ts), and everything else `PutEvents` in batches (at most 10 entries and 256 KiB per request). Entries that
 *   EventBridge reports as failed (`ErrorCode` in the result, e.g. ThrottlingException) are sent again
 *   with exponential backoff; after `maxAttempts` the publish throws UnavailableError naming them.
 *   Errors of the SDK itself (network, HTTP 5xx, throttling after the SDK's own retries) become
 *   UnavailableError with the SDK error as `cause`.
 * - `subscribe` registers a handler in this process. On AWS the CDK stack creates one rule per
 *   subscription (same name, same pattern) whose target is that step's Lambda function
 *   (functions/engine-step.ts), which calls `dispatch`.
 * - `dispatch` is what that function calls with the event EventBridge delivered: it validates the envelope
 *   and runs the matching handlers; if any throws, it throws after the others ran, so Lambda's async
 *   retry redelivers (handlers are idempotent).
 *
 * Event ids. EventBridge gives every accepted entry an id of its own, but the port promises that the
 * envelope's `id` is the one the publisher chose (consumers deduplicate on it, including across a
 * publisher's retries). So the id travels in the detail under {@link EVENT_ID_DETAIL_KEY} and
 * `dispatch` moves it back to `id`, handing handlers the detail exactly as published. Its bytes count
 * toward the 256 KiB limit, and rule patterns on AWS see the key (and EventBridge's own `id`).
 */

/** EventBridge's limits for one PutEvents request. */
export const MAX_ENTRIES_PER_REQUEST = 10;
export const MAX_REQUEST_BYTES = 256 * 1024;

export { EVENT_ID_DETAIL_KEY };

/** Entry error codes that no retry can fix: the entry itself is wrong. */
const REJECTED_ENTRY_CODES = new Set(["InvalidArgument", "MalformedDetail"]);

export interface EventBridgeEventBusOptions {
  client: EventBridgeClient;
  /** Name or ARN of the event bus. */
  eventBusName: string;
  /** Used to name the bus ARN (for logs and wiring); envelopes carry the account EventBridge set. */
  account?: string;
  region?: string;
  /** PutEvents attempts for entries EventBridge reports as failed (default 5). */
  maxAttempts?: number;
  /** Delay before attempt n+1 (default: exponential from 100 ms, capped at 5 s, with jitter). */
  retryDelayMs?: (attempt: number) => number;
  /** Injectable for tests. */
  sleep?: (ms: number) => Promise<void>;
  /**
   * The commands that go to their step's queue instead of the bus (sqs-command-queues.ts; those its
   * `alsoOnBus` takes go to both). None: every event goes on the bus.
   */
  commands?: SqsCommandQueues;
}

export interface DispatchOptions {
  /**
   * Run only this subscription's handler (when the rule's target passes its name, e.g. through an
   * input transformer). Without it every matching handler runs; with one rule per subscription that
   * means an event matching two rules runs each handler twice (harmless, handlers are idempotent).
   */
  subscription?: string;
}

/** 100 ms * 2^(attempt-1), capped at 5 s, with "equal jitter" (between half and all of it). */
export function defaultRetryDelayMs(attempt: number): number {
  const ceiling = Math.min(5000, 100 * 2 ** (attempt - 1));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

const sleepFor = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The event EventBridge delivers to a target. */
const EnvelopeSchema = z.object({
  version: z.literal("0"),
  id: z.string().min(1),
  "detail-type": z.string().min(1),
  source: z.string().min(1),
  account: z.string(),
  time: z.string().min(1),
  region: z.string(),
  resources: z.array(z.string()),
  detail: z.record(z.string(), z.unknown()),
});

interface PendingEntry {
  id: string;
  entry: PutEventsRequestEntry;
  size: number;
}

interface FailedEntry {
  id: string;
  errorCode: string;
  errorMessage: string;
}

export class EventBridgeEventBus implements EventBus {
  readonly eventBusName: string;
  /** `arn:aws:events:<region>:<account>:event-bus/<name>` when account and region are known. */
  readonly eventBusArn: string | undefined;
  readonly #client: EventBridgeClient;
  readonly #maxAttempts: number;
  readonly #retryDelayMs: (attempt: number) => number;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #commands: EventBridgeEventBusOptions["commands"];
  readonly #subs = new SubscriptionRegistry();
  readonly #inflight = new Set<Promise<unknown>>();
  readonly #log = componentLogger("eventbridge-event-bus");
  #closed = false;

  constructor(options: EventBridgeEventBusOptions) {
    if (!options.eventBusName) throw new ValidationError("EventBridgeEventBus needs an eventBusName");
    const maxAttempts = options.maxAttempts ?? 5;
    if (!Number.isInteger(maxAttempts) || maxAttempts < 1) {
      throw new ValidationError("EventBridgeEventBus maxAttempts must be a positive integer", [
        `got ${maxAttempts}`,
      ]);
    }
    this.#client = options.client;
    this.eventBusName = options.eventBusName;
    this.eventBusArn = options.eventBusName.startsWith("arn:")
      ? options.eventBusName
      : options.account && options.region
        ? `arn:aws:events:${options.region}:${options.account}:event-bus/${options.eventBusName}`
        : undefined;
    this.#maxAttempts = maxAttempts;
    this.#retryDelayMs = options.retryDelayMs ?? defaultRetryDelayMs;
    this.#sleep = options.sleep ?? sleepFor;
    this.#commands = options.commands;
  }

  async publish(published: readonly BusEventInput[]): Promise<void> {
    this.#assertOpen();
    const events = published.map(traced);
    for (const e of events) assertPublishable(e);
    const commands = this.#commands;
    const queued = commands ? events.filter((e) => commands.queues(e.detailType)) : [];
    const onBus =
      commands && queued.length > 0
        ? events.filter((e) => !commands.queues(e.detailType) || commands.alsoOnBus(e))
        : events;
    // Build every entry first: nothing is sent when any event is invalid.
    const entries = onBus.map((e) => this.#toEntry(e));
    await this.#track(
      Promise.all([this.#sendAll(entries), queued.length > 0 ? commands?.send(queued) : undefined]),
    );
  }

  subscribe(subscription: Subscription): () => void {
    this.#assertOpen();
    return this.#subs.add(subscription);
  }

  /** Called by a step's Lambda function with the event EventBridge delivered. */
  async dispatch(envelope: unknown, options: DispatchOptions = {}): Promise<void> {
    this.#assertOpen();
    const event = parseDelivered(envelope);
    const targets = this.#subs.matching(event, options.subscription);
    if (targets.length === 0) {
      this.#log.debug("no subscription matched a delivered event", {
        eventId: event.id,
        subscription: options.subscription,
      });
      return;
    }
    await this.#track(this.#runHandlers(targets, event));
  }

  async close(): Promise<void> {
    this.#closed = true;
    while (this.#inflight.size > 0) await Promise.allSettled([...this.#inflight]);
    this.#subs.clear();
  }

  #assertOpen(): void {
    if (this.#closed) throw new UnavailableError(`The event bus ${this.eventBusName} is closed`);
  }

  #track<T>(p: Promise<T>): Promise<T> {
    this.#inflight.add(p);
    void p.then(
      () => this.#inflight.delete(p),
      () => this.#inflight.delete(p),
    );
    return p;
  }

  /** `e` has passed assertPublishable: id, size and time are known good. */
  #toEntry(e: BusEventInput): PendingEntry {
    const detail = wireDetailJson(e, JSON.stringify(e.detail));
    const entry: PutEventsRequestEntry = {
      EventBusName: this.eventBusName,
      Source: e.source,
      DetailType: e.detailType,
      Detail: detail,
    };
    if (e.resources !== undefined && e.resources.length > 0) entry.Resources = [...e.resources];
    if (e.time !== undefined) entry.Time = new Date(e.time);
    const size = entrySize(e, detail);
    return { id: e.id, entry, size };
  }

  async #sendAll(entries: readonly PendingEntry[]): Promise<void> {
    // The batches at once: EventBridge orders nothing between entries anyway.
    await Promise.all(batches(entries).map((batch) => this.#sendBatch(batch)));
  }

  async #sendBatch(batch: readonly PendingEntry[]): Promise<void> {
    let pending = batch;
    for (let attempt = 1; ; attempt++) {
      const result = await this.#putEvents(pending);
      const failed = failedEntries(pending, result);
      if (failed.length === 0) return;

      const rejected = failed.filter((f) => REJECTED_ENTRY_CODES.has(f.errorCode));
      if (rejected.length > 0) {
        throw new ValidationError(
          `EventBridge rejected ${rejected.length} bus event(s)`,
          rejected.map((f) => `${f.id}: ${f.errorCode} ${f.errorMessage}`.trim()),
        );
      }
      if (attempt >= this.#maxAttempts) {
        throw new UnavailableError(
          `EventBridge did not accept ${failed.length} bus event(s) after ${attempt} attempts: ${failed
            .map((f) => `${f.id} (${f.errorCode})`)
            .join(", ")}`,
          { details: { eventBusName: this.eventBusName, attempts: attempt, failed } },
        );
      }
      this.#log.warn("PutEvents entries failed; retrying", {
        eventBusName: this.eventBusName,
        attempt,
        failed: failed.map((f) => `${f.id} (${f.errorCode})`),
      });
      await this.#sleep(this.#retryDelayMs(attempt));
      const retry = new Set(failed.map((f) => f.id));
      pending = pending.filter((p) => retry.has(p.id));
    }
  }

  async #putEvents(pending: readonly PendingEntry[]): Promise<PutEventsResponse> {
    try {
      return await this.#client.send(new PutEventsCommand({ Entries: pending.map((p) => p.entry) }));
    } catch (error) {
      throw this.#mapSdkError(
        error,
        pending.map((p) => p.id),
      );
    }
  }

  #mapSdkError(error: unknown, ids: readonly string[]): ArborError {
    const name = error instanceof Error ? error.name : "UnknownError";
    const message = error instanceof Error ? error.message : String(error);
    if (name === "ValidationException") {
      return new ValidationError(
        `EventBridge rejected the PutEvents request for ${ids.join(", ")}`,
        [message],
        {
          cause: error,
        },
      );
    }
    return new UnavailableError(
      `EventBridge PutEvents failed for ${ids.join(", ")} (${name}${httpStatus(error) ? ` HTTP ${httpStatus(error)}` : ""}): ${message}`,
      {
        cause: error,
        details: { eventBusName: this.eventBusName, ids, error: name, httpStatus: httpStatus(error) },
      },
    );
  }

  async #runHandlers(targets: readonly CompiledSubscription[], event: BusEnvelope): Promise<void> {
    const results = await Promise.allSettled(
      targets.map(async (sub) => {
        await sub.handler(structuredClone(event));
      }),
    );
    const failures: { subscription: string; error: unknown }[] = [];
    results.forEach((r, i) => {
      const sub = targets[i];
      if (r.status === "rejected" && sub) failures.push({ subscription: sub.name, error: r.reason });
    });
    if (failures.length === 0) return;
    for (const f of failures) {
      this.#log.warn("handler failed; the event will be redelivered", {
        subscription: f.subscription,
        eventId: event.id,
        error: f.error instanceof Error ? f.error : String(f.error),
      });
    }
    const [only] = failures;
    if (failures.length === 1 && only) throw only.error;
    throw new AggregateError(
      failures.map((f) => f.error),
      `${failures.length} handlers failed for event ${event.id}: ${failures.map((f) => f.subscription).join(", ")}`,
    );
  }
}

/** Validates what EventBridge delivered and restores the publisher's id and detail. */
function parseDelivered(input: unknown): BusEnvelope {
  const parsed = EnvelopeSchema.safeParse(input);
  if (!parsed.success) throw new ValidationError("Invalid EventBridge event", formatIssues(parsed.error));
  const { detail, ...rest } = parsed.data;
  const { [EVENT_ID_DETAIL_KEY]: carried, [TRACE_DETAIL_KEY]: traceparent, ...published } = detail;
  if (carried !== undefined && (typeof carried !== "string" || carried.length === 0)) {
    throw new ValidationError("Invalid EventBridge event", [
      `detail.${EVENT_ID_DETAIL_KEY} must be a non-empty string`,
    ]);
  }
  // A trace context that is not one is dropped, not refused: it only links spans.
  const trace = typeof traceparent === "string" && parseTraceparent(traceparent) ? { traceparent } : {};
  return { ...rest, id: carried ?? rest.id, detail: published, ...trace };
}

/** Groups entries so that no request exceeds 10 entries or 256 KiB. */
function batches(entries: readonly PendingEntry[]): PendingEntry[][] {
  const out: PendingEntry[][] = [];
  let current: PendingEntry[] = [];
  let bytes = 0;
  for (const e of entries) {
    if (
      current.length > 0 &&
      (current.length >= MAX_ENTRIES_PER_REQUEST || bytes + e.size > MAX_REQUEST_BYTES)
    ) {
      out.push(current);
      current = [];
      bytes = 0;
    }
    current.push(e);
    bytes += e.size;
  }
  if (current.length > 0) out.push(current);
  return out;
}

function failedEntries(pending: readonly PendingEntry[], result: PutEventsResponse): FailedEntry[] {
  const results = result.Entries ?? [];
  if (results.length !== pending.length) {
    throw new UnavailableError(
      `EventBridge answered PutEvents with ${results.length} result entries for ${pending.length} events`,
      { details: { ids: pending.map((p) => p.id) } },
    );
  }
  const failed: FailedEntry[] = [];
  pending.forEach((p, i) => {
    const r = results[i];
    if (r?.ErrorCode) failed.push({ id: p.id, errorCode: r.ErrorCode, errorMessage: r.ErrorMessage ?? "" });
    else if (!r?.EventId)
      failed.push({ id: p.id, errorCode: "MissingEventId", errorMessage: "no EventId returned" });
  });
  return failed;
}

function httpStatus(error: unknown): number | undefined {
  if (typeof error !== "object" || error === null || !("$metadata" in error)) return undefined;
  const metadata: unknown = error.$metadata;
  if (typeof metadata !== "object" || metadata === null || !("httpStatusCode" in metadata)) return undefined;
  return typeof metadata.httpStatusCode === "number" ? metadata.httpStatusCode : undefined;
}
