import * as z from "zod";
import type { ArborLogger } from "../kernel/logger.ts";
import {
  type DeliveryQueue,
  delayUntil,
  deliveryOfMessage,
  MAX_DELAY_SECONDS,
} from "../ports/delivery-queue.ts";
import { dueDeliveries } from "./deliveries.ts";
import type { NotifyService } from "./service.ts";
import { requestOfWakeup } from "./wakeups.ts";

/**
 * The notify path driven through queues (the AWS notify function, functions/notify.ts): wake-ups
 * and delivery ids arrive as queue messages, and what they call for is queued. How to drive it:
 *
 *   const q = new QueuedNotify(service, queue, log);
 *   const { batchItemFailures } = await q.handle(records);   // an SQS batch, from either queue
 *   await q.sweep();                                          // the schedule: reconcile all, queue what is due
 *   const off = q.queueRecorded(); ... await q.settled();    // a function that records (the API's subscribe, redrive)
 *
 * A message is either a delivery id (`{"deliveryId"}`, SqsDeliveryQueue) or an EventBridge event
 * (the wake rule's target: the event as it is). Per message:
 *   - a wake-up: `reconcile(requestOfWakeup(event))`, and the ids it recorded are queued;
 *   - a delivery: `attempt(id)`; "busy" (its tenant's or host's lane is full, lanes.ts): queued
 *     again after busyDelaySeconds; "retry": queued again with a delay until the record's nextAttemptAt
 *     (at most 15 minutes, SQS's limit; the retry schedule's longest delay is 10); "delivered",
 *     "dead" (the record is dead: an operator redrives it), "skipped" (not due, or another worker
 *     holds it: whoever holds it queues its own retry, and the sweep catches a holder that died),
 *     "lost": done with the message;
 *   - a message that is neither is logged and dropped (sending it again would not help).
 * A message whose handling throws (the state table does not answer, the queue refuses the retry)
 * is reported in `batchItemFailures`: only it comes back after the visibility timeout, and after
 * the queue's maxReceiveCount it goes to the dead-letter queue (`arbor dlq redrive` sends it back).
 */
export interface QueueMessage {
  messageId: string;
  body: string;
}

export interface BatchResult {
  batchItemFailures: { itemIdentifier: string }[];
}

const WakeEventSchema = z.looseObject({
  id: z.string().min(1),
  source: z.string().min(1),
  "detail-type": z.string().min(1),
  detail: z.record(z.string(), z.unknown()),
});

export type MessageOutcome =
  | "woke"
  | "delivered"
  | "retry"
  | "dead"
  | "skipped"
  | "lost"
  | "busy"
  | "dropped";

/**
 * When a delivery whose lanes are full is looked at again: a quarter of how long it has been due,
 * from 5 seconds to the queue's longest delay. A tenant whose receivers hang and whose deliveries
 * pile up then has them come back ever less often (they cost the queue's consumers little),
 * while one held back for a moment is tried again soon.
 */
export function busyDelaySeconds(dueSince: Date, now: Date, random: () => number = Math.random): number {
  const waited = Math.max(0, now.getTime() - dueSince.getTime()) / 1000;
  const base = Math.min(MAX_DELAY_SECONDS, Math.max(5, waited / 4));
  return Math.min(MAX_DELAY_SECONDS, Math.round(base * (0.75 + random() / 2)));
}

export class QueuedNotify {
  readonly #pending = new Set<Promise<void>>();
  readonly service: NotifyService;
  readonly queue: DeliveryQueue;
  readonly log: ArborLogger;

  constructor(service: NotifyService, queue: DeliveryQueue, log: ArborLogger) {
    this.service = service;
    this.queue = queue;
    this.log = log;
  }

