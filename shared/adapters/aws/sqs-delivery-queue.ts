import {
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { UnavailableError } from "../../kernel/errors.ts";
import { checkEnqueue, type DeliveryQueue, deliveryMessage } from "../../ports/delivery-queue.ts";

/**
 * The delivery queue on Amazon SQS: each id is one message, `{"deliveryId":"dlv_..."}`, with the
 * message attribute `arbor-message: notify.delivery` (kept when the queue's redrive policy moves
 * it to the dead-letter queue, so `arbor dlq redrive` knows it), sent in batches of ten
 * (SendMessageBatch), `DelaySeconds` per message. Entries SQS refuses are sent once more, then
 * the call fails (UnavailableError naming how many) and the caller's own retry, or the notify
 * sweep, queues them again: the records are the truth, a message only a reminder.
 */
export const DELIVERY_MESSAGE_KIND = "notify.delivery";
export const MESSAGE_KIND_ATTRIBUTE = "arbor-message";

export interface SqsDeliveryQueueOptions {
  client: SQSClient;
  queueUrl: string;
}

export class SqsDeliveryQueue implements DeliveryQueue {
  readonly #o: SqsDeliveryQueueOptions;

  constructor(options: SqsDeliveryQueueOptions) {
    this.#o = options;
  }

  async enqueue(ids: readonly string[], options: { delaySeconds?: number } = {}): Promise<void> {
    const delaySeconds = options.delaySeconds ?? 0;
    checkEnqueue(ids, delaySeconds);
    const unique = [...new Set(ids)];
    for (let i = 0; i < unique.length; i += 10) {
      let entries = unique.slice(i, i + 10).map(
        (id, n): SendMessageBatchRequestEntry => ({
          Id: `m${n}`,
          MessageBody: deliveryMessage(id),
          ...(delaySeconds > 0 ? { DelaySeconds: delaySeconds } : {}),
          MessageAttributes: {
            [MESSAGE_KIND_ATTRIBUTE]: { DataType: "String", StringValue: DELIVERY_MESSAGE_KIND },
          },
        }),
      );
      for (let attempt = 1; entries.length > 0; attempt++) {
        const out = await this.#o.client.send(
          new SendMessageBatchCommand({ QueueUrl: this.#o.queueUrl, Entries: entries }),
        );
        const failed = new Set((out.Failed ?? []).map((f) => f.Id));
        const refused = entries.filter((e) => failed.has(e.Id));
        if (refused.length > 0 && attempt >= 2) {
          const first = out.Failed?.[0];
          throw new UnavailableError(
            `SQS did not take ${refused.length} delivery message(s) on ${this.#o.queueUrl}` +
              `${first ? ` (${first.Code}: ${first.Message})` : ""}; the notify sweep queues them again`,
          );
        }
        entries = refused;
      }
    }
  }
}
