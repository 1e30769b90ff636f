import { randomUUID } from "node:crypto";
import {
  type BatchResultErrorEntry,
  GetQueueAttributesCommand,
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { UnavailableError, ValidationError } from "../../kernel/errors.ts";
import { compilePattern, type EventPattern } from "../../kernel/event-pattern/index.ts";
import type { BusEnvelope, BusEventInput } from "../../ports/event-bus.ts";
import { toEnvelope, wireDetail } from "../shared/bus-envelope.ts";

/**
 * The engine's commands on Amazon SQS: a command that has exactly one consumer (a step: plan,
 * ready, turn, resume, activity) goes to that step's own queue instead of crossing an EventBridge
 * rule, whose delivery takes about ten times as long (bench/aws-path-model.ts, LATENCIES). Each
 * message is what the step function takes, as a rule's input transformer would have made it:
 *
 *   {"subscription": "<route>", "event": <the event as EventBridge would deliver it>}
 *
 * with the publisher's id and trace context in the detail (bus-envelope.ts), so the step's
 * `dispatch` reads it exactly as it reads a rule's delivery. Sent in batches of ten per queue
 * (SendMessageBatch), the batches at once; entries SQS refuses are sent again with backoff, then
 * the publish fails naming them (the step that published fails, and its own retry publishes again
 * under the same ids). The message attribute `arbor-message: engine.command` stays with a message
 * the queue's redrive policy moves to the dead-letter queue, so `arbor dlq redrive` knows it.
 */
export const COMMAND_MESSAGE_KIND = "engine.command";
const MESSAGE_KIND_ATTRIBUTE = "arbor-message";

export interface CommandQueue {
  /** The step (route) that consumes it: the message's `subscription`. */
  subscription: string;
  queueUrl: string;
}

export interface SqsCommandQueuesOptions {
  client: SQSClient;
  /** By detail-type: the queue of each command. */
  queues: Readonly<Record<string, CommandQueue>>;
  /**
   * The commands a rule of the bus takes too (the notify path's wake-ups): they go to their queue
   * and on the bus. None: a queued command goes to its queue only.
   */
  alsoOnBus?: EventPattern;
  /** What the envelopes say (as EventBridge's would). */
  account?: string;
  region: string;
  /** Attempts for entries SQS refuses (default 4). */
  maxAttempts?: number;
  sleep?: (ms: number) => Promise<void>;
}

const sleepFor = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** How long a queue's count, once read, is answered from memory (`inQueue`). */
export const WAITING_TTL_MS = 1_000;
const WAITING = "ApproximateNumberOfMessages" as const;
const IN_FLIGHT = "ApproximateNumberOfMessagesNotVisible" as const;

export class SqsCommandQueues {
  readonly #o: SqsCommandQueuesOptions;
  readonly #alsoOnBus: ((event: unknown) => boolean) | undefined;
  /** Each queue's count as last read (or being read), by detail-type: at most one read a second. */
  readonly #backlog = new Map<string, { at: number; count: Promise<number> }>();

  constructor(options: SqsCommandQueuesOptions) {
    this.#o = options;
    this.#alsoOnBus = options.alsoOnBus ? compilePattern(options.alsoOnBus) : undefined;
  }

  /** Whether events of this detail-type go to a queue. */
  queues(detailType: string): boolean {
    return Object.hasOwn(this.#o.queues, detailType);
  }

  /** Whether a queued command goes on the bus as well (`alsoOnBus`). */
  alsoOnBus(e: BusEventInput): boolean {
    return this.#alsoOnBus?.(this.#envelope(e)) ?? false;
  }

  /** The event as EventBridge would deliver it: the publisher's id and trace context in the detail. */
  #envelope(e: BusEventInput): BusEnvelope {
    const where = { account: this.#o.account ?? "", region: this.#o.region, now: new Date() };
    const { traceparent: _inDetail, ...envelope } = toEnvelope({ ...e, detail: wireDetail(e) }, where);
    return envelope;
  }

  /**
   * About how many commands of this detail-type are in their queue: waiting for a step, or taken by
   * one that runs (SQS's ApproximateNumberOfMessages and ApproximateNumberOfMessagesNotVisible),
   * read at most once every WAITING_TTL_MS by this process. Undefined when the detail-type has no
   * queue; rejects with an UnavailableError when SQS does not answer (the next call reads again).
   */
  async inQueue(detailType: string, now = Date.now()): Promise<number | undefined> {
    const queueUrl = this.#o.queues[detailType]?.queueUrl;
    if (!queueUrl) return undefined;
    const known = this.#backlog.get(detailType);
    if (known && now - known.at < WAITING_TTL_MS) return known.count;
    const unavailable = (why: string, cause?: unknown) =>
      new UnavailableError(`SQS GetQueueAttributes of ${queueUrl} failed: ${why}`, {
        ...(cause === undefined ? {} : { cause }),
        details: { queueUrl },
      });
    const count = this.#o.client
      .send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: [WAITING, IN_FLIGHT] }))
      .then(
        (out) => {
          let n = 0;
          for (const name of [WAITING, IN_FLIGHT] as const) {
            // Digits only: Number("") and Number(" ") are 0, an idle queue read from no count.
            const told = out.Attributes?.[name];
            if (told === undefined || !/^\d+$/.test(told))
              throw unavailable(`${name} is ${JSON.stringify(told)}`);
            n += Number(told);
          }
          return n;
        },
        (error: unknown) => {
          throw unavailable(error instanceof Error ? error.message : String(error), error);
        },
      );
    // A failed read is not kept: the next call reads again.
    count.catch(() => {
      if (this.#backlog.get(detailType)?.count === count) this.#backlog.delete(detailType);
    });
    this.#backlog.set(detailType, { at: now, count });
    return count;
  }

  /** The step input a command's message carries (what a rule's input transformer makes of it). */
  message(e: BusEventInput): { subscription: string; event: BusEnvelope } {
    const queue = this.#o.queues[e.detailType];
    if (!queue)
      throw new ValidationError(`No command queue for ${e.detailType}: it is not one of the queued commands`);
    // EventBridge gives each event an id of its own; the publisher's travels in the detail.
    return { subscription: queue.subscription, event: { ...this.#envelope(e), id: randomUUID() } };
  }

  /** Sends each event to its command's queue (events checked by the caller: assertPublishable). */
  async send(events: readonly BusEventInput[]): Promise<void> {
    const byQueue = new Map<string, SendMessageBatchRequestEntry[]>();
    for (const e of events) {
      const url = this.#o.queues[e.detailType]?.queueUrl as string;
      const entries = byQueue.get(url) ?? [];
      entries.push({
        Id: `m${entries.length}`,
        MessageBody: JSON.stringify(this.message(e)),
        MessageAttributes: {
          [MESSAGE_KIND_ATTRIBUTE]: { DataType: "String", StringValue: COMMAND_MESSAGE_KIND },
        },
      });
      byQueue.set(url, entries);
    }
    const batches: [string, SendMessageBatchRequestEntry[]][] = [];
    for (const [url, entries] of byQueue)
      for (let i = 0; i < entries.length; i += 10)
        batches.push([url, entries.slice(i, i + 10).map((e, n) => ({ ...e, Id: `m${n}` }))]);
    await Promise.all(batches.map(([url, entries]) => this.#sendBatch(url, entries)));
  }

  async #sendBatch(queueUrl: string, batch: SendMessageBatchRequestEntry[]): Promise<void> {
    const maxAttempts = this.#o.maxAttempts ?? 4;
    let entries = batch;
    for (let attempt = 1; ; attempt++) {
      let failed: BatchResultErrorEntry[];
      try {
        const out = await this.#o.client.send(
          new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: entries }),
        );
        failed = out.Failed ?? [];
      } catch (error) {
        const name = error instanceof Error ? error.name : "UnknownError";
        throw new UnavailableError(
          `SQS SendMessageBatch to ${queueUrl} failed (${name}): ${error instanceof Error ? error.message : String(error)}`,
          { cause: error, details: { queueUrl } },
        );
      }
      if (failed.length === 0) return;
      const ids = new Set(failed.map((f) => f.Id));
      if (attempt >= maxAttempts) {
        const first = failed[0];
        throw new UnavailableError(
          `SQS did not take ${failed.length} command(s) on ${queueUrl} after ${attempt} attempts` +
            `${first ? ` (${first.Code}: ${first.Message})` : ""}`,
          { details: { queueUrl, failed } },
        );
      }
      await (this.#o.sleep ?? sleepFor)(Math.min(2000, 50 * 2 ** attempt));
      entries = entries.filter((e) => ids.has(e.Id));
    }
  }
}