  /** One batch: each message on its own; the ones that threw are reported for SQS to hand out again. */
  async handle(messages: readonly QueueMessage[]): Promise<BatchResult> {
    const outcomes = await Promise.allSettled(messages.map((m) => this.message(m)));
    const batchItemFailures: BatchResult["batchItemFailures"] = [];
    outcomes.forEach((o, i) => {
      const m = messages[i] as QueueMessage;
      if (o.status === "rejected") {
        this.log.error("notify: a message failed; SQS hands it out again, then dead-letters it", {
          messageId: m.messageId,
          error: o.reason instanceof Error ? o.reason : String(o.reason),
        });
        batchItemFailures.push({ itemIdentifier: m.messageId });
      }
    });
    return { batchItemFailures };
  }

  /** One message (throws when it should be handed out again). */
  async message(m: QueueMessage): Promise<MessageOutcome> {
    const id = deliveryOfMessage(m.body);
    if (id) return this.deliver(id);
    let json: unknown;
    try {
      json = JSON.parse(m.body);
    } catch {
      json = undefined;
    }
    const event = WakeEventSchema.safeParse(json);
    const root = event.success ? requestOfWakeup(event.data) : undefined;
    if (!root) {
      this.log.warn("notify: a message that is neither a delivery nor a wake-up was dropped", {
        messageId: m.messageId,
        body: m.body.slice(0, 500),
      });
      return "dropped";
    }
    const ids = await this.service.reconcile(root);
    await this.queue.enqueue(ids);
    return "woke";
  }

  /** One attempt at a delivery; a retry is queued again for its next time. */
  async deliver(id: string): Promise<MessageOutcome> {
    const outcome = await this.service.attempt(id);
    // "skipped" is also what a store that does not answer gives (attempt takes it for a busy lock):
    // read the record, so an outage throws and SQS hands the message out again.
    if (outcome === "skipped") await this.service.delivery(id);
    if (outcome === "retry") {
      const record = await this.service.delivery(id);
      if (record?.status === "pending") {
        const delaySeconds = delayUntil(new Date(record.data.nextAttemptAt), this.service.deps.clock());
        await this.queue.enqueue([id], { delaySeconds });
      }
    }
    if (outcome === "busy") {
      // Its tenant's (or its host's) lane is full of attempts in flight: the message comes back
      // later, and this consumer moves on to other tenants' deliveries.
      const record = await this.service.delivery(id);
      if (record?.status === "pending" || record?.status === "sending") {
        const delaySeconds = busyDelaySeconds(new Date(record.updatedAt), this.service.deps.clock());
        await this.queue.enqueue([id], { delaySeconds });
      }
    }
    return outcome;
  }

  /**
   * The schedule's run: every request with an open subscription reconciled (what a lost wake-up
   * missed is recorded), then every delivery due now queued (what a lost message, a dead holder's
   * lease or a recording without a queue left behind). Returns how many ids it queued.
   */
  async sweep(limit = 500): Promise<{ recorded: number; queued: number }> {
    const recorded = await this.service.sweep();
    const due = await dueDeliveries(this.service.deps.state, this.service.deps.clock(), limit);
    const ids = [...new Set([...recorded, ...due])];
    await this.queue.enqueue(ids);
    return { recorded: recorded.length, queued: ids.length };
  }

  /**
   * Queues every delivery the service records from now on (a subscription's first notification, a
   * redrive); returns a function that stops it. Sends are in flight until `settled()`.
   */
  queueRecorded(): () => void {
    return this.service.onRecorded((ids) => {
      const sent: Promise<void> = this.queue
        .enqueue(ids)
        .catch((error: unknown) => {
          // The record is due now: the schedule's sweep queues it.
          this.log.warn("notify: recorded deliveries were not queued; the sweep will", {
            ids: ids.join(","),
            error: error instanceof Error ? error : String(error),
          });
        })
        .finally(() => this.#pending.delete(sent));
      this.#pending.add(sent);
    });
  }

  /** Resolves once every send `queueRecorded` started has ended (a Lambda handler awaits it before returning). */
  async settled(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all([...this.#pending]);
  }
}
