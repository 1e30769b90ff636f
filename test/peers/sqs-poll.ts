import { randomUUID } from "node:crypto";
import { DeleteMessageCommand, ReceiveMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { NotifyHandler } from "../../functions/notify.ts";
import type { BatchResult } from "../../shared/notify/queueing.ts";
import type { SqsPeer } from "./sqs-peer.ts";

/** Lambda's SQS record, as the event source mapping hands it to the function. */
export interface SqsRecord {
  messageId: string;
  receiptHandle: string;
  body: string;
  attributes: Record<string, string>;
  messageAttributes: Record<string, unknown>;
  eventSource: "aws:sqs";
  eventSourceARN: string;
  awsRegion: string;
}

/**
 * Lambda's event source mapping, for the offline tests: batches of the queue's visible messages
 * to `fn` until none is left; a message `fn` reports failed stays (it comes back after the
 * visibility timeout), the others are deleted. Returns how many messages were handed over.
 */
export async function pollQueue(
  sqs: SQSClient,
  peer: SqsPeer,
  queueUrl: string,
  fn: NotifyHandler,
): Promise<number> {
  let handled = 0;
  for (;;) {
    const out = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        VisibilityTimeout: 360,
        MessageAttributeNames: ["All"],
        MessageSystemAttributeNames: ["All"],
      }),
    );
    const messages = out.Messages ?? [];
    if (messages.length === 0) return handled;
    const Records: SqsRecord[] = messages.map((m) => ({
      messageId: m.MessageId ?? "",
      receiptHandle: m.ReceiptHandle ?? "",
      body: m.Body ?? "",
      attributes: (m.Attributes ?? {}) as Record<string, string>,
      messageAttributes: m.MessageAttributes ?? {},
      eventSource: "aws:sqs",
      eventSourceARN: peer.arnOf(queueUrl),
      awsRegion: "us-east-1",
    }));
    const result = (await fn({ Records }, { awsRequestId: randomUUID() })) as BatchResult;
    const failed = new Set(result.batchItemFailures.map((f) => f.itemIdentifier));
    for (const m of messages)
      if (!failed.has(m.MessageId ?? ""))
        await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle }));
    handled += messages.length;
    if (failed.size === messages.length) return handled;
  }
}
